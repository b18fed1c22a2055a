"""The box client: the Remote API services use (helper channel, one-shot fallback, streams), over a transport."""
