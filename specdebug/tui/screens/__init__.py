"""Modal and full screens opened from the panes (help, pickers, confirmations, context views)."""
