"""Benchmark runner: cells in parallel worker processes, results appended durably, resumable.

``run_benchmark(config)`` expands the config to cells (dataset × method × epsilon × seed, plus one
``real`` baseline per dataset), skips the cells already in ``results.jsonl``, and runs the rest in a
:class:`concurrent.futures.ProcessPoolExecutor` (``forkserver`` or ``spawn`` workers, at most
``workers`` cells in flight; one BLAS thread each when ``workers > 1``). The parent alone writes: each finished cell becomes one fsync'ed JSON line, so an
interrupted sweep (Ctrl-C, a killed parent, a killed worker) resumes where it stopped on rerun.

A worker that dies (OOM killer, segfault, SIGKILL) breaks the pool: finished cells are kept, the
pool is restarted, and the cells that were in flight are retried — alone when several were running,
so the culprit is identified; a cell that kills its worker ``max_crashes`` times when running alone
is given up (logged to ``errors.jsonl``; rerunning retries it). A cell that raises is logged to
``errors.jsonl`` too and retried on the next run. A cell whose fit and sample run past the config's
``cell_timeout`` (seconds) is stopped and logged with status ``timeout``; later runs skip it unless
``cell_timeout`` has been raised above the limit it ran under.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import time
import traceback
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..data import Dataset, read_table
from ..core import Domain
from ..memory import peak_rss_mb
from ..memory import reset_peak as _reset_peak
from ..memory import status_mb as _rss_mb
from .config import BenchConfig, Cell
from .methods import check_available, resolve
from .results import append_record, finished_keys, repair

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


# ------------------------------------------------------------------------------------------
# worker side
# ------------------------------------------------------------------------------------------
class CellTimeout(BaseException):
    """A cell's fit and sample ran past ``cell_timeout`` (a BaseException, like KeyboardInterrupt, so
    that no ``except Exception`` inside a method swallows it)."""


def _arm(seconds: float | None) -> bool:
    """Raise :class:`CellTimeout` in this (worker's main) thread after ``seconds`` of wall time;
    False where there is no limit or no interval timer (then nothing is armed)."""
    import threading

    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return False

    def _expire(signum, frame):
        raise CellTimeout(f"fit and sample ran past cell_timeout = {seconds:g} s")

    signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    return True


def _disarm() -> None:
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0)


_DATA_CACHE: dict[str, tuple[Dataset, Dataset]] = {}


def split_dataset(data: Dataset, test_fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """Deterministic random train/test split (``round(N·test_fraction)`` test rows, at least 1 each)."""
    n = len(data)
    n_test = min(max(1, int(round(n * test_fraction))), n - 1)
    perm = np.random.default_rng(seed).permutation(n)
    test_idx, train_idx = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    return data.take(train_idx), data.take(test_idx)


def load_cell_data(cell: Cell) -> tuple[Dataset, Dataset]:
    """(train, test) for a cell's dataset: its explicit test file, else the configured split. Cached."""
    ds = cell.dataset
    ck = json.dumps([ds.data, ds.domain, ds.test, cell.split], sort_keys=True)
    if ck not in _DATA_CACHE:
        dom = Domain.from_json(ds.domain)
        data = Dataset.from_frame(read_table(ds.data), dom, drop_unknown=True)
        if ds.test:
            pair = (data, Dataset.from_frame(read_table(ds.test), dom, drop_unknown=True))
        else:
            pair = split_dataset(data, float(cell.split["test_fraction"]), int(cell.split["seed"]))
        _DATA_CACHE.clear()
        _DATA_CACHE[ck] = pair
    return _DATA_CACHE[ck]


def _subsample(data: Dataset, rows: int | None, seed: int) -> Dataset:
    if rows is None or len(data) <= rows:
        return data
    idx = np.sort(np.random.default_rng(seed).choice(len(data), size=int(rows), replace=False))
    return data.take(idx)


def _limit_threads() -> None:
    """One BLAS/OpenMP thread per worker when several workers share the cores."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1)
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        pass


def run_cell(cell: Cell, options: dict) -> dict:
    """Fit one method on one training split, sample, evaluate; returns the record (never raises).

    Timing: ``fit_seconds`` and ``sample_seconds`` (wall), ``cpu_seconds`` (process CPU of both;
    ``child_cpu_seconds`` for subprocesses such as peers). Memory: ``peak_rss_mb``, this process's
    resident-set high-water mark during fit + sample (reset before the fit on Linux), and
    ``fit_extra_mb`` = that peak minus the RSS before the fit (``children_peak_rss_mb`` for
    subprocesses).
    """
    from ..evaluation.report import evaluate

    rec: dict[str, Any] = {
        "key": cell.key, "spec_hash": cell.spec_hash, "dataset": cell.dataset.name, "method": cell.method.name,
        "method_ref": cell.method.method, "params": cell.method.params, "epsilon": cell.epsilon,
        "delta": cell.delta if cell.epsilon is not None else None, "seed": cell.seed,
        "pid": os.getpid(), "host": platform.node(),
    }
    try:
        train, test = load_cell_data(cell)
        factory = resolve(cell.method.method)
        if options.get("single_thread"):
            _limit_threads()
        exact = _reset_peak()
        rss0 = _rss_mb("VmRSS")
        ch0 = os.times()
        c0, t0 = time.process_time(), time.perf_counter()
        _arm(options.get("cell_timeout"))
        try:
            mech = factory(cell.epsilon, cell.delta, seed=cell.seed, **cell.method.params)
            fitted = mech.fit(train)
            mech = fitted if fitted is not None else mech
            t1 = time.perf_counter()
            codes = np.asarray(mech.sample_codes(cell.rows))
        finally:
            _disarm()
        t2, c2 = time.perf_counter(), time.process_time()
        ch2 = os.times()
        child_cpu = (ch2.children_user + ch2.children_system) - (ch0.children_user + ch0.children_system)
        peak = _rss_mb("VmHWM") if exact else None
        if peak is None:
            peak = peak_rss_mb()
        synth = Dataset(codes, train.domain)
        rec["timing"] = {"fit_seconds": t1 - t0, "sample_seconds": t2 - t1, "cpu_seconds": c2 - c0}
        if child_cpu > 0:  # e.g. a peer run in a subprocess
            rec["timing"]["child_cpu_seconds"] = child_cpu
        rec["memory"] = {"peak_rss_mb": peak, "rss_before_mb": rss0,
                         "fit_extra_mb": None if rss0 is None else max(0.0, peak - rss0),
                         "how": "VmHWM reset per cell" if exact else "ru_maxrss (process lifetime)"}
        if child_cpu > 0:  # subprocesses: their peak RSS (max over this worker's finished children)
            rec["memory"]["children_peak_rss_mb"] = peak_rss_mb(children=True)
        priv = getattr(mech, "privacy_report", None)
        if callable(priv):
            try:
                p = priv()
                rec["privacy"] = {k: p.get(k) for k in ("epsilon", "delta", "neighbour", "rho_total", "rho_spent")}
            except Exception:  # noqa: BLE001 - reporting is best effort
                pass
        rec["rows"] = {"train": len(train), "test": len(test), "synthetic": len(synth)}
        ds = cell.dataset
        ml_train = _subsample(synth, options.get("ml_max_train_rows"), 0)
        e0 = time.perf_counter()
        metrics = evaluate(train, synth, test=test, target=ds.target, metrics=options.get("metrics"), seed=0,
                           numeric=ds.numeric, ml_models=options.get("ml_models"),
                           ml_baseline=False, query_data="test", worst=3, ml_train=ml_train, ml_task=ds.task)
        rec["timing"]["eval_seconds"] = time.perf_counter() - e0
        metrics.pop("columns", None)
        rec["metrics"] = metrics
        rec["status"] = "ok"
    except CellTimeout as e:
        rec["status"] = "timeout"
        rec["error"] = str(e)
        rec["cell_timeout"] = options.get("cell_timeout")
        rec["traceback"] = traceback.format_exc()[-4000:]  # where the fit was when stopped
    except Exception as e:  # noqa: BLE001 - a failing cell must not take the sweep down
        rec["status"] = "error"
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()[-4000:]
    rec["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return rec


# ------------------------------------------------------------------------------------------
# parent side
# ------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """What a run did: counts, and the cells it could not finish."""

    total: int = 0
    already_done: int = 0
    finished: int = 0
    errors: list[str] = field(default_factory=list)
    given_up: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # method -> reason
    timed_out: list[str] = field(default_factory=list)  # skipped: ran past an earlier, not shorter, cell_timeout
    pool_restarts: int = 0
    interrupted: bool = False

    @property
    def complete(self) -> bool:
        return not (self.errors or self.given_up or self.interrupted)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run_benchmark(config: BenchConfig, *, workers: int | None = None, console=None, progress: bool = True,
                  options: dict | None = None, summarize: bool = True) -> Outcome:
    """Run every unfinished cell of ``config``; returns an :class:`Outcome` (see the module docstring)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    workers = int(workers or config.workers)
    out_dir = config.output
    out_dir.mkdir(parents=True, exist_ok=True)
    results, errors = config.results_path, config.errors_path
    dropped = repair(results)
    if dropped:
        console.print(f"[yellow]note:[/] dropped a partial last line ({dropped} bytes) of {results}")
    cells = config.cells()
    done = finished_keys(results)
    outcome = Outcome(total=len(cells))
    todo = [c for c in cells if c.key not in done]
    outcome.already_done = len(cells) - len(todo)
    timed_out = _timed_out(errors, config.cell_timeout)
    if timed_out:
        todo = [c for c in todo if c.key not in timed_out]
        outcome.timed_out = sorted(timed_out)
        console.print(f"[yellow]skipping {len(timed_out)} cell(s)[/] that ran past a cell_timeout at least as long "
                      f"as this one ({config.cell_timeout:g} s; raise it to retry them): see {errors}")
    for name in sorted({c.method.method for c in todo}):
        ok, why = check_available(name)
        if not ok:
            outcome.skipped[name] = why
            console.print(f"[yellow]skipping method {name}:[/] {why}")
    todo = [c for c in todo if c.method.method not in outcome.skipped]
    opts = {"metrics": config.metrics, "ml_models": config.ml_models, "cell_timeout": config.cell_timeout,
            "ml_max_train_rows": config.ml_max_train_rows, "single_thread": workers > 1, **(options or {})}
    console.print(f"{len(cells)} cells: {outcome.already_done} already finished, {len(todo)} to run "
                  f"on {workers} worker(s) -> {results}")

    saved_env = {v: os.environ.get(v) for v in _THREAD_VARS}
    if workers > 1:
        for v in _THREAD_VARS:
            os.environ.setdefault(v, "1")
    pending: deque[tuple[Cell, bool]] = deque((c, False) for c in todo)  # (cell, suspect)
    crashes: Counter[str] = Counter()
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[msg]}"), TimeElapsedColumn(), console=console,
                   disable=not progress, transient=False)
    import multiprocessing as mp

    try:
        with bar:
            task = bar.add_task("bench", total=len(todo), msg="")
            while pending:
                broken = _run_pool(config, workers, pending, crashes, opts, outcome, bar, task, mp, console)
                if broken:
                    outcome.pool_restarts += 1
    except KeyboardInterrupt:
        outcome.interrupted = True
        console.print("[yellow]interrupted:[/] finished cells are saved; rerun to resume")
    finally:
        for v, val in saved_env.items():
            if val is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = val
    if summarize:
        from .summary import write_summary

        try:
            paths = write_summary(config)
            console.print("summary: " + ", ".join(str(p) for p in paths))
        except Exception as e:  # noqa: BLE001 - the results are safe; a summary can be redone
            console.print(f"[red]summary failed:[/] {type(e).__name__}: {e}")
    if errors.exists() and (outcome.errors or outcome.given_up):
        console.print(f"[red]{len(outcome.errors)} cell(s) failed, {len(outcome.given_up)} given up[/]: see {errors}")
    return outcome


def _context(mp, method: str):
    """The multiprocessing context: ``forkserver`` (default; workers fork from a warm server that
    has imported privmarg, so restarting a broken pool is cheap and no thread state is forked) or
    ``spawn`` (fresh interpreters), falling back to ``spawn`` where unavailable."""
    if method not in mp.get_all_start_methods():
        method = "spawn"
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["privmarg.benchmark.runner"])
    return ctx


def _run_pool(config, workers, pending, crashes, opts, outcome, bar, task, mp, console) -> bool:
    """One executor lifetime; returns True if the pool broke (a worker died)."""
    inflight: dict = {}
    broken = False
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=_context(mp, config.start_method),
                             max_tasks_per_child=1 if config.fresh_worker else None)
    try:
        while (pending or inflight) and not broken:
            # a suspect (in flight when a worker died) runs alone, so a new crash is its own
            while pending and len(inflight) < workers:
                cell, suspect = pending[0]
                if suspect and inflight:
                    break
                if any(sus for _, sus in inflight.values()):
                    break
                try:
                    fut = ex.submit(run_cell, cell, opts)
                except BrokenProcessPool:  # a worker died since the last wait: handled below
                    break
                pending.popleft()
                inflight[fut] = (cell, suspect)
            if not inflight:  # the pool broke before anything could be submitted
                return True
            done, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
            lost = []
            for fut in done:
                cell, suspect = inflight.pop(fut)
                try:
                    rec = fut.result()
                except BrokenProcessPool:
                    broken = True
                    lost.append((cell, suspect))
                    continue
                except Exception as e:  # noqa: BLE001 - e.g. an unpicklable result
                    rec = {"key": cell.key, "status": "error", "error": f"{type(e).__name__}: {e}",
                           "finished_at": _now()}
                _record(config, rec, outcome, bar, task)
            if broken:
                # the pool is dead: every other in-flight future fails (or has just finished)
                rest, _ = wait(list(inflight))
                for fut in rest:
                    cell, suspect = inflight.pop(fut)
                    try:
                        _record(config, fut.result(), outcome, bar, task)
                    except BrokenProcessPool:
                        lost.append((cell, suspect))
                    except Exception as e:  # noqa: BLE001
                        _record(config, {"key": cell.key, "status": "error", "error": f"{type(e).__name__}: {e}",
                                         "finished_at": _now()}, outcome, bar, task)
                alone = len(lost) == 1
                for cell, _ in reversed(lost):
                    if alone:
                        crashes[cell.key] += 1
                    if crashes[cell.key] >= config.max_crashes:
                        append_record(config.errors_path, {
                            "key": cell.key, "status": "crashed",
                            "error": f"worker died {crashes[cell.key]} time(s) running this cell alone "
                                     "(out of memory? killed?)", "finished_at": _now()})
                        outcome.given_up.append(cell.key)
                        bar.update(task, advance=1, msg=f"gave up {cell.key}")
                    else:
                        pending.appendleft((cell, True))
                console.print(f"[yellow]a worker died[/] with {len(lost)} cell(s) in flight; restarting the pool")
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
    return broken


def _timed_out(errors, limit: float | None) -> set[str]:
    """Keys that ran past a ``cell_timeout`` at least ``limit`` (all timeouts when there is no limit now:
    none are skipped then)."""
    if limit is None:
        return set()
    from .results import load_results

    return {r["key"] for r in load_results(errors)
            if r.get("status") == "timeout" and (r.get("cell_timeout") or 0) >= limit and "key" in r}


def _record(config: BenchConfig, rec: dict, outcome: Outcome, bar, task) -> None:
    if rec.get("status") == "ok":
        append_record(config.results_path, rec)
        outcome.finished += 1
        msg = rec["key"].rsplit("/", 1)[0]
    else:
        append_record(config.errors_path, rec)
        outcome.errors.append(rec.get("key", "?"))
        msg = f"[red]error[/] {rec.get('key', '?')}: {rec.get('error', '')}"[:120]
    bar.update(task, advance=1, msg=msg)


def cell_table(config: BenchConfig) -> list[dict]:
    """Every cell of ``config``: key, whether finished, and why it would be skipped (for ``--dry-run``)."""
    done = finished_keys(config.results_path)
    avail = {m: check_available(m) for m in {c.method.method for c in config.cells()}}
    late = _timed_out(config.errors_path, config.cell_timeout)
    return [{"key": c.key, "done": c.key in done, "epsilon": c.epsilon, "seed": c.seed,
             "skip": (f"ran past cell_timeout {config.cell_timeout:g} s before" if c.key in late
                      else "" if avail[c.method.method][0] else avail[c.method.method][1])}
            for c in config.cells()]


__all__ = ["Outcome", "cell_table", "load_cell_data", "run_benchmark", "run_cell", "split_dataset"]
