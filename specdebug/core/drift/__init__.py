"""What changed on the box between two runs (issue 27): the snapshot and the comparison.

snapshot.py  takes one snapshot under the server's interpreter (box code: specdebug/box/drift.py)
compare.py   what differs between two snapshots, as human lines naming each change
describe.py  one snapshot as human lines (the drift verb and the TUI's drift view)
"""
