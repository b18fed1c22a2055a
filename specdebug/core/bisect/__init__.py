"""Bisection of server configs: from "it got slower" to the knob that did it, in the fewest launches.

plan.py (pure search: binary, then ddmin) · judge.py (midpoint, noise band, drift) · gate.py (verify
gate from the log) · knobs.py (units, candidates) · trial.py (one launch) · run.py (the engine, an
async iterator of the events in models.py).
"""
