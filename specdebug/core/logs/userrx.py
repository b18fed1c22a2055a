"""User regexes (profile `[patterns]`, `grep -e`) under a time bound per search.

Built-in packs are reviewed `re` patterns; a user's pattern may backtrack catastrophically
(`(a|aa)+$` on a long line), and `re` cannot be interrupted from a library. So user patterns run on
the `regex` engine with a timeout: one that overruns is cut off (it stops matching from then on)
and `cut` says so, naming it, so scan, grep and the Logs pane report it instead of hanging.
"""

from __future__ import annotations

import re
from typing import Any

import regex

from specdebug.core.limits import USER_REGEX_TIMEOUT_S


class UserPattern:
    """One named user pattern; `search` returns a match object (re-compatible API) or None."""

    __slots__ = ("name", "pattern", "timeout", "cut", "_rx", "_bounded")

    def __init__(self, name: str, source: str, timeout: float = USER_REGEX_TIMEOUT_S) -> None:
        re.compile(source)  # the dialect users write (and the box runs): its errors are the ones shown
        self.name = name
        self.pattern = source
        self.timeout = timeout
        self.cut: str | None = None
        try:
            self._rx: Any = regex.compile(source)
            self._bounded = True
        except regex.error:  # accepted by re but not by regex (rare): keep re, without a bound
            self._rx = re.compile(source)
            self._bounded = False

    def search(self, text: str) -> Any:
        if self.cut is not None:
            return None
        if not self._bounded:
            return self._rx.search(text)
        try:
            return self._rx.search(text, timeout=self.timeout)
        except TimeoutError:
            self.cut = (
                f"took longer than {self.timeout:g} s on one line of {len(text)} characters "
                "(catastrophic backtracking?); it was skipped from then on: simplify the pattern"
            )
            return None
