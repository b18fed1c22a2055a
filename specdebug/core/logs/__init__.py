"""Logs service: parse server logs into metrics, follow remote files, scan files after the fact.

The patterns themselves (packs, detection, key/value tails, NCCL env lines) belong to the engines
(specdebug.engines).  Modules: parser (stateful line parser), shapes + shapelearn (the parser's
cache of batch-line layouts: repeats parsed by one regex match, same results), stats (bounded series), scan (whole files), follow (remote follow by offset),
context (+-N lines around an offset), location (HOST:PATH), events (pydantic models).
"""

from specdebug.core.logs.context import ContextLine, read_context
from specdebug.core.logs.events import LogEvent, LogMatch, MetricSample
from specdebug.core.logs.follow import Follower, RawLine
from specdebug.core.logs.location import split_host_path
from specdebug.core.logs.matches import follow_matches
from specdebug.core.logs.parser import LogParser, PatternError
from specdebug.core.logs.scan import Analyzer, ScanResult, scan_chunks, scan_file, scan_lines, scan_remote
from specdebug.core.logs.stats import MetricStore, Series, SeriesStats

__all__ = [
    "ContextLine",
    "Follower",
    "RawLine",
    "follow_matches",
    "read_context",
    "split_host_path",
    "Analyzer",
    "LogEvent",
    "LogMatch",
    "LogParser",
    "MetricSample",
    "MetricStore",
    "PatternError",
    "ScanResult",
    "Series",
    "SeriesStats",
    "scan_chunks",
    "scan_file",
    "scan_lines",
    "scan_remote",
]
