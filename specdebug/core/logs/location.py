"""`HOST:PATH` vs local path, for `scan LOG` and `grep HOST:PATH`.

Host specs may contain ':' themselves (`user@host:2222`, `[::1]:22`) and paths may too, so the
rule is: split on the LAST ':' that is followed by '/' or '~' and has no '/' before it (a host
never contains '/'). Remote paths must therefore be absolute or ~-relative. Anything else, e.g.
`logs/server.log`, `./a:/b.log` or `host:relative.log`, is a local path.
"""

from __future__ import annotations

import re

# greedy [^/]* backtracks to the last ':' before the first '/' that is followed by / or ~
_SPLIT = re.compile(r"^(?P<host>[^/]*):(?P<path>[/~].*)$", re.DOTALL)


def split_host_path(text: str) -> tuple[str | None, str]:
    """'gpubox:/var/log/x' -> ('gpubox', '/var/log/x'); 'u@h:2222:~/x' -> ('u@h:2222', '~/x');
    '/tmp/x' -> (None, '/tmp/x')."""
    m = _SPLIT.match(text)
    if not m or not m.group("host") or m.group("host").startswith(("~", ".")):
        return None, text
    return m.group("host"), m.group("path")
