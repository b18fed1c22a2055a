"""One module per server's pattern pack (data for the engine in `specdebug.core.logs.engine`).

The plug-in point for another server: add a module with a `Pack` and register it in
`specdebug.core.logs.patterns.PACKS` (and its detection evidence there).
"""
