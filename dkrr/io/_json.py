"""Strict JSON for files dkrr reads but did not necessarily write (``model.json``)."""

from __future__ import annotations

import json

__all__ = ["strict_json"]


def _unique_keys(pairs) -> dict:
    """A JSON object's dict; a key it gives twice is a ``ValueError``."""
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {twice!r} is given twice in one object")
    return doc


def strict_json(text: str):
    """``json.loads(text)``, but a key given twice in one object raises ``ValueError``:
    Python's json keeps the last value, other readers the first, so one file would hold
    two documents. ``NaN`` and ``Infinity`` parse as floats (the caller's field checks
    refuse them where a value must be finite); ``RecursionError`` on deep nesting, as json."""
    return json.loads(text, parse_constant=float, object_pairs_hook=_unique_keys)
