"""The headless front end: one module per `specdebug VERB`, printing only through verbs/common.py."""
