"""Where each worker of a server is (issue 27): py-spy stacks of every rank, grouped.

group.py    pure: identical stacks grouped across ranks, the differing ranks, the phase named
roles.py    pure: a process's role (worker, engine core, API server) and a worker's rank, from its title
record.py   pure: a py-spy record's samples as shares per function and per path; two compared
collect.py  the workers of a profile's server found, py-spy run on the box (box/stacks.py)
"""
