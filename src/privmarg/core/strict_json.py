"""JSON read strictly: a key given twice in one object is an error (``json`` keeps the last value
without a word, so a domain or schema with a repeated column silently loses one)."""

from __future__ import annotations

import json
from typing import IO, Any


class DuplicateKey(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"key {key!r} appears twice in one JSON object")
        out[key] = value
    return out


def loads(text: str | bytes, **kw: Any) -> Any:
    """``json.loads`` refusing repeated keys (:class:`DuplicateKey`, a ``ValueError``) and nesting
    too deep for the parser (a ``ValueError``, not the interpreter's RecursionError)."""
    try:
        return json.loads(text, object_pairs_hook=_unique, **kw)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def load(fh: IO, **kw: Any) -> Any:
    """:func:`loads` of a file's text."""
    return loads(fh.read(), **kw)
