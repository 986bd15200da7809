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
    """``json.loads`` refusing repeated keys (:class:`DuplicateKey`, a ``ValueError``)."""
    return json.loads(text, object_pairs_hook=_unique, **kw)


def load(fh: IO, **kw: Any) -> Any:
    """``json.load`` refusing repeated keys (:class:`DuplicateKey`, a ``ValueError``)."""
    return json.load(fh, object_pairs_hook=_unique, **kw)
