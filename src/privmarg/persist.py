"""Saved models: a fitted synthesizer on disk, release-safe, versioned (issue #17).

A saved model is a directory holding two files:

* ``model.json``: ``format`` (``"privmarg-model"``), ``format_version`` (:data:`FORMAT_VERSION`),
  ``privmarg_version``, ``method`` / ``class`` / ``selector`` / ``generator`` and their
  ``params``, ``privacy`` (the ledger: budget, neighbouring relation, every charge), ``domain``
  (``[[column, size], ...]``), ``public_rows`` (N, only when it is public: replace-one),
  ``zeros`` (public structural zeros), ``encoder`` (a raw table's public schema and, per column,
  its bin edges and atoms, an adaptive column's PrivTree leaves with their cumulative noisy shares
  and decay lengths, or its kept / merged categories, and the zCDP its DP step was charged: public
  or DP outputs; see :meth:`~privmarg.preprocess.TableEncoder.state`), ``measurements`` (attributes, σ, weight,
  source of each noisy marginal), ``rounds`` (what each adaptive round selected), ``model`` (the
  generator's model: a junction tree's cliques, edges and elimination order; PrivPGD's particles;
  GUM's and GSD's synthetic records; a relaxed projection's ``N' × Σk`` probability rows; a
  decompression's supports; PMW^Pub's record weights; GEM's network (its hidden sizes follow from
  the weights); DP-MERF's or DP-TabDDPM's network architecture), and ``arrays_sha256``, the checksum of
* ``arrays.npz`` (numpy, no pickles): the model's log-potentials, particles, records (and weights),
  probability rows or network weights (and GEM's fixed latent batch), each measurement's
  noisy answers ``y`` (and linear query), structural-zero masks.

Only what the fit released is written: never rows, exact counts, cached private answers, the seed
or a generator state (numpy pickles a generator with its seed, from which the privacy noise could
be replayed). Writing is atomic (a temporary directory, then a rename); an existing directory is
replaced only with ``force=True``, and only when it is a saved model (or empty). :func:`load`
checks the format, its version and the checksum, and fails with one line otherwise. Loading and
sampling spend no privacy budget.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._version import __version__
from .core import Measurement, StructuralZero, strict_json
from . import registry
from .generate.state import SKIP as _SKIP
from .generate.state import domain_from_state as _domain
from .generate.state import domain_state as _domain_state
from .generate.state import plain as _plain
from .io import DirectoryWriter, publish
from .privacy import Accountant
from .release import Released

FORMAT = "privmarg-model"
FORMAT_VERSION = 1
MODEL_FILE = "model.json"
MAX_MODEL_JSON_BYTES = 256 * 2**20  # a model's JSON holds names, categories and the ledger, not tables
ARRAYS_FILE = "arrays.npz"


# ------------------------------------------------------------------------------------- saving
def save(obj: Released, path: str | Path, *, force: bool = False) -> Path:
    """Write the fitted synthesizer ``obj`` (a :class:`~privmarg.Synthesizer` or a loaded
    :class:`SavedSynthesizer`) to the directory ``path``; returns it. See the module docstring."""
    path = Path(path)
    writer = model_writer(obj)
    check_target(path, force)
    publish([(path, writer)])
    return path


def model_writer(obj: Released) -> DirectoryWriter:
    """The saved model of ``obj`` as a writer for :func:`~privmarg.io.publish` (so a run can publish
    it together with its table and report). Everything is described and packed now; the writer only
    writes bytes."""
    obj._check_fitted()
    arrays: dict[str, np.ndarray] = {}
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "privmarg_version": __version__}
    meta.update(_describe(obj))
    meta["privacy"] = obj.privacy_report()
    meta["domain"] = _domain_state(obj.domain_)
    meta["public_rows"] = None if obj.public_rows_ is None else int(obj.public_rows_)
    meta["default_rows"] = int(obj.default_rows())
    meta["zeros"] = []
    for i, z in enumerate(obj.zeros_):
        arrays[f"zeros.{i}"] = np.asarray(z.mask, dtype=bool)
        meta["zeros"].append({"attrs": list(z.attrs), "mask": f"zeros.{i}"})
    meta["encoder"] = obj.encoder_.state() if obj.encoder_ is not None else None
    meta["measurements"] = [_measurement_state(m, i, arrays) for i, m in enumerate(obj.measurements_)]
    meta["rounds"] = [{k: _plain(r.get(k)) for k in ("round", "selected", "source", "sigma", "epsilon") if k in r}
                      for r in (getattr(obj, "log_", None) or [])]
    meta["model"] = _model_state(obj.model_, "model", arrays)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = buf.getvalue()
    meta["arrays_sha256"] = hashlib.sha256(data).hexdigest()
    text = json.dumps(meta, indent=1, allow_nan=True) + "\n"

    def write(folder: str) -> None:
        (Path(folder) / ARRAYS_FILE).write_bytes(data)
        (Path(folder) / MODEL_FILE).write_text(text)

    return DirectoryWriter(write)


def check_target(path: str | Path, force: bool = False) -> None:
    """Raise ``FileExistsError`` if :func:`save` would refuse ``path`` (call it before a fit):
    an existing path needs ``force``, and then must be a saved model or an empty directory."""
    path = Path(path)
    if not path.exists():
        return
    if not force:
        raise FileExistsError(f"{path} already exists: pass force=True (--force) to replace it")
    if not path.is_dir():
        raise FileExistsError(f"{path} exists and is not a directory: not replacing it")
    if any(path.iterdir()) and not _is_saved_model(path):
        raise FileExistsError(f"{path} is a non-empty directory that is not a saved model: not replacing it")


def _is_saved_model(path: Path) -> bool:
    try:
        return json.loads((path / MODEL_FILE).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _describe(obj: Any) -> dict:
    """Method, class, selector and generator names and their settings (never the seed)."""
    if isinstance(obj, SavedSynthesizer):
        return {k: obj.info[k] for k in ("method", "class", "selector", "generator", "params")}
    method = next((e.name for e in registry.entries("preset") if registry.preset_class(e.name) is type(obj)),
                  None)
    sel = obj.selector
    gen = obj.generator
    params: dict[str, Any] = {
        "epsilon": obj.epsilon, "delta": obj.delta, "rho": obj.rho, "rho_total": obj.rho_total,
        "neighbour": obj.neighbour, "preprocess_share": obj.preprocess_share}
    params.update(_settings(obj, skip={"epsilon", "delta", "rho", "neighbour", "seed", "generator",
                                       "preprocess_share", "constraint"}))
    gen_params = gen.get_params() if hasattr(gen, "get_params") else {}
    return {
        "method": method or "synthesizer",
        "class": type(obj).__name__,
        "selector": {"name": getattr(sel, "name", type(sel).__name__), "params": _settings(sel)},
        "generator": {"name": getattr(gen, "name", type(gen).__name__),
                      "params": {k: _plain(v) for k, v in gen_params.items()
                                 if k not in ("seed", "device") and _plain(v) is not _SKIP}},
        "params": params,
    }


def _settings(obj: Any, skip: set | frozenset = frozenset({"seed", "loop", "inner", "constraint"})) -> dict:
    """An object's constructor arguments that it keeps as plain attributes (JSON values only)."""
    out = {}
    try:
        names = inspect.signature(type(obj).__init__).parameters
    except (TypeError, ValueError):
        return out
    for name, p in names.items():
        if name == "self" or name in skip or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        if hasattr(obj, name):
            v = _plain(getattr(obj, name))
            if v is not _SKIP:
                out[name] = v
    return out


def _measurement_state(m: Measurement, i: int, arrays: dict) -> dict:
    arrays[f"measurement.{i}.y"] = np.asarray(m.y, dtype=float)
    out = {"attrs": list(m.attrs), "y": f"measurement.{i}.y", "sigma": m.sigma, "weight": float(m.weight),
           "source": m.source, "query": None,
           "meta": {k: v for k, v in ((str(k), _plain(v)) for k, v in m.meta.items()) if v is not _SKIP}}
    if sp.issparse(m.query):  # a grouping of cells: kept sparse (a dense one of a wide pair is ~20 MB)
        q = sp.csr_array(m.query)
        for part in ("data", "indices", "indptr"):
            arrays[f"measurement.{i}.query.{part}"] = np.asarray(getattr(q, part))
        out["query"] = {"sparse": f"measurement.{i}.query", "shape": [int(x) for x in q.shape]}
    elif m.query is not None:
        arrays[f"measurement.{i}.query"] = np.asarray(m.query, dtype=float)
        out["query"] = f"measurement.{i}.query"
    return out


def _saved_query(entry: Any, arrays: dict, shape: tuple[int, int]) -> Any:
    """A measurement's saved query back: None, a dense array, or a sparse one, of ``shape`` (answers
    × the clique's cells; checked, as are the sparse indices and pointers)."""
    if entry is None:
        return None
    if isinstance(entry, str):
        q = arrays[entry]
        if q.shape != shape:
            raise ValueError(f"a measurement's query has shape {q.shape}, not {shape}")
        return q
    key = entry["sparse"]
    if [int(x) for x in entry["shape"]] != list(shape):
        raise ValueError(f"a measurement's query has shape {entry['shape']}, not {list(shape)}")
    q = sp.csr_array((arrays[f"{key}.data"], arrays[f"{key}.indices"], arrays[f"{key}.indptr"]), shape=shape)
    q.check_format(full_check=True)
    return q


def _model_state(model: Any, key: str, arrays: dict) -> dict:
    """The model's saved form, written by the class the registry names for its ``state_kind``."""
    kind = getattr(model, "state_kind", None)
    cls = registry.model_class(kind) if kind in registry.model_kinds() else None
    if cls is None or not isinstance(model, cls):
        raise TypeError(f"cannot save a model of type {type(model).__name__}")
    return {"kind": kind, **model.to_state(key, arrays, lambda inner, k: _model_state(inner, k, arrays))}


# ------------------------------------------------------------------------------------ loading
class SavedSynthesizer(Released):
    """A fitted synthesizer loaded with :func:`load`: ``sample(rows, seed=..., conditions=...)``,
    ``sample_codes``, ``privacy_report()``, ``measurements_report()``, ``save``. It cannot be
    fitted again (that would be a new release). ``method``, ``params`` and ``info`` (the whole
    ``model.json``) say what it is; ``model_`` is the generator's model."""

    def __init__(self, info: dict, model: Any, encoder: Any, accountant: Accountant,
                 measurements: list[Measurement], zeros: list[StructuralZero], path: Path | None = None):
        self.info = info
        self.method = info["method"]
        self.params = info["params"]
        self.path = path
        self.model_ = model
        self.encoder_ = encoder
        self.schema_ = None if encoder is None else encoder.schema
        self.domain_ = model.domain
        self.accountant_ = accountant
        self.measurements_ = measurements
        self.zeros_ = zeros
        self.public_rows_ = info["public_rows"]
        self.preprocess_charges_ = int(info["privacy"].get("preprocessing_charges", 0))
        self.log_ = list(info.get("rounds") or [])
        self.sample_rng_ = np.random.default_rng()

    def fit(self, *args, **kw):
        raise RuntimeError("a loaded model is already fitted: fitting again would be a new release "
                           "(create a new synthesizer)")

    def save(self, path: str | Path, *, force: bool = False) -> Path:
        return save(self, path, force=force)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("sample_rng_", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.sample_rng_ = np.random.default_rng()

    def __repr__(self) -> str:
        return (f"SavedSynthesizer(method={self.method!r}, domain={len(self.domain_)} columns, "
                f"rho_spent={self.accountant_.rho_spent:.6g})")


def load(path: str | Path) -> SavedSynthesizer:
    """Load a model written by :meth:`Synthesizer.save <privmarg.Synthesizer.save>`. Raises
    ``ValueError`` with one line for anything that is not a saved model of this format version, or
    a damaged one. Loading and sampling spend no privacy budget."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"{path}: not a saved privmarg model (no such directory)")
    mfile = path / MODEL_FILE
    _check_file(mfile, MAX_MODEL_JSON_BYTES)
    try:
        text = mfile.read_text()
    except FileNotFoundError:
        raise ValueError(f"{path}: not a saved privmarg model (no {MODEL_FILE})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{mfile}: cannot read it ({_line(e)})") from None
    try:
        info = strict_json.loads(text)
    except ValueError as e:
        raise ValueError(f"{mfile}: corrupted (not valid JSON: {_line(e)})") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ValueError(f"{mfile}: not a saved privmarg model (format is not {FORMAT!r})")
    version = info.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: saved model format version {version!r} (written by privmarg "
                         f"{info.get('privmarg_version', '?')}); this privmarg ({__version__}) reads version "
                         f"{FORMAT_VERSION}")
    _check_file(path / ARRAYS_FILE, _memory_cap())
    try:
        data = (path / ARRAYS_FILE).read_bytes()
    except OSError as e:
        raise ValueError(f"{path}: corrupted saved model (cannot read {ARRAYS_FILE}: {_line(e)})") from None
    if hashlib.sha256(data).hexdigest() != info.get("arrays_sha256"):
        raise ValueError(f"{path / ARRAYS_FILE}: corrupted (checksum does not match {MODEL_FILE})")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            unpacked = sum(i.file_size for i in npz.zip.infolist())
            if unpacked > _memory_cap():  # a zip bomb: refused before inflating anything
                raise ValueError(f"{ARRAYS_FILE} unpacks to {unpacked / 2**30:.1f} GiB, more than the memory available")
            arrays = {k: npz[k] for k in npz.files}
        return _build(info, arrays, path)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError, OSError) as e:
        raise ValueError(f"{path}: corrupted saved model ({_line(e)})") from None


def _check_file(file: Path, limit: int) -> None:
    """A saved model's file is untrusted: a regular file (not a device or pipe a link points to)
    of at most ``limit`` bytes, checked before reading any of it."""
    if not file.exists():
        return  # the read that follows says what is missing
    if not file.is_file():
        raise ValueError(f"{file}: not a regular file")
    size = file.stat().st_size
    if size > limit:
        raise ValueError(f"{file}: {size / 2**20:,.0f} MB, more than a saved model's {limit / 2**20:,.0f} MB limit")


def _memory_cap() -> int:
    """Bytes a model's arrays may take: half the memory available (64 GiB when unknown)."""
    from .memory import available_memory

    avail = available_memory()
    return (avail // 2) if avail else 64 * 2**30


def _line(e: BaseException) -> str:
    msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    return " ".join(msg.split()) or type(e).__name__


def _build(info: dict, arrays: dict, path: Path) -> SavedSynthesizer:
    domain = _domain(info["domain"])
    # a model saved without its own structural zeros (before models kept them) gets the release's
    model = _model({"zeros": info.get("zeros", []), **info["model"]}, arrays)
    if model.domain != domain:
        raise ValueError("the model's domain differs from the saved domain")
    encoder = None
    if info.get("encoder") is not None:
        from .preprocess import TableEncoder

        encoder = TableEncoder.from_state(info["encoder"])
        if encoder.domain != domain:
            raise ValueError("the encoder's domain differs from the saved domain")
    p = info["privacy"]
    acc = Accountant(p["rho_total"], p["neighbour"], p.get("epsilon"), p.get("delta"), p.get("delta_budget", 0.0))
    for e in p["ledger"]:
        acc.charge(e["rho"], e["what"], e["mechanism"],
                   **{k: v for k, v in e.items() if k not in ("what", "mechanism", "rho")})
    if not math.isclose(acc.rho_spent, p["rho_spent"], rel_tol=1e-9, abs_tol=1e-15):
        raise ValueError("the ledger does not add up to rho_spent")
    measurements = []
    for m in info["measurements"]:
        q = _saved_query(m.get("query"), arrays, (arrays[m["y"]].size, domain.size(tuple(m["attrs"]))))
        measurements.append(Measurement(tuple(m["attrs"]), arrays[m["y"]], m["sigma"], query=q,
                                        source=m["source"], meta=dict(m.get("meta") or {}), weight=m["weight"]))
    zeros = [StructuralZero(tuple(z["attrs"]), arrays[z["mask"]]) for z in info.get("zeros", [])]
    return SavedSynthesizer(info, model, encoder, acc, measurements, zeros, path)


def _model(state: dict, arrays: dict) -> Any:
    """A saved model back, by the class the registry names for its kind (which checks its input)."""
    kind = state["kind"]
    try:
        cls = registry.model_class(kind)
    except registry.MissingExtra as e:
        raise ValueError(f"this saved model is of kind {kind!r}: {e}") from None
    except ImportError as e:  # a model class whose module cannot be imported here
        raise ValueError(f"this saved model is of kind {kind!r}, whose class cannot be imported ({e})") from None
    return cls.from_state(state, arrays, _domain(state["domain"]), lambda inner: _model(inner, arrays))
