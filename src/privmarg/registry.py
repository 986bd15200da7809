"""The one table of method names: presets, selectors and generators, with what each can do.

The CLI (``--method``, ``--generator`` and their help), ``bench``, the README's method list and the
contract tests read this table; nothing else lists methods. Targets are ``"module:attribute"``
strings imported on first use, so naming a torch-based method costs nothing until it runs, and the
table depends on no other module (any layer may look a name up).
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Entry:
    """``kind``: "preset", "selector" or "generator". Every preset names its ``target`` class in
    :mod:`privmarg.presets`; one that is a selector with a default generator also names both
    (registry names; its class says the same, checked by the tests). ``flags``: "workload" (takes a
    workload), "public" (needs public data), "public_optional" (uses public data when given), "torch" (needs torch), "adaptive" (model in the loop),
    "replace_one" (needs the record count public), "deep" (needs opacus and dp-accounting).
    ``model``: ``"kind=module:Class"``, the fitted model class this entry's fits produce, when no
    other entry names it; saved models write and read it through its ``to_state`` / ``from_state``
    (:mod:`privmarg.generate.state`), so a new generator with its own model is still one line."""

    name: str
    kind: str
    summary: str
    target: str = ""
    selector: str = ""
    generator: str = ""
    flags: frozenset = field(default_factory=frozenset)
    model: str = ""


def _f(*names: str) -> frozenset:
    return frozenset(names)


ENTRIES: tuple[Entry, ...] = (
    # presets: the papers' methods (name, what it is, where)
    Entry("aim", "preset", "AIM: adaptive, workload-aware selection + Private-PGM (--public: starts from it at small budgets)", "privmarg.presets:AIM",
          flags=_f("workload", "adaptive", "public_optional")),
    Entry("mst", "preset", "MST: maximum spanning tree of 2-way marginals + Private-PGM", "privmarg.presets:MST"),
    Entry("mwem", "preset", "MWEM+PGM: T equal exponential-mechanism rounds over the workload",
          "privmarg.presets:MWEM", flags=_f("workload", "adaptive")),
    Entry("independent", "preset", "every 1-way marginal, attributes independent (baseline)",
          "privmarg.presets:Independent"),
    Entry("privpgd", "preset", "PrivPGD: all 2-way marginals + particle gradient descent (torch)",
          "privmarg.presets:PrivPGD", flags=_f("torch", "replace_one")),
    Entry("jam", "preset", "JAM-PGM: private measurement or public proxy per round (needs --public)",
          "privmarg.presets:JAM", flags=_f("workload", "adaptive", "public", "replace_one")),
    Entry("privbayes", "preset", "PrivBayes: greedy degree-k Bayesian network + Private-PGM",
          "privmarg.presets:PrivBayes", selector="privbayes", generator="pgm"),
    Entry("privsyn", "preset", "PrivSyn: pairs chosen by noisy InDif (DenseMarg), combined, fitted by GUM record updates",
          "privmarg.presets:PrivSyn", selector="privsyn", generator="gum"),
    # GUM, not Private-PGM: every 3-way marginal of a real table makes a junction tree as large as the
    # domain (adult: ~5e12 MB), so the preset could not run with pgm on any of the benchmark's tables
    Entry("gaussian", "preset", "every workload marginal measured directly, rho_i ~ cells^(2/3) (baseline) + GUM",
          "privmarg.presets:Gaussian", selector="gaussian", generator="gum", flags=_f("workload")),
    Entry("rap", "preset", "RAP: adaptive counting-query selection + relaxed projection (torch)",
          "privmarg.presets:RAP", flags=_f("torch", "workload", "adaptive")),
    Entry("rap++", "preset", "RAP++: Gumbel top-q marginal selection + relaxed projection (torch)",
          "privmarg.presets:RAPpp", flags=_f("torch", "workload", "adaptive")),
    Entry("gsd", "preset", "Private-GSD: all 2-way marginals + a genetic algorithm over records",
          "privmarg.presets:GSD"),
    Entry("gem", "preset", "GEM: adaptive rounds with a generator network in the loop (torch)",
          "privmarg.presets:GEM", flags=_f("workload", "adaptive", "torch")),
    Entry("pmw-pub", "preset", "PMW^Pub: multiplicative weights over the public records (needs --public)",
          "privmarg.presets:PMWPub", flags=_f("workload", "adaptive", "public")),
    Entry("gem-pub", "preset", "GEM^Pub: GEM's network pretrained on public data (needs --public; torch)",
          "privmarg.presets:GEMPub", flags=_f("workload", "adaptive", "public", "torch")),
    Entry("privmrf", "preset", "PrivMRF: noisy attribute graph, Bayesian-network start, refinement + Private-PGM",
          "privmarg.presets:PrivMRF", selector="privmrf", generator="pgm", flags=_f("adaptive")),
    Entry("dpmerf", "preset", "DP-MERF: one noisy random-feature mean embedding + a generator network (torch)",
          "privmarg.presets:DPMERF", flags=_f("torch"), model="dpmerf=privmarg.generate.dpmerf:MERFModel"),
    Entry("tabddpm", "preset", "DP-TabDDPM: multinomial diffusion trained with DP-SGD (torch, Opacus; RDP accounting)",
          "privmarg.presets:TabDDPM", flags=_f("torch", "deep"),
          model="tabddpm=privmarg.generate.tabddpm:TabDDPMModel"),
    # selectors
    Entry("aim", "selector", "AIM's adaptive selection", "privmarg.select.aim:AIMSelector",
          flags=_f("workload", "adaptive")),
    Entry("mst", "selector", "MST's spanning tree (with domain compression)", "privmarg.select.mst:MSTSelector",
          model="decompressed=privmarg.select.compress:DecompressedModel"),
    Entry("mwem", "selector", "MWEM's equal rounds", "privmarg.select.mwem:MWEMSelector",
          flags=_f("workload", "adaptive")),
    Entry("independent", "selector", "all 1-way marginals", "privmarg.select.independent:IndependentSelector"),
    Entry("kway", "selector", "all k-way marginals (PrivPGD's selection)", "privmarg.select.kway:KWaySelector"),
    Entry("jam", "selector", "JAM's joint private/public selection", "privmarg.select.jam:JAMSelector",
          flags=_f("workload", "adaptive", "public", "replace_one"), model="blend=privmarg.generate.blend:BlendedModel"),
    Entry("privbayes", "selector", "PrivBayes's greedy Bayesian network (exponential mechanism)",
          "privmarg.select.privbayes:PrivBayesSelector"),
    Entry("privsyn", "selector", "PrivSyn's DenseMarg: noisy InDif, greedy pairs, Combine, rho_i ~ cells^(2/3)",
          "privmarg.select.privsyn:PrivSynSelector"),
    Entry("gaussian", "selector", "every workload marginal, rho_i ~ cells^(2/3) (the Gaussian baseline)",
          "privmarg.select.gaussian:GaussianSelector", flags=_f("workload")),
    Entry("rap", "selector", "RAP's Gumbel top-k counting queries per round (relaxed-projection loop)",
          "privmarg.select.rap:RAPSelector", flags=_f("workload", "adaptive", "torch")),
    Entry("rap++", "selector", "RAP++'s Gumbel top-q marginals per round (relaxed-projection loop)",
          "privmarg.select.rap:RAPppSelector", flags=_f("workload", "adaptive", "torch")),
    Entry("privmrf", "selector", "PrivMRF's attribute graph and noisy-score refinement (Gaussian scores)",
          "privmarg.select.privmrf:PrivMRFSelector", flags=_f("adaptive")),
    # generators
    Entry("pgm", "generator", "graphical model (Private-PGM): mirror descent on a junction tree",
          "privmarg.generate.pgm:PGM", model="graphical_model=privmarg.generate.pgm.graphical_model:GraphicalModel"),
    Entry("privpgd", "generator", "particles moved by sliced-Wasserstein gradient descent (torch)",
          "privmarg.generate.privpgd.privpgd:PrivPGDGenerator", flags=_f("torch"),
          model="particles=privmarg.generate.privpgd.privpgd:PrivPGDGenerator"),
    Entry("gum", "generator", "PrivSyn's GUM: records updated marginal by marginal towards consistent noisy marginals",
          "privmarg.generate.gum:GUM", model="records=privmarg.generate.records:RecordsModel"),
    Entry("relaxed", "generator", "relaxed projection: per-attribute probability rows fitted by Adam (torch)",
          "privmarg.generate.relaxed:RelaxedProjection", flags=_f("torch"),
          model="relaxed=privmarg.generate.relaxed:RelaxedModel"),
    Entry("genetic", "generator", "Private-GSD's genetic algorithm over a table of records",
          "privmarg.generate.genetic:GeneticGenerator"),
    Entry("gem", "generator", "GEM's generator network: softmax blocks from a fixed latent batch (torch)",
          "privmarg.generate.gem:GEMGenerator", flags=_f("torch"), model="gem=privmarg.generate.gem:GEMModel"),
)


def entries(kind: str) -> list[Entry]:
    return [e for e in ENTRIES if e.kind == kind]


def names(kind: str) -> list[str]:
    return [e.name for e in entries(kind)]


def entry(kind: str, name: str) -> Entry:
    for e in ENTRIES:
        if e.kind == kind and e.name == name.lower():
            return e
    raise KeyError(f"unknown {kind} {name!r}: choose one of {', '.join(names(kind))}")


def model_kinds() -> dict[str, Entry]:
    """Saved-model kind → the entry whose ``model`` names its class (the first one)."""
    out: dict[str, Entry] = {}
    for e in ENTRIES:
        if e.model:
            out.setdefault(e.model.split("=", 1)[0], e)
    return out


def model_class(kind: str) -> type:
    """The model class of a saved-model ``kind``; ValueError for an unknown kind, :class:`MissingExtra`
    when the class needs a package that is not installed."""
    e = model_kinds().get(kind)
    if e is None:
        raise ValueError(f"unknown model kind {kind!r}")
    require(e, only=("torch",))  # sampling a model needs torch at most (training needed the rest)
    return load(e.model.split("=", 1)[1])


def load(target: str) -> Any:
    mod, attr = target.split(":", 1)
    return getattr(importlib.import_module(mod), attr)


class MissingExtra(ValueError):
    """A method needs an optional dependency that is not installed (the message names the extra)."""


EXTRAS = {"torch": ("torch", "pip install torch==2.13.0  (or the privmarg[torch] extra)"),
          "deep": ("opacus dp_accounting", "pip install opacus==1.6.0 dp-accounting==0.6.0  (or the privmarg[deep] extra)")}


def require(e: Entry, only: tuple[str, ...] | None = None) -> None:
    """Raise :class:`MissingExtra` with the install line if ``e`` needs a package that is missing
    (``only``: check just these flags)."""
    for flag, (modules, how) in EXTRAS.items():
        if flag not in e.flags or (only is not None and flag not in only):
            continue
        for module in modules.split():
            try:
                importlib.import_module(module)
            except ImportError:
                raise MissingExtra(f"{e.kind} {e.name!r} needs {module}, which is not installed: {how}") from None


def make_generator(spec: Any = None) -> Any:
    """A generator from a registry name, an instance (kept) or None (a graphical model)."""
    if spec is None:
        spec = "pgm"
    if isinstance(spec, str):
        e = entry("generator", spec)
        require(e)
        return load(e.target)()
    if not hasattr(spec, "generate"):
        raise TypeError(f"a generator needs a generate() method, got {type(spec).__name__}")
    return spec


def make_selector(name: str, **params: Any) -> Any:
    return load(entry("selector", name).target)(**params)


def preset_class(name: str) -> type:
    """The synthesizer class of a preset (every preset is a class in :mod:`privmarg.presets`)."""
    return load(entry("preset", name).target)


def make_preset(name: str, epsilon: float | None = 1.0, delta: float | None = 1e-9, **params: Any) -> Any:
    """An unfitted synthesizer for a preset name; ``generator=`` swaps its generator. A preset or
    generator whose optional dependency is missing raises :class:`MissingExtra` (one line)."""
    require(entry("preset", name))
    gen = params.get("generator")
    if isinstance(gen, str):
        require(entry("generator", gen))
    return preset_class(name)(epsilon, delta, **params)


def accepts(name: str, param: str) -> bool:
    """Whether preset ``name`` takes parameter ``param``."""
    cls = preset_class(name)
    if param in inspect.signature(cls).parameters:
        return True
    e = entry("preset", name)
    return bool(e.selector) and param in inspect.signature(load(entry("selector", e.selector).target)).parameters


def pairs() -> list[tuple[str, str]]:
    """Every valid (selector, generator) combination: any selector feeds any generator."""
    return [(s, g) for s in names("selector") for g in names("generator")]
