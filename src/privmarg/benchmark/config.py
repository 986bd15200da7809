"""Benchmark configuration (YAML) and the grid of cells it expands to.

A config (paths relative to the config file's folder)::

    output: results/paper        # folder: results.jsonl, errors.jsonl, summary.md/.csv, figures
    workers: 2                   # parallel worker processes
    delta: 1.0e-5
    epsilons: [0.2, 1.0, 2.5]
    seeds: [0, 1, 2]
    reference: privpgd           # denominator of the log2-ratio figure
    baseline: true               # also evaluate the real training split (ML reference "real-train")
    split: {test_fraction: 0.2, seed: 0}
    rows: null                   # synthetic rows; null = the method's default
    metrics: [tv_2way, ...]      # default: all (privmarg.evaluation.report.ALL_METRICS)
    ml_models: [gbdt, rf, mlp, xgboost, catboost]
    ml_max_train_rows: null      # subsample training rows for ML (speed); null = all
    max_crashes: 2               # a cell whose worker dies this often is given up (errors.jsonl)
    start_method: forkserver     # or spawn (worker processes)
    fresh_worker: true           # a new worker process per cell, so peak RSS is the cell's alone
    cell_timeout: 3600           # seconds of fit + sample before a cell is stopped (status timeout); null = none
    datasets:
      adult: {data: adult.csv, domain: domain.json, target: "income>50K", numeric: [age], task: auto}
    methods:
      aim: {params: {workload: all-2way}}    # key = registry name, or give method: NAME|module:Class
      mst: {}
    modules:                     # optional: registry selector x generator pairs (methods may then be left out)
      params: {neighbour: add_remove}        # Synthesizer keywords for every pair
      selector_params: {aim: {workload: all-3way}}
      generator_params: {pgm: {iters: 1000}}
      sweeps:                                # every (selector, generator) of each sweep, once
        - {selectors: [aim, mst], generators: [pgm]}
        - {selectors: [mst], generators: [pgm, privpgd]}

A pair becomes the method ``SELECTOR/GENERATOR`` (reference ``pair:SELECTOR/GENERATOR``, see
:func:`privmarg.benchmark.methods.pair_ref`). A name that is not in this privmarg's registry is
kept (its cells run once the name exists) and skipped with a note, as a method whose extra is
missing is; :attr:`BenchConfig.notes` says which names those are.

A cell is one (dataset, method, epsilon, seed); its identity includes a hash of everything that
changes its result (data, split, method and params, delta, rows), so editing a config never reuses
stale results.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .methods import METHODS, pair_ref

DEFAULT_SPLIT = {"test_fraction": 0.2, "seed": 0}


class ConfigError(ValueError):
    """A bad benchmark config: the message names the key."""


@dataclass
class DatasetSpec:
    name: str
    data: str
    domain: str
    test: str | None = None
    target: str | None = None
    task: str = "auto"
    numeric: list[str] = field(default_factory=list)

    def ident(self) -> dict:
        return {"data": self.data, "domain": self.domain, "test": self.test}


@dataclass
class MethodSpec:
    name: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)

    def ident(self) -> dict:
        return {"method": self.method, "params": self.params}


@dataclass
class Cell:
    dataset: DatasetSpec
    method: MethodSpec
    epsilon: float | None
    seed: int
    delta: float
    rows: int | None
    split: dict
    spec_hash: str = ""

    @property
    def key(self) -> str:
        eps = "none" if self.epsilon is None else f"{self.epsilon:g}"
        return f"{self.dataset.name}/{self.method.name}/eps={eps}/seed={self.seed}/{self.spec_hash}"


@dataclass
class BenchConfig:
    path: Path
    output: Path
    datasets: list[DatasetSpec]
    methods: list[MethodSpec]
    epsilons: list[float]
    seeds: list[int]
    delta: float = 1e-5
    workers: int = 1
    reference: str | None = None
    baseline: bool = True
    split: dict = field(default_factory=lambda: dict(DEFAULT_SPLIT))
    rows: int | None = None
    metrics: list[str] | None = None
    ml_models: list[str] | None = None
    ml_max_train_rows: int | None = None
    max_crashes: int = 2
    figure_metrics: list[str] | None = None
    start_method: str = "forkserver"
    # a worker process per cell: memory a finished cell kept (allocator arenas, torch's pools) would
    # otherwise be in the next cell's RSS before its fit and hide its own peak
    fresh_worker: bool = True
    cell_timeout: float | None = None  # seconds of fit + sample; not part of a cell's key
    notes: list[str] = field(default_factory=list)

    @property
    def results_path(self) -> Path:
        return self.output / "results.jsonl"

    @property
    def errors_path(self) -> Path:
        return self.output / "errors.jsonl"

    def cells(self) -> list[Cell]:
        """Every cell, baseline cells first, then dataset × method × epsilon × seed."""
        out = []
        for ds in self.datasets:
            if self.baseline:
                out.append(self._cell(ds, MethodSpec("real", "real"), None, 0))
            for m in self.methods:
                for eps in self.epsilons:
                    for seed in self.seeds:
                        out.append(self._cell(ds, m, eps, seed))
        return out

    def _cell(self, ds: DatasetSpec, m: MethodSpec, eps, seed) -> Cell:
        c = Cell(ds, m, eps, int(seed), self.delta, self.rows, dict(self.split))
        ident = {"dataset": ds.ident(), "method": m.ident(), "epsilon": eps, "seed": int(seed),
                 "delta": self.delta if eps is not None else None, "rows": self.rows, "split": self.split}
        c.spec_hash = hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return c


def _req(d: dict, key: str, where: str):
    if key not in d:
        raise ConfigError(f"{where}: missing key {key!r}")
    return d[key]


def _datasets(raw: dict, path: Path, rel) -> list[DatasetSpec]:
    """The config's ``datasets`` mapping, checked; paths relative to the config's folder."""
    datasets = []
    raw_ds = _req(raw, "datasets", str(path))
    if not isinstance(raw_ds, dict) or not raw_ds:
        raise ConfigError("datasets: must be a non-empty mapping name -> {data, domain, ...}")
    for name, spec in raw_ds.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"datasets.{name}: must be a mapping")
        unknown = set(spec) - {"data", "domain", "test", "target", "task", "numeric"}
        if unknown:
            raise ConfigError(f"datasets.{name}: unknown key(s) {sorted(unknown)}")
        task = spec.get("task", "auto")
        if task not in ("auto", "classification", "regression"):
            raise ConfigError(f"datasets.{name}.task: auto, classification or regression")
        datasets.append(DatasetSpec(str(name), rel(_req(spec, "data", f"datasets.{name}")),
                                    rel(_req(spec, "domain", f"datasets.{name}")), rel(spec.get("test")),
                                    spec.get("target"), task, list(spec.get("numeric") or [])))
    return datasets


def _methods(raw: dict, path: Path) -> list[MethodSpec]:
    """The config's ``methods`` (a list of names or a mapping name -> {method, params}), checked."""
    if "methods" not in raw and "modules" not in raw:
        raise ConfigError(f"{path}: missing key 'methods' (or 'modules')")
    raw_m = raw.get("methods") or {}
    if isinstance(raw_m, list):
        raw_m = {str(m): {} for m in raw_m}
    if not isinstance(raw_m, dict) or (not raw_m and "modules" not in raw):
        raise ConfigError("methods: must be a non-empty list of names or mapping name -> {method, params}")
    methods = []
    for name, spec in raw_m.items():
        spec = spec or {}
        if not isinstance(spec, dict) or set(spec) - {"method", "params"}:
            raise ConfigError(f"methods.{name}: expected a mapping with optional 'method' and 'params'")
        if str(name) == "real":
            raise ConfigError("methods: 'real' is reserved for the baseline (set baseline: true)")
        params = spec.get("params") or {}
        if not isinstance(params, dict):
            raise ConfigError(f"methods.{name}.params: must be a mapping")
        target = str(spec.get("method", name))
        if ":" not in target and target.lower() not in METHODS:  # a typo: never skip it silently
            raise ConfigError(f"methods.{name}: unknown method {target!r}: choose one of "
                              f"{', '.join(m for m in METHODS if m != 'real')} or give method: module:Class")
        methods.append(MethodSpec(str(name), target, dict(params)))
    return methods


def load_config(path: str | Path) -> BenchConfig:
    """Read and validate a benchmark YAML config (see the module docstring)."""
    try:
        import yaml
    except ImportError:
        raise ConfigError("privmarg bench reads YAML configs and needs pyyaml, which a plain install lacks: "
                          "pip install 'privmarg[bench]' (or pip install pyyaml)") from None

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no such file")
    with open(path) as fh:
        raw = yaml.safe_load(fh)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a config must be a YAML mapping")
    base = path.resolve().parent

    def rel(p):
        if p is None:
            return None
        p = Path(str(p)).expanduser()
        return str(p if p.is_absolute() else (base / p))

    datasets = _datasets(raw, path, rel)

    methods = _methods(raw, path)

    notes: list[str] = []
    if "modules" in raw:
        for spec in _modules(raw["modules"], notes):
            if any(m.name == spec.name for m in methods):
                raise ConfigError(f"modules: the pair {spec.name!r} clashes with a method of that name")
            methods.append(spec)

    def num_list(key, cast):
        v = _req(raw, key, str(path))
        v = v if isinstance(v, list) else [v]
        try:
            return [cast(x) for x in v]
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected a list of numbers, got {v!r}") from None

    epsilons = num_list("epsilons", float)
    if any(not e > 0 for e in epsilons):
        raise ConfigError("epsilons: every epsilon must be > 0")
    seeds = num_list("seeds", int)
    split = {**DEFAULT_SPLIT, **(raw.get("split") or {})}
    if not 0 < float(split["test_fraction"]) < 1:
        raise ConfigError("split.test_fraction: must be in (0, 1)")
    known = {"output", "workers", "delta", "epsilons", "seeds", "reference", "baseline", "split", "rows",
             "metrics", "ml_models", "ml_max_train_rows", "max_crashes", "datasets", "methods", "name",
             "figure_metrics", "start_method", "modules", "fresh_worker",
             "cell_timeout"}
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {sorted(unknown)}; known: {', '.join(sorted(known))}")
    delta = float(raw.get("delta", 1e-5))
    if not 0 < delta < 1:
        raise ConfigError("delta: must be in (0, 1)")
    workers = int(raw.get("workers", 1))
    if workers < 1:
        raise ConfigError("workers: must be >= 1")
    start_method = str(raw.get("start_method", "forkserver"))
    if start_method not in ("forkserver", "spawn"):
        raise ConfigError("start_method: forkserver or spawn")
    cell_timeout = raw.get("cell_timeout")
    if cell_timeout is not None:
        cell_timeout = float(cell_timeout)
        if not cell_timeout > 0:
            raise ConfigError("cell_timeout: must be > 0 seconds (or null)")
    metrics = raw.get("metrics")
    if metrics is not None:
        from ..evaluation.report import ALL_METRICS

        bad = set(metrics) - set(ALL_METRICS)
        if bad:
            raise ConfigError(f"metrics: unknown {sorted(bad)}; choose from {', '.join(ALL_METRICS)}")
    return BenchConfig(
        path=path, output=Path(rel(raw.get("output", f"results/{path.stem}"))), datasets=datasets,
        methods=methods, epsilons=epsilons, seeds=seeds, delta=delta, workers=workers,
        reference=raw.get("reference"), baseline=bool(raw.get("baseline", True)), split=split,
        rows=raw.get("rows"), metrics=list(metrics) if metrics is not None else None,
        ml_models=raw.get("ml_models"), ml_max_train_rows=raw.get("ml_max_train_rows"),
        max_crashes=int(raw.get("max_crashes", 2)), figure_metrics=raw.get("figure_metrics"),
        start_method=start_method, fresh_worker=bool(raw.get("fresh_worker", True)),
        cell_timeout=cell_timeout, notes=notes)


def _modules(raw: Any, notes: list[str]) -> list[MethodSpec]:
    """The method specs of a ``modules:`` section (see the module docstring); unknown registry names
    are kept and noted in ``notes``."""
    from .. import registry

    if not isinstance(raw, dict):
        raise ConfigError("modules: must be a mapping with 'sweeps' (or 'selectors' and 'generators')")
    unknown_keys = set(raw) - {"sweeps", "selectors", "generators", "params", "selector_params", "generator_params"}
    if unknown_keys:
        raise ConfigError(f"modules: unknown key(s) {sorted(unknown_keys)}")
    sweeps = raw.get("sweeps")
    if sweeps is None:
        sweeps = [{k: raw[k] for k in ("selectors", "generators") if k in raw}]
    elif "selectors" in raw or "generators" in raw:
        raise ConfigError("modules: give either 'sweeps' or 'selectors' and 'generators', not both")
    if not isinstance(sweeps, list) or not sweeps:
        raise ConfigError("modules.sweeps: must be a non-empty list of {selectors: [...], generators: [...]}")
    maps = {}
    for key in ("params", "selector_params", "generator_params"):
        v = raw.get(key) or {}
        if not isinstance(v, dict) or (key != "params" and not all(isinstance(x, dict) for x in v.values())):
            raise ConfigError(f"modules.{key}: must be a mapping" + ("" if key == "params" else " name -> {...}"))
        maps[key] = v
    pairs: list[tuple[str, str]] = []
    for i, sw in enumerate(sweeps):
        if not isinstance(sw, dict) or set(sw) != {"selectors", "generators"}:
            raise ConfigError(f"modules.sweeps[{i}]: must be a mapping with exactly 'selectors' and 'generators'")
        lists = {}
        for key in ("selectors", "generators"):
            v = sw[key]
            v = [v] if isinstance(v, str) else v
            if not isinstance(v, list) or not v or not all(isinstance(x, str) and x.strip() for x in v):
                raise ConfigError(f"modules.sweeps[{i}].{key}: must be a non-empty list of names")
            lists[key] = [x.strip().lower() for x in v]
        pairs += [(s, g) for s in lists["selectors"] for g in lists["generators"]]
    pairs = list(dict.fromkeys(pairs))
    known = {"selector": set(registry.names("selector")), "generator": set(registry.names("generator"))}
    for kind in ("selector", "generator"):
        missing = sorted({p[kind == "generator"] for p in pairs} - known[kind])
        if missing:
            notes.append(f"modules: {kind}(s) {', '.join(missing)} not in this privmarg's registry "
                         f"(known: {', '.join(sorted(known[kind]))}); their pairs are skipped")
    for kind, key in (("selector", "selector_params"), ("generator", "generator_params")):
        stray = sorted(set(maps[key]) - {p[kind == "generator"] for p in pairs})
        if stray:
            raise ConfigError(f"modules.{key}: {', '.join(stray)} is in no sweep")
    out = []
    for sel, gen in pairs:
        params = dict(maps["params"])
        if sel in maps["selector_params"]:
            params["selector"] = dict(maps["selector_params"][sel])
        if gen in maps["generator_params"]:
            params["generator"] = dict(maps["generator_params"][gen])
        out.append(MethodSpec(f"{sel}/{gen}", pair_ref(sel, gen), params))
    return out
