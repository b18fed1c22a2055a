"""The speculation arithmetic (issue 27): what one draft+verify cycle costs and what it predicts.

arith.py    pure formulas: cycle cost, predicted tok/s, break-even accept length, the verify fit
points.py   the figures of each recorded result (draft tokens from argv, times from the log)
analyze.py  one session's configs put together: predictions, the fit, flagged verifies, causes
"""
