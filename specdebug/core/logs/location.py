"""`HOST:PATH` vs local path, for `scan LOG` and `grep HOST:PATH`.

Host specs may contain ':' themselves (`user@host:2222`), so we split on the LAST ':' that is
followed by '/' or '~': remote paths must be absolute or ~-relative (the agent and the probe run
in the login directory, but a relative path would be ambiguous with a local file). Anything
else, e.g. `logs/server.log` or `./a:b.log`, is a local path.
"""

from __future__ import annotations

import re

_SPLIT = re.compile(r"^(?P<host>.+):(?P<path>[/~].*)$")  # greedy host: the LAST ':' before / or ~


def split_host_path(text: str) -> tuple[str | None, str]:
    """'gpubox:/var/log/x' -> ('gpubox', '/var/log/x'); 'u@h:2222:~/x' -> ('u@h:2222', '~/x');
    '/tmp/x' -> (None, '/tmp/x')."""
    m = _SPLIT.match(text)
    if not m:
        return None, text
    host = m.group("host")
    if "/" in host or host.startswith(("~", ".")):
        return None, text
    return host, m.group("path")
