"""Adapters to peer implementations, for side-by-side benchmarks.

Peers (see benchmarks/PEERS_NOTES.md for install details and gotchas):

* ``mbi`` 2.0.0 (Ryan McKenna's Private-PGM, JAX rewrite) -- estimation only.
  The PyPI package ships no AIM/MST mechanisms (they live in the upstream
  repository's ``mechanisms/`` folder), so there is no ``mbi_aim``/``mbi_mst``.
* ``smartnoise-synth`` 1.0.8 (``snsynth``) -- AIM and MST synthesizers built on
  ``mbi`` 1.1.x.  It pins ``mbi<2`` and (via smartnoise-sql) ``pandas<3``, so it
  cannot share an environment with ``mbi==2.0.0``.  :func:`smartnoise_synth`
  therefore runs in-process only when snsynth *and* mbi 1.x are importable, and
  otherwise re-executes this file as a worker under a separate interpreter
  (``$PRIVMARG_SNSYNTH_PYTHON`` or ``<repo>/.venv-snsynth/bin/python``).

This module imports only the standard library, numpy and pandas at import time;
peer packages are imported lazily inside the functions.

Measurement convention shared with privmarg: a measurement is
``(attrs, y, sigma)`` with ``attrs`` a tuple of column names, ``y`` the noisy
marginal flattened row-major over ``attrs`` *in the given order*, and ``sigma``
the Gaussian noise standard deviation.  The objective compared across libraries
is ``L(p) = sum_i ||M_i(p) - y_i||^2 / (2 sigma_i^2)`` (this is also exactly
mbi's own ``l2`` loss with ``normalize=False``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

INSTALL_HINT = "install with make bench-deps"

Measurement = tuple[tuple[str, ...], np.ndarray, float]

_REPO_ROOT = Path(__file__).resolve().parents[1]
_SNSYNTH_VENV_PYTHON = _REPO_ROOT / ".venv-snsynth" / "bin" / "python"


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def _import_mbi():
    """Import mbi 2.x lazily (enabling JAX float64 first, as mbi recommends)."""
    try:
        import jax
    except ImportError as exc:  # pragma: no cover - depends on env
        raise ImportError(f"peer 'mbi' (needs jax) is not installed: {INSTALL_HINT}") from exc
    # mbi warns that float32 can stall estimation; match our float64 maths.
    jax.config.update("jax_enable_x64", True)
    try:
        import mbi
        from mbi import estimation
    except ImportError as exc:
        raise ImportError(f"peer 'mbi' (>=2.0) is not installed: {INSTALL_HINT}") from exc
    if not hasattr(estimation, "MirrorDescent"):
        raise ImportError(
            "installed 'mbi' is not the 2.x API (no estimation.MirrorDescent; "
            "smartnoise-synth pulls mbi<2): " + INSTALL_HINT
        )
    return mbi


def _check_measurements(domain: dict[str, int], measurements: Sequence[Measurement]):
    out = []
    for attrs, y, sigma in measurements:
        attrs = tuple(attrs)
        y = np.asarray(y, dtype=np.float64).ravel()
        size = int(np.prod([domain[a] for a in attrs])) if attrs else 1
        if y.size != size:
            raise ValueError(f"measurement on {attrs}: y has {y.size} cells, domain says {size}")
        out.append((attrs, y, float(sigma)))
    return out


def loss_from_marginals(marginal: Callable[[tuple[str, ...]], np.ndarray],
                        measurements: Sequence[Measurement]) -> float:
    """Our objective  sum_i ||M_i(p) - y_i||^2 / (2 sigma_i^2)  given a marginal oracle.

    ``marginal(attrs)`` must return the flat row-major marginal over ``attrs``
    in the given attribute order, on the count scale (summing to the total).
    """
    total = 0.0
    for attrs, y, sigma in measurements:
        mu = np.asarray(marginal(tuple(attrs)), dtype=np.float64).ravel()
        d = mu - np.asarray(y, dtype=np.float64).ravel()
        total += float(d @ d) / (2.0 * float(sigma) ** 2)
    return total


# --------------------------------------------------------------------------
# mbi 2.0.0
# --------------------------------------------------------------------------


def mbi_marginal(model: Any, attrs: Sequence[str]) -> np.ndarray:
    """Marginal of an mbi model (``MarkovRandomField`` or ``CliqueVector``) on ``attrs``.

    Returned flat, row-major over ``attrs`` in the given order, count scale.
    ``MarkovRandomField.project`` falls back to variable elimination for
    attribute sets that are not inside one model clique (one JIT per new set).
    """
    attrs = tuple(attrs)
    return np.asarray(model.project(attrs).datavector(), dtype=np.float64).ravel()


def mbi_loss(model: Any, measurements: Sequence[Measurement]) -> float:
    """Our objective evaluated on the marginals of an mbi model."""
    return loss_from_marginals(lambda a: mbi_marginal(model, a), measurements)


def mbi_estimate(
    domain: dict[str, int],
    measurements: Sequence[Measurement],
    total: float | None,
    iters: int,
    callback: Callable[[int, float, float], None] | None = None,
    *,
    warmup: bool = True,
    trace: bool = False,
    stepsize: float | None = None,
    oracle: str | None = None,
) -> dict[str, Any]:
    """Fit mbi 2.0.0's mirror descent (``estimation.MirrorDescent``) to our measurements.

    Args:
        domain: ``{attr: size}``; attribute order defines the mbi Domain.
        measurements: ``[(attrs, y_flat, sigma), ...]`` (see module docstring).
        total: known record count, or ``None`` to let mbi estimate it
            (``minimum_variance_unbiased_total`` over the identity measurements).
        iters: mirror-descent iterations.  mbi runs them in fused blocks of
            ``mbi.estimation.CALLBACK_EVERY`` (=50), so it is rounded *up* to a
            multiple of 50.  One iteration = 2 marginal-oracle calls (Armijo
            line search) unless ``stepsize`` is fixed.
        callback: optional ``callback(iteration, seconds, loss)``, called at each
            50-iteration checkpoint with OUR loss of the current iterate.
            Checkpoint evaluation time is excluded from ``seconds``.
        warmup: run one 50-iteration block first so JIT compilation is not timed
            (its wall time is returned as ``compile_seconds``).
        trace: record ``[(iteration, seconds, loss), ...]`` even without callback.
        stepsize: fixed step size (disables mbi's Armijo line search).
        oracle: name of an ``mbi.marginal_oracles`` function, e.g.
            ``"message_passing_shafer_shenoy"``; default lets mbi pick (CPU, no
            constraints: ``message_passing_hugin``).

    Returns:
        dict(loss=OUR loss of the final model, seconds=estimation wall time,
        model=mbi MarkovRandomField, iters=iterations actually run,
        compile_seconds=..., total=total used, trace=[...] (possibly empty),
        mbi_loss=mbi's own loss value from the final optimiser state or None).
    """
    mbi = _import_mbi()
    import jax
    from mbi import estimation, marginal_oracles

    ms = _check_measurements(domain, measurements)
    dom = mbi.Domain(list(domain.keys()), [int(v) for v in domain.values()])
    lms = [mbi.LinearMeasurement(y, attrs, sigma) for attrs, y, sigma in ms]
    kwargs = {}
    if oracle is not None:
        kwargs["marginal_oracle"] = getattr(marginal_oracles, oracle)
    est = estimation.MirrorDescent(stepsize=stepsize, **kwargs)
    known_total = None if total is None else float(total)
    block = estimation.CALLBACK_EVERY

    compile_seconds = 0.0
    if warmup:
        t0 = time.perf_counter()
        m0 = est.estimate(dom, lms, known_total=known_total, iters=1)
        jax.block_until_ready(m0.marginals)
        compile_seconds = time.perf_counter() - t0

    points: list[tuple[int, float, float]] = []
    record = callback is not None or trace
    clock = {"start": 0.0, "excluded": 0.0, "calls": 0}

    def _cb(mu):  # mu: CliqueVector of marginals (maximal cliques)
        if not record:
            return
        # JAX dispatch is async: wait for the block's compute (timed) before
        # starting the excluded checkpoint-evaluation clock.
        jax.block_until_ready(mu)
        t_in = time.perf_counter()
        # NB: MirrorDescentState.mu are the marginals at the iterate *before*
        # the last step of the block, i.e. after (k*50 - 1) steps.
        loss = loss_from_marginals(lambda a: mbi_marginal(mu, a), ms)
        clock["calls"] += 1
        it = clock["calls"] * block
        secs = t_in - clock["start"] - clock["excluded"]
        points.append((it, secs, loss))
        if callback is not None:
            callback(it, secs, loss)
        clock["excluded"] += time.perf_counter() - t_in

    clock["start"] = time.perf_counter()
    model = est.estimate(dom, lms, known_total=known_total, iters=int(iters),
                         callback_fn=_cb if record else None)
    jax.block_until_ready(model.marginals)  # async dispatch: wait before stopping the clock
    seconds = time.perf_counter() - clock["start"] - clock["excluded"]

    loss = mbi_loss(model, ms)
    try:
        from mbi import marginal_loss
        lf = marginal_loss.from_linear_measurements(lms, dom)
        own = float(lf(model.marginals))
    except Exception:  # pragma: no cover - best effort cross-check
        own = None
    return dict(
        loss=loss,
        seconds=seconds,
        model=model,
        iters=-(-int(iters) // block) * block,
        compile_seconds=compile_seconds,
        total=float(model.total),
        trace=points,
        mbi_loss=own,
    )


def mbi_estimate_sweep(domain, measurements, total, iter_grid: Sequence[int], **kw):
    """Fallback checkpointing: independent runs with increasing ``iters``.

    Returns ``[(iters, seconds, loss), ...]``.  Prefer ``mbi_estimate(...,
    trace=True)``, which gets the same curve from one run via mbi's callback.
    """
    out = []
    for i, n in enumerate(iter_grid):
        r = mbi_estimate(domain, measurements, total, n, warmup=(i == 0), **kw)
        out.append((r["iters"], r["seconds"], r["loss"]))
    return out


# --------------------------------------------------------------------------
# smartnoise-synth 1.0.8 (AIM / MST on mbi 1.1.x)
# --------------------------------------------------------------------------


def _snsynth_inprocess_ok() -> bool:
    try:
        from importlib import metadata
        if not metadata.version("mbi").startswith("1."):
            return False
        import snsynth  # noqa: F401
    except Exception:
        return False
    return True


def _snsynth_python(python: str | os.PathLike | None) -> str | None:
    for cand in (python, os.environ.get("PRIVMARG_SNSYNTH_PYTHON"), _SNSYNTH_VENV_PYTHON):
        if cand and Path(cand).exists():
            return str(cand)
    return None


def _smartnoise_inprocess(codes: np.ndarray, columns: list[str], sizes: list[int],
                          method: str, epsilon: float, delta: float, seed: int | None,
                          infer_domain: bool, verbose: bool, synth_kwargs: dict) -> tuple[np.ndarray, dict]:
    import random

    from snsynth.transform.label import LabelTransformer
    from snsynth.transform.table import TableTransformer

    if method == "aim":
        from snsynth.aim import AIMSynthesizer as Synth
    elif method == "mst":
        from snsynth.mst import MSTSynthesizer as Synth
    else:
        raise ValueError(f"method must be 'aim' or 'mst', got {method!r}")

    if seed is not None:
        # Selection (exp. mechanism), AIM's workload sampling and synthetic-data
        # rounding use the global numpy RNG; the Gaussian noise comes from
        # OpenDP's CSPRNG and cannot be seeded (runs are not reproducible).
        np.random.seed(seed)
        random.seed(seed)

    df = pd.DataFrame(codes, columns=columns)
    if infer_domain:
        # snsynth's default path: categories are *learned from the private data*
        # (values that never occur are dropped from the domain -- a leak).
        fit_kw = dict(categorical_columns=list(columns))
    else:
        # Fit each LabelTransformer on the public domain 0..n-1, not on the data.
        cols = []
        for n in sizes:
            t = LabelTransformer(nullable=False)
            t.fit(list(range(int(n))))
            cols.append(t)
        fit_kw = dict(transformer=TableTransformer(cols))

    synth = Synth(epsilon=float(epsilon), delta=float(delta), verbose=verbose, **synth_kwargs)
    info: dict[str, Any] = {"method": method, "epsilon": epsilon, "delta": delta,
                            "synth_kwargs": synth_kwargs, "infer_domain": infer_domain}
    sink = io.StringIO()
    redirect = contextlib.nullcontext() if verbose else contextlib.redirect_stdout(sink)
    t0 = time.perf_counter()
    with redirect:
        synth.fit(df, **fit_kw)
    info["fit_seconds"] = time.perf_counter() - t0
    info["cardinality"] = list(synth._transformer.cardinality)
    if method == "aim":
        info["rounds"] = synth.rounds or 16 * len(columns)
        info["max_model_size"] = synth.max_model_size
        info["degree"] = synth.degree
        info["max_cells"] = synth.max_cells
    t0 = time.perf_counter()
    with redirect:
        out = synth.sample()  # rows default to len(data) (the true count)
    info["sample_seconds"] = time.perf_counter() - t0
    out = pd.DataFrame(out)
    out.columns = columns
    return out.to_numpy(dtype=np.int64), info


def smartnoise_synth(
    df: pd.DataFrame,
    domain: dict[str, int],
    method: str,
    epsilon: float,
    delta: float = 1e-9,
    seed: int | None = 0,
    *,
    python: str | os.PathLike | None = None,
    infer_domain: bool = False,
    timeout: float | None = None,
    verbose: bool = False,
    return_info: bool = False,
    **synth_kwargs: Any,
) -> pd.DataFrame | tuple[pd.DataFrame, dict]:
    """Synthetic table from smartnoise-synth 1.0.8's AIM or MST.

    Args:
        df: integer-coded table (codes 0..domain[c]-1); columns in ``domain`` used.
        domain: ``{column: size}`` -- used as the synthesizer's domain (each
            column gets a LabelTransformer fitted on ``range(size)``), unless
            ``infer_domain=True`` (snsynth default: categories read off the data).
        method: ``"aim"`` or ``"mst"``.
        epsilon, delta: (epsilon, delta)-DP budget; snsynth converts it to zCDP
            rho with OpenDP's ``cdp_rho``.
        seed: seeds numpy's global RNG (selection, rounding).  Noise is drawn
            by OpenDP and is NOT seedable.
        python: interpreter of an environment with smartnoise-synth (+ mbi 1.x);
            default ``$PRIVMARG_SNSYNTH_PYTHON`` or ``<repo>/.venv-snsynth/bin/python``.
            Used only when snsynth cannot run in this process.
        timeout: seconds, for the subprocess path (raises ``subprocess.TimeoutExpired``).
        return_info: also return a dict (fit/sample seconds, hyper-parameters used).
        **synth_kwargs: passed to the synthesizer constructor, e.g. for AIM
            ``rounds``, ``max_model_size`` (MB, default 80), ``degree`` (2),
            ``max_cells`` (10000), ``num_marginals``.  MST takes none.

    Returns:
        synthetic DataFrame with the same columns (int64 codes), ``len(df)`` rows.
    """
    if method not in ("aim", "mst"):
        raise ValueError(f"method must be 'aim' or 'mst', got {method!r}")
    columns = list(domain.keys())
    sizes = [int(domain[c]) for c in columns]
    codes = df[columns].to_numpy(dtype=np.int64)
    if codes.size and (codes.min() < 0 or (codes >= np.array(sizes)).any()):
        raise ValueError("df has codes outside the given domain")

    if _snsynth_inprocess_ok():
        arr, info = _smartnoise_inprocess(codes, columns, sizes, method, epsilon, delta, seed,
                                          infer_domain, verbose, synth_kwargs)
        info["where"] = "in-process"
    else:
        exe = _snsynth_python(python)
        if exe is None:
            raise ImportError(
                "peer 'smartnoise-synth' is not available: it needs mbi<2 and pandas<3, so it "
                "cannot live next to mbi 2.0.0; it is run from a separate environment "
                "(.venv-snsynth or $PRIVMARG_SNSYNTH_PYTHON) -- " + INSTALL_HINT
            )
        with tempfile.TemporaryDirectory(prefix="privmarg-snsynth-") as tmp:
            tmp = Path(tmp)
            np.save(tmp / "in.npy", codes)
            job = dict(columns=columns, sizes=sizes, method=method, epsilon=float(epsilon),
                       delta=float(delta), seed=seed, infer_domain=bool(infer_domain),
                       verbose=bool(verbose), synth_kwargs=synth_kwargs)
            (tmp / "job.json").write_text(json.dumps(job))
            t0 = time.perf_counter()
            proc = subprocess.run([exe, str(Path(__file__).resolve()), "--snsynth-worker", str(tmp)],
                                  capture_output=True, text=True, timeout=timeout)
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"smartnoise-synth worker failed (rc={proc.returncode}):\n"
                                   f"{proc.stderr[-4000:]}")
            if verbose:
                sys.stdout.write(proc.stdout)
            arr = np.load(tmp / "out.npy")
            info = json.loads((tmp / "info.json").read_text())
            info["where"] = f"subprocess:{exe}"
            info["subprocess_seconds"] = wall
    out = pd.DataFrame(arr, columns=columns)
    return (out, info) if return_info else out


def _snsynth_worker(tmpdir: str) -> None:
    tmp = Path(tmpdir)
    job = json.loads((tmp / "job.json").read_text())
    codes = np.load(tmp / "in.npy")
    arr, info = _smartnoise_inprocess(codes, job["columns"], job["sizes"], job["method"],
                                      job["epsilon"], job["delta"], job["seed"],
                                      job["infer_domain"], job["verbose"], job["synth_kwargs"])
    np.save(tmp / "out.npy", arr)
    (tmp / "info.json").write_text(json.dumps(info, default=str))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--snsynth-worker":
        _snsynth_worker(sys.argv[2])
    else:
        sys.exit("usage: peers.py --snsynth-worker DIR   (internal; import this module instead)")
