"""How a fitted model is written into a saved model and read back (the format of
:mod:`privmarg.persist`).

Each model class names its ``state_kind`` and implements

* ``to_state(key, arrays, save) -> dict``: its JSON part (everything but ``"kind"``), with its
  arrays put into ``arrays`` under names starting with ``key``; ``save(inner, key)`` writes a model
  it wraps;
* ``from_state(state, arrays, domain, load)`` (classmethod): the model back, from untrusted input,
  checked (ValueError with one line); ``load(inner_state)`` reads a wrapped model.

The registry's ``model`` field maps each kind to its class, so a new generator's model is saved
and loaded without editing persist.py. Only released quantities go in: never rows, exact counts
or a seed.
"""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Protocol

import numpy as np

from ..core import Domain, StructuralZero


class SavedState(Protocol):
    state_kind: ClassVar[str]

    def to_state(self, key: str, arrays: dict, save: Callable[[Any, str], dict]) -> dict: ...

    @classmethod
    def from_state(cls, state: dict, arrays: dict, domain: Domain, load: Callable[[dict], Any]) -> Any: ...


def domain_state(domain: Domain) -> list:
    return [[a, int(k)] for a, k in zip(domain.attrs, domain.shape)]


def domain_from_state(state: list) -> Domain:
    return Domain([a for a, _ in state], [int(k) for _, k in state])


def read_total(state: dict) -> float:
    """The model's record count, checked: finite and ≥ 0."""
    total = float(state["total"])
    if not (math.isfinite(total) and total >= 0):
        raise ValueError(f"the model's total must be a finite count >= 0, got {state['total']!r}")
    return total


def zeros_to_state(zeros, key: str, arrays: dict) -> list[dict]:
    out = []
    for i, z in enumerate(zeros):
        arrays[f"{key}.zeros.{i}"] = np.asarray(z.mask, dtype=bool)
        out.append({"attrs": list(z.attrs), "mask": f"{key}.zeros.{i}"})
    return out


def zeros_from_state(items: list, arrays: dict) -> list[StructuralZero]:
    return [StructuralZero(tuple(z["attrs"]), arrays[z["mask"]]) for z in items]


def checked_codes(codes: Any, domain: Domain, what: str) -> np.ndarray:
    """Integer codes (rows × attributes) that fit ``domain``, or ValueError."""
    codes = np.asarray(codes, dtype=np.int64)
    if codes.ndim != 2 or codes.shape[1] != len(domain) or (codes.size and (
            codes.min() < 0 or (codes >= np.asarray(domain.shape)).any())):
        raise ValueError(f"the {what} do not fit the domain")
    return codes


SKIP = object()  # what :func:`plain` returns for a value that is not JSON


def plain(x: Any) -> Any:
    """``x`` as JSON (numbers, strings, lists, dicts of those), or :data:`SKIP`."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x)
    if isinstance(x, (list, tuple)):
        out = [plain(v) for v in x]
        return SKIP if any(v is SKIP for v in out) else out
    if isinstance(x, dict):
        out = {str(k): plain(v) for k, v in x.items()}
        return SKIP if any(v is SKIP for v in out.values()) else out
    return SKIP
