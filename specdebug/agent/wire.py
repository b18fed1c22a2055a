"""The agent client's JSON lines over a Unix socket, from the interpreter's C modules only.

Why: `json`, `socket` and `re` (which json's Python layer and socket's enums pull in) cost 14 ms of
imports where the interpreter itself starts in 13 ms (interleaved `python -c`, idle machine): a verb
the warm agent answers paid more for its imports than for its question.  `_json` is the C half of
`json` (the same scanner and encoder, so the text is the same as json.dumps/loads give), `_socket`
the C half of `socket`; a Python without them (another implementation) takes `json`/`socket`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy takes the name as True)

if TYPE_CHECKING:
    from collections.abc import Callable


def _not_json(obj: object) -> object:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


try:
    import _json

    _ENCODE: Callable[[object, int], list[str]] | None = _json.make_encoder(
        None, _not_json, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True
    )
except (ImportError, AttributeError):  # pragma: no cover - CPython has _json
    _ENCODE = None


class _Context:
    """What `_json.make_scanner` reads off json.JSONDecoder (its defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict[str, str] = {}

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


try:
    _SCAN: Callable[[str, int], tuple[object, int]] | None = _json.make_scanner(_Context())  # type: ignore[arg-type]
except (NameError, AttributeError):  # pragma: no cover
    _SCAN = None


def dumps(obj: object) -> str:
    """json.dumps(obj) for the client's requests (dicts, lists, strings, numbers, booleans, None)."""
    if _ENCODE is None:  # pragma: no cover
        import json

        return json.dumps(obj)
    return "".join(_ENCODE(obj, 0))


def loads(data: bytes) -> object:
    """json.loads of one UTF-8 line; ValueError when it is not one JSON value."""
    text = data.decode("utf-8").strip(" \t\r\n")
    if _SCAN is None:  # pragma: no cover
        import json

        return json.loads(text)
    try:
        value, end = _SCAN(text, 0)
    except StopIteration as exc:
        raise ValueError(f"not JSON at {exc.value}") from None
    if end != len(text):
        raise ValueError(f"extra data at {end}")
    return value


try:
    import _socket

    _UNIX_STREAM = (_socket.AF_UNIX, _socket.SOCK_STREAM)
    _new_socket: Callable[..., _socket.socket] = _socket.socket
except (ImportError, AttributeError):  # pragma: no cover
    import socket as _socket  # type: ignore[no-redef]

    _UNIX_STREAM = (_socket.AF_UNIX, _socket.SOCK_STREAM)
    _new_socket = _socket.socket


class Connection:
    """One Unix-socket connection: `send` a line, `readline` the replies (bounded by the timeout)."""

    def __init__(self) -> None:
        self.sock = _new_socket(*_UNIX_STREAM)
        self._buffer = b""

    def settimeout(self, seconds: float) -> None:
        self.sock.settimeout(seconds)

    def connect(self, path: str) -> None:
        self.sock.connect(path)

    def send(self, obj: object) -> None:
        self.sock.sendall(dumps(obj).encode() + b"\n")

    def readline(self, limit: int) -> bytes:
        """The next line with its newline (b"" at the end; at most `limit` bytes, as a file's
        readline(limit)); TimeoutError when the socket says nothing within its timeout."""
        while b"\n" not in self._buffer and len(self._buffer) < limit:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                break
            self._buffer += chunk
        cut = self._buffer.find(b"\n") + 1 or len(self._buffer)
        cut = min(cut, limit)
        line, self._buffer = self._buffer[:cut], self._buffer[cut:]
        return line

    def close(self) -> None:
        self.sock.close()
