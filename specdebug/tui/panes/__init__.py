"""The panes of the main screen, one module per pane (views split out where a pane grows)."""
