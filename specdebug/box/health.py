"""A server's health URL asked from the box itself: an op of the resident helper (helper.py).

Why from the box: the server usually listens on 127.0.0.1 there, and no port forward is needed
for one GET.  Proxies from the environment are ignored (a box's http_proxy must not answer for
the local server).  Stdlib only, Python >= 3.7.

Op:  health {url, timeout} -> {status}: the HTTP status, 0 when nothing answered
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: never evaluated by the box's python3
    from collections.abc import Callable


def status_of(url: str, timeout: float) -> int:
    import urllib.error  # here: a one-shot process that only signals never pays for urllib
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except Exception:  # refused, reset, timed out, bad reply: all mean "no answer" to the caller
        return 0


def op_health(req: dict[str, Any]) -> dict[str, Any]:
    return {"status": status_of(str(req["url"]), float(req.get("timeout") or 2.0))}


OPS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {"health": op_health}
