"""What one streamed completion chunk carries: its text and its tokens (the built-in client's reading
of an SSE `data:` object, completions or chat shaped).  Pure, so unit tests feed it chunks."""

from __future__ import annotations

from typing import Any


def chunk_tokens(chunk: Any, text: str, completion: int | None, prev_usage: int | None) -> int:
    """Tokens one chunk carries.  With a running usage count: its growth (a chunk of tokens whose text
    the server held back, e.g. an incomplete UTF-8 sequence, is still an engine step that arrived);
    without: one per chunk with text.  A chunk without a choice (the final usage chunk) carries none."""
    if text:
        return max(completion - (prev_usage or 0), 1) if completion is not None else 1
    has_choice = isinstance(chunk, dict) and bool(chunk.get("choices"))
    if has_choice and completion is not None:
        return max(completion - (prev_usage or 0), 0)
    return 0  # role/usage-only chunk


def chunk_text(chunk: Any) -> str:
    """The first choice's text (completions) or delta content (chat); "" for anything else."""
    if not isinstance(chunk, dict):
        return ""
    choices = chunk.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    c = choices[0]
    text = c.get("text")
    if text is None and isinstance(c.get("delta"), dict):  # chat-style chunks
        text = c["delta"].get("content")
    return text or ""
