"""``privmarg bench CONFIG.yaml [--workers N] [--dataset NAME ...] [--method NAME ...] [--epsilon E ...]
[--output DIR] [--dry-run] [--summary-only]``"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .common import err, fail as _fail


def bench_cmd(
    config: Path = typer.Argument(..., help="benchmark YAML (methods x datasets x epsilons x seeds)"),
    workers: Optional[int] = typer.Option(None, "--workers", help="override the config's workers"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list the cells and whether each is finished"),
    summary_only: bool = typer.Option(False, "--summary-only", help="only (re)write the summary and figure"),
    dataset: Optional[List[str]] = typer.Option(None, "--dataset",
                                                help="run only this dataset of the config (repeatable)"),
    method: Optional[List[str]] = typer.Option(None, "--method",
                                               help="run only this method of the config (repeatable)"),
    epsilon: Optional[List[float]] = typer.Option(None, "--epsilon",
                                                  help="run only this epsilon of the config (repeatable)"),
    output: Optional[Path] = typer.Option(None, "--output", help="override the config's output folder"),
) -> None:
    """Run a benchmark sweep; resumable (finished cells in OUTPUT/results.jsonl are skipped).

    A sweep can be split over processes or machines: give each a disjoint ``--dataset`` set and its
    own ``--output``; a cell's key does not depend on the folder, so the folders' results.jsonl can be
    concatenated into one and summarised with ``--summary-only``. ``--method`` and ``--epsilon`` narrow
    a run the same way (cheap cells first, or leave out cells known to be too slow); the cells keep
    their keys."""
    from ..benchmark import ConfigError, load_config, run_benchmark, write_summary
    from ..benchmark.runner import cell_table

    try:
        cfg = load_config(config)
        if workers is not None and workers < 1:
            raise ConfigError("--workers must be >= 1")
        cfg.datasets = _narrow("--dataset", dataset, cfg.datasets, lambda d: d.name, config, ConfigError)
        cfg.methods = _narrow("--method", method, cfg.methods, lambda m: m.name, config, ConfigError)
        cfg.epsilons = _narrow("--epsilon", epsilon, cfg.epsilons, lambda e: f"{e:g}", config, ConfigError)
        if output is not None:
            cfg.output = output
    except (ConfigError, OSError) as e:
        _fail(str(e))
    except Exception as e:  # YAML syntax errors and the like
        _fail(f"{config}: {type(e).__name__}: {e}")
    for note in cfg.notes:  # e.g. module names this privmarg does not have: their cells are skipped
        err.print(f"note: {note}")
    if dry_run:
        rows = cell_table(cfg)
        for r in rows:
            state = "done" if r["done"] else ("skip" if r["skip"] else "todo")
            typer.echo(f"{state}  {r['key']}" + (f"  ({r['skip']})" if r["skip"] and not r["done"] else ""))
        typer.echo(f"{sum(r['done'] for r in rows)}/{len(rows)} finished; results: {cfg.results_path}")
        return
    if summary_only:
        for p in write_summary(cfg):
            err.print(f"wrote {p}")
        return
    missing = [f"datasets.{ds.name}: {p}" for ds in cfg.datasets for p in (ds.data, ds.domain, ds.test)
               if p is not None and not Path(p).exists()]
    if missing:  # say so before any worker starts, not once per cell
        _fail(f"input file(s) not found: {'; '.join(missing)} (privmarg bundles only the tables listed by "
              "`privmarg datasets`; others, such as fire and salary, must be provided)")
    outcome = run_benchmark(cfg, workers=workers, console=err)
    err.print(f"finished {outcome.finished} cell(s) this run; {outcome.already_done} were already done"
              + (f"; skipped methods: {', '.join(outcome.skipped)}" if outcome.skipped else ""))
    if outcome.interrupted:
        raise typer.Exit(130)
    if not outcome.complete:
        raise typer.Exit(1)


def _narrow(flag: str, wanted, items: list, name, config: Path, error) -> list:
    """``items`` whose ``name`` is among ``wanted`` (all of them when nothing is wanted); a wanted
    name the config lacks is an error that lists what it has."""
    if not wanted:
        return items
    have = [name(x) for x in items]
    want = {name(w) if not isinstance(w, str) else w for w in wanted}
    unknown = sorted(want - set(have))
    if unknown:
        raise error(f"{flag}: {', '.join(unknown)} not in {config} (it has {', '.join(have)})")
    return [x for x, n in zip(items, have) if n in want]


def register(app) -> None:
    app.command("bench")(bench_cmd)
