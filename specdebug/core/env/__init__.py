"""Did the environment reach the workers: the check behind `specdebug env` and the env pane.

model (query, verdicts, report), proc (parsing /proc files), report (the pure check), probe (the
reads on the box).  `specdebug.core.envcheck` re-exports the public names for existing callers.
"""
