"""The Textual front end: one screen of panes over the core; every action has a headless verb twin."""
