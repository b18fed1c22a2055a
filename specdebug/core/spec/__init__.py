"""The speculation arithmetic (issue 27): what one draft+verify cycle costs and what it predicts.

arith.py    pure formulas: cycle cost, predicted tok/s, break-even accept length, the verify fit
points.py   the figures of each recorded result (draft tokens from argv, times from the log)
analyze.py  one session's configs put together: predictions, the fit, flagged verifies, causes
model.py    the advisor's formulas: E(k) from per-position acceptance, cycle against depth, intervals
advise.py   which depth is fastest (`spec --advise`): the grid, the best, what to measure next
tryout.py   `spec --try`: the advised depth launched, benchmarked, stopped, predicted vs measured
"""
