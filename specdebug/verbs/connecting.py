"""How a headless verb gets its connection: the agent's kept one, the system's ssh for a one-shot
verb, or a new asyncssh connection; and the first-attempt failures it reports at once.

Apart from verbs/common.py (output, exit codes, profiles): connecting is its own idea, and the
one-shot path through OpenSSH (remote/openssh.py) joined it (issue 43).
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from specdebug.remote.api import ConnState, ConnStatus, RemoteError

if TYPE_CHECKING:
    from specdebug.remote.api import Connection
    from specdebug.remote.factory import ConnectOptions
    from specdebug.transport.base import Transport

DEFAULT_CONNECT_TIMEOUT_S = 15.0

# set inside the local agent (specdebug.agent): open_remote takes a kept connection from it instead of
# connecting and closing one per verb
KEPT: contextvars.ContextVar[Callable[[str, argparse.Namespace], Awaitable[Connection]] | None] = (
    contextvars.ContextVar("kept_connections", default=None)
)

# set by cli.run_verb for a one-shot verb on the direct path (no agent answered): its connections go
# through the system's ssh (remote/openssh.py), asyncssh where that cannot serve
ONE_SHOT: contextvars.ContextVar[bool] = contextvars.ContextVar("one_shot", default=False)
# the verbs that take it: read-only questions that need no forwarded port and no keepalive figure
OPENSSH_VERBS = frozenset({"status", "env"})

# first-attempt failures a headless verb reports at once instead of retrying until the timeout
_FAST_FAIL = (
    ("name or service not known", "cannot resolve the host name"),
    ("nodename nor servname", "cannot resolve the host name"),
    ("no address associated with hostname", "cannot resolve the host name"),
    ("temporary failure in name resolution", "cannot resolve the host name (DNS not answering)"),
    ("connection refused", "connection refused"),
    ("network is unreachable", "network is unreachable"),
    ("no route to host", "no route to host"),
)
_NAME_HINT = (
    "check the spelling; an ssh config alias is read from ~/.ssh/config or the file given with -F FILE"
)
_ROUTE_HINT = "the box cannot be reached from here: a VPN, or a jump host (ProxyJump in the ssh config)?"
# what the user can do about each fast failure (verbs.common.fail prints it under the error)
_FAST_FAIL_HINTS = {
    "cannot resolve the host name": _NAME_HINT,
    "cannot resolve the host name (DNS not answering)": "the resolver does not answer: check the network, or use an address",
    "connection refused": (
        "nothing listens on that SSH port: is sshd running on the box, and is the port right "
        "(HOST:PORT, or Port in the ssh config)?"
    ),
    "network is unreachable": _ROUTE_HINT,
    "no route to host": _ROUTE_HINT,
}


def make_remote(host: str, args: argparse.Namespace, *, helper: bool = True) -> Connection:
    """helper=False: no resident probe helper (a one-shot verb pays the box's python3 start-up
    for nothing; a few exec channels are cheaper).  A one-shot verb (ONE_SHOT) connects through the
    system's ssh: asyncssh is then imported only where that cannot serve."""
    if ONE_SHOT.get():
        from specdebug.remote.client import BoxClient
        from specdebug.remote.openssh import openssh_transport

        transport = openssh_transport(
            host,
            getattr(args, "ssh_config", None),
            lambda: _asyncssh_transport(host, args),
            accept_new=bool(getattr(args, "accept_new_host_key", False)),
            connect_timeout=getattr(args, "connect_timeout", DEFAULT_CONNECT_TIMEOUT_S),
        )
        if transport is not None:
            return BoxClient(transport, state_dir=getattr(args, "state_dir", None), use_helper=helper)
    return connect_host_for(host, args, helper=helper)


def _asyncssh_transport(host: str, args: argparse.Namespace) -> Transport:
    """The transport make_remote builds without the OpenSSH path (that path's fallback)."""
    from specdebug.transport.address import transport_for

    return transport_for(host, _connect_options(args, helper=False).ssh)


def connect_host_for(host: str, args: argparse.Namespace, *, helper: bool = True) -> Connection:
    """A Connection through the transport the address names (asyncssh for SSH)."""
    from specdebug.remote.factory import connect_host

    return connect_host(host, _connect_options(args, helper=helper))


def _connect_options(args: argparse.Namespace, *, helper: bool) -> ConnectOptions:
    from specdebug.remote.factory import (
        ConnectOptions,
        SSHOptions,
        accept_and_save_keys,
        refuse_unknown_keys,
    )

    policy = accept_and_save_keys if getattr(args, "accept_new_host_key", False) else refuse_unknown_keys
    return ConnectOptions(
        ssh=SSHOptions(ssh_config=getattr(args, "ssh_config", None), on_host_key=policy),
        state_dir=getattr(args, "state_dir", None),
        use_helper=helper,
    )


def fast_fail_reason(error: str | None) -> str | None:
    """A first connect error not worth retrying in a headless verb (DNS, refused), as short text."""
    low = (error or "").lower()
    return next((say for needle, say in _FAST_FAIL if needle in low), None)


def _one_line(host: str, text: str) -> str:
    """`HOST: text` without saying HOST twice (remote errors often start with it already)."""
    text = text.strip()
    return text if text.startswith(f"{host}:") or text.startswith(f"{host} ") else f"{host}: {text}"


async def connect(remote: Connection, host: str, timeout: float, ssh_config: str | None = None) -> None:
    """Wait until connected; a refused port or an unknown name fails after the first attempt.

    Raises RemoteError with one line naming the host once."""
    failed: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def on_status(status: ConnStatus) -> None:
        reason = fast_fail_reason(status.last_error) if status.state is not ConnState.CONNECTED else None
        if reason and not failed.done() and remote.generation == 0:
            failed.set_result(reason)

    unsubscribe = remote.subscribe(on_status)
    await remote.start()
    waiter = asyncio.ensure_future(remote.wait_connected(timeout))
    try:
        either: set[asyncio.Future[Any]] = {waiter, failed}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if waiter.done():
            waiter.result()  # raises HostKeyRefused / NotConnected
            return
        from specdebug.remote.factory import address_note

        reason = failed.result()
        raise RemoteError(f"{host}: {reason}{address_note(host, ssh_config)}", _FAST_FAIL_HINTS.get(reason))
    except RemoteError as exc:
        raise RemoteError(_one_line(host, str(exc)), exc.hint) from exc
    finally:
        waiter.cancel()
        unsubscribe()
