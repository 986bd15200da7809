"""Method registry for benchmarks, resolved lazily (a name costs nothing until a cell runs it).

A method is anything built as ``factory(epsilon, delta, seed=..., **params)`` whose ``fit(dataset)``
returns an object with ``sample_codes(rows=None)`` (integer codes, one column per attribute): every
:class:`privmarg.Synthesizer` qualifies (every preset of :mod:`privmarg.registry` is listed). Names map to ``"module:attribute"`` strings;
a config may also give such a string directly (``method: mypkg.mod:MyMech``).

Peers: ``smartnoise-aim`` and ``smartnoise-mst`` run smartnoise-synth through
``benchmarks/peers.py``'s ``smartnoise_synth(df, domain, method, epsilon, delta, seed)``; when it
cannot run here the method is skipped with a note (see :func:`check_available`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .. import registry
from ..data import Dataset

#: registry name -> "module:attribute" (imported on first use)
METHODS: dict[str, str] = {
    **{e.name: e.target for e in registry.entries("preset")},
    "smartnoise-aim": "privmarg.benchmark.methods:SmartNoiseAIM",
    "smartnoise-mst": "privmarg.benchmark.methods:SmartNoiseMST",
    "real": "privmarg.benchmark.methods:RealData",
}


class MethodUnavailable(ImportError):
    """The method cannot run in this environment (package or module missing)."""


def resolve(method: str) -> Callable[..., Any]:
    """The factory for a registry name or a ``module:attribute`` string (imports it now)."""
    target = METHODS.get(method.lower(), method)
    if ":" not in target:
        raise MethodUnavailable(f"unknown method {method!r}: use one of {', '.join(METHODS)} or 'module:Class'")
    mod_name, attr = target.split(":", 1)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise MethodUnavailable(f"method {method!r} needs module {mod_name!r}, which cannot be imported: {e}") from e
    try:
        obj = mod
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise MethodUnavailable(f"method {method!r}: {mod_name!r} has no attribute {attr!r}") from None
    check = getattr(obj, "available", None)
    if callable(check):
        ok, note = check()
        if not ok:
            raise MethodUnavailable(f"method {method!r}: {note}")
    return obj


def check_available(method: str) -> tuple[bool, str]:
    """``(True, "")`` if ``method`` resolves here, else ``(False, reason)``."""
    try:
        resolve(method)
    except MethodUnavailable as e:
        return False, str(e)
    return True, ""


class RealData:
    """The non-private baseline: "synthetic" data = the real training table (ML reference)."""

    def __init__(self, epsilon=None, delta=None, seed=None, **params):
        self.params = params

    def fit(self, data: Dataset) -> "RealData":
        self.codes_ = data.codes.copy()
        return self

    def sample_codes(self, rows: int | None = None) -> np.ndarray:
        return self.codes_


# ------------------------------------------------------------------------------------------
# peers
# ------------------------------------------------------------------------------------------
def _peers_module():
    """Import ``benchmarks/peers.py`` ($PRIVMARG_PEERS, else the repository's benchmarks/ folder)."""
    if "privmarg_bench_peers" in sys.modules:
        return sys.modules["privmarg_bench_peers"]
    cands = [os.environ.get("PRIVMARG_PEERS"), Path(__file__).resolve().parents[3] / "benchmarks" / "peers.py",
             Path.cwd() / "benchmarks" / "peers.py"]
    for c in cands:
        if c and Path(c).exists():
            spec = importlib.util.spec_from_file_location("privmarg_bench_peers", str(c))
            mod = importlib.util.module_from_spec(spec)
            sys.modules["privmarg_bench_peers"] = mod
            spec.loader.exec_module(mod)
            return mod
    raise MethodUnavailable("benchmarks/peers.py not found (set $PRIVMARG_PEERS to its path)")


class _SmartNoise:
    """smartnoise-synth via ``peers.smartnoise_synth``; the data it returns is the sample."""

    peer_method = "aim"

    def __init__(self, epsilon: float, delta: float, seed: int | None = None, **params):
        self.epsilon, self.delta, self.seed, self.params = epsilon, delta, seed, params

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            peers = _peers_module()
        except Exception as e:  # noqa: BLE001 - any failure means "cannot run here"
            return False, f"peers module unavailable: {e}"
        inproc = getattr(peers, "_snsynth_inprocess_ok", lambda: True)()
        sub = getattr(peers, "_snsynth_python", lambda p: None)(None)
        if not inproc and sub is None:
            return False, ("smartnoise-synth is not installed (needs mbi<2 in this environment, or a separate "
                           "interpreter in .venv-snsynth / $PRIVMARG_SNSYNTH_PYTHON): "
                           + getattr(peers, "INSTALL_HINT", ""))
        return True, ""

    def fit(self, data: Dataset) -> "_SmartNoise":
        peers = _peers_module()
        df = peers.smartnoise_synth(data.to_frame(), data.domain.to_dict(), self.peer_method, self.epsilon,
                                    self.delta, self.seed, **self.params)
        self.codes_ = df[list(data.domain.attrs)].to_numpy(dtype=np.int64)
        return self

    def sample_codes(self, rows: int | None = None) -> np.ndarray:
        if rows is None or rows == len(self.codes_):
            return self.codes_
        rng = np.random.default_rng(self.seed)
        return self.codes_[rng.choice(len(self.codes_), size=int(rows), replace=rows > len(self.codes_))]


class SmartNoiseAIM(_SmartNoise):
    peer_method = "aim"


class SmartNoiseMST(_SmartNoise):
    peer_method = "mst"
