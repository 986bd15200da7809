"""Method registry for benchmarks, resolved lazily (a name costs nothing until a cell runs it).

A method is anything built as ``factory(epsilon, delta, seed=..., **params)`` whose ``fit(dataset)``
returns an object with ``sample_codes(rows=None)`` (integer codes, one column per attribute): every
:class:`privmarg.Synthesizer` qualifies (every preset of :mod:`privmarg.registry` is listed). Names map to ``"module:attribute"`` strings;
a config may also give such a string directly (``method: mypkg.mod:MyMech``).

Module pairs: ``pair:SELECTOR/GENERATOR`` is any (selector, generator) of :func:`privmarg.registry.pairs`
(a config's ``modules:`` section writes them); a name this privmarg lacks makes it unavailable.

Peers: ``smartnoise-aim`` and ``smartnoise-mst`` run smartnoise-synth through
``benchmarks/peers.py``'s ``smartnoise_synth(df, domain, method, epsilon, delta, seed)``; when it
cannot run here the method is skipped with a note (see :func:`check_available`).
"""

from __future__ import annotations

import functools
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


#: a (selector, generator) pair of the registry: ``pair:SELECTOR/GENERATOR`` (``bench``'s module sweeps)
PAIR_PREFIX = "pair:"


def pair_ref(selector: str, generator: str) -> str:
    """The method reference of a registry (selector, generator) pair: ``pair:SELECTOR/GENERATOR``."""
    return f"{PAIR_PREFIX}{selector}/{generator}"


class ModulePair:
    """One selector × generator pair of the registry as a benchmark method: a
    :class:`privmarg.Synthesizer` of ``selector`` (its ``params["selector"]`` keywords; a ``loop``
    given as a mapping ``{name: pgm, iters: ...}`` becomes that generator) and ``generator`` (its
    ``params["generator"]`` keywords); the other ``params`` go to the Synthesizer (``neighbour``,
    ...). Privacy: the selector's (it spends the whole budget)."""

    def __init__(self, sel_name: str, gen_name: str, /, epsilon=None, delta=None, seed=None, **params):
        from ..synth import Synthesizer

        sel_kw = dict(params.pop("selector", None) or {})
        gen_kw = dict(params.pop("generator", None) or {})
        if isinstance(sel_kw.get("loop"), dict):  # a model in the loop from YAML: {name: pgm, iters: 250, ...}
            loop = dict(sel_kw["loop"])
            sel_kw["loop"] = registry.load(registry.entry("generator", loop.pop("name", "pgm")).target)(**loop)
        sel = registry.make_selector(sel_name, **sel_kw)
        gen = registry.load(registry.entry("generator", gen_name).target)(**gen_kw)
        self.synth = Synthesizer(sel, gen, epsilon=epsilon, delta=delta, seed=seed, **params)

    def fit(self, data: Dataset) -> Any:
        return self.synth.fit(data)


def _pair(method: str) -> Callable[..., Any]:
    """The factory of ``pair:SELECTOR/GENERATOR``, or :class:`MethodUnavailable` saying why it cannot run."""
    body = method[len(PAIR_PREFIX):]
    sel, sep, gen = body.partition("/")
    if not sep or not sel or not gen:
        raise MethodUnavailable(f"{method!r}: a pair is written pair:SELECTOR/GENERATOR")
    for kind, name in (("selector", sel), ("generator", gen)):
        if name.lower() not in registry.names(kind):
            raise MethodUnavailable(f"{kind} {name!r} is not in this privmarg's registry "
                                    f"({kind}s: {', '.join(registry.names(kind))})")
    if (sel.lower(), gen.lower()) not in registry.pairs():
        raise MethodUnavailable(f"{sel} x {gen} is not a valid pair (privmarg.registry.pairs())")
    flags = registry.entry("selector", sel).flags | registry.entry("generator", gen).flags
    if "public" in flags:
        raise MethodUnavailable(f"selector {sel!r} needs public data, which bench does not pass")
    try:
        for kind, name in (("selector", sel), ("generator", gen)):
            registry.require(registry.entry(kind, name))
    except registry.MissingExtra as e:
        raise MethodUnavailable(str(e)) from None
    return functools.partial(ModulePair, sel.lower(), gen.lower())


def resolve(method: str) -> Callable[..., Any]:
    """The factory for a registry name, a ``module:attribute`` string (imports it now) or a
    ``pair:SELECTOR/GENERATOR`` of the registry."""
    if method.startswith(PAIR_PREFIX):
        return _pair(method)
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
