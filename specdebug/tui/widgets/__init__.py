"""Widgets shared by panes (kept apart so panes stay short and the widgets testable alone)."""
