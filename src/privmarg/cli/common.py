"""What every command shares: one-line errors (exit 2), output checks made before any work (and
before any budget is spent), memory guards, peak memory."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from ..memory import available_memory  # check_rows_memory looks it up here (tests patch it)
from ..privacy.risk import WEAK_EPSILON

err = Console(stderr=True)


@contextmanager
def budget_progress(label: str) -> Iterator[Callable[[float, float, str], None]]:
    """A ``progress(spent, total, message)`` callback for a fit: a live bar on a terminal, else one
    plain line per message (a round, a step) with the seconds elapsed and the share of the budget
    spent, so that a run piped to a file or a job log shows it is alive. Messages name released
    quantities only (what was measured, the budget spent)."""
    if err.is_terminal:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[msg]}"),
                      TimeElapsedColumn(), console=err, transient=False) as bar:
            task = bar.add_task(f"{label} budget", total=1.0, msg="")
            yield lambda spent, total, msg: bar.update(task, completed=spent / total, msg=msg[:60])
        return
    t0 = time.perf_counter()

    def line(spent: float, total: float, msg: str) -> None:
        share = 100.0 * spent / total if total > 0 else 100.0
        err.print(f"{label}: {time.perf_counter() - t0:.1f} s, {share:.1f}% of the budget: {msg}",
                  highlight=False, soft_wrap=True, markup=False)

    yield line


class UsageProblem(Exception):
    """Bad input: reported as one line, exit code 2."""


def fail(msg: str) -> None:
    err.quiet = False  # --quiet silences progress and summaries, never the error
    err.print(f"[bold red]error:[/] {escape(one_line(msg))}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def one_line(e: BaseException | str) -> str:
    if isinstance(e, str):
        msg = e
    else:
        msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    return " ".join(msg.split()) or type(e).__name__


def peak_memory_mb() -> float | None:
    """This process's peak memory in MB, None where the platform does not say."""
    from ..memory import peak_rss_mb

    return peak_rss_mb()


# ------------------------------------------------------------------------------------------ outputs
def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def check_outputs(outputs: Mapping[str, Path | None], inputs: Mapping[str, Path | None]) -> None:
    """Raise :class:`UsageProblem` unless every output can be written: not a directory, its folder
    (or the nearest one that exists, as missing folders are created) writable, and neither one of
    the inputs nor another output (resolved paths and ``samefile``, so links and ``..`` count).
    Call it before reading private data or spending any budget."""
    given_in = [(k, Path(p)) for k, p in inputs.items() if p is not None]
    given_out = [(k, Path(p)) for k, p in outputs.items() if p is not None]
    for i, (opt, out) in enumerate(given_out):
        for k, p in given_in:
            if _same_file(out, p):
                raise UsageProblem(f"{opt} {out} is the input {k} {p}: refusing to overwrite an input")
        for k, p in given_out[:i]:
            if _same_file(out, p):
                raise UsageProblem(f"{opt} {out} is also {k}: give two different files")
        if out.is_dir():
            raise UsageProblem(f"{opt} {out} is a directory: give a file name")
        folder = out.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir():
            raise UsageProblem(f"{opt} {out}: {folder} is not a directory")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UsageProblem(f"{opt} {out}: directory {folder} is not writable")
        if out.exists() and not out.is_file():
            raise UsageProblem(f"{opt} {out} exists and is not a regular file")


LARGE_DELTA = 1e-5  # δ must be far below 1/N; above this it is so for no table worth protecting


def check_budget(epsilon: float, delta: float) -> None:
    """Raise :class:`UsageProblem` unless ε > 0 is finite and 0 < δ < 1."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise UsageProblem(f"--epsilon must be > 0, got {epsilon}")
    if not 0 < delta < 1:
        raise UsageProblem(f"--delta must be in (0, 1), got {delta}")


def neighbour_words(neighbour: str) -> str:
    """A neighbour relation as the docs write it: ``add/remove`` or ``replace-one``."""
    return {"add_remove": "add/remove", "replace_one": "replace-one"}.get(neighbour, neighbour)


def risk_sentence(risk: dict) -> str:
    """A risk panel (``privacy_report()["risk"]``) in one plain sentence."""
    return (f"risk, worst case over every attacker: a membership test that wrongly accuses 1% of non-members "
            f"finds at most {risk['membership_tpr_at_fpr']['0.01']:.1%} of the people in the data (largest "
            f"advantage {risk['max_membership_advantage']:.1%}); a 50/50 guess of someone's value becomes right "
            f"at most {risk['attribute_success_from_baseline']['0.5']:.1%} of the time")


def budget_warnings(epsilon: float, delta: float) -> list[str]:
    """Plain-words warnings about a budget, from the budget alone (public): a large ε protects
    little, a large δ is a real chance of no protection at all."""
    out = []
    if epsilon > WEAK_EPSILON:
        out.append(f"warning: epsilon {epsilon:g} protects individuals only weakly (see the risk line after "
                   "the run, and docs/choosing.md)")
    if delta > LARGE_DELTA:
        out.append(f"warning: delta {delta:g} is the chance that the guarantee fails outright: keep it far "
                   "below 1/N, N the number of rows (1e-9 suits tables up to millions of rows; docs/choosing.md)")
    return out


def check_model_folder(folder: Path, outputs: Mapping[str, Path | None]) -> None:
    """Raise :class:`UsageProblem` unless the model folder can be published beside the other
    outputs: none of them is the folder or inside it, and its parent (or the nearest existing
    ancestor) is writable. Call it before reading private data or spending any budget."""
    where = folder.resolve()
    for opt, out in outputs.items():
        if out is None:
            continue
        o = Path(out).resolve()
        if o == where or where in o.parents:
            raise UsageProblem(f"{opt} {out} is inside --save-model {folder}: give them separate places")
    parent = where.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageProblem(f"--save-model {folder}: directory {parent} is not writable")


# ------------------------------------------------------------------------------------------ memory
def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB"


def check_rows_memory(rows: int, columns: int, what: str) -> None:
    """Raise :class:`UsageProblem` when ``rows`` synthetic rows of ``columns`` columns would need
    more memory than is available (estimated before anything is allocated)."""
    from ..release import SAMPLE_BYTES_PER_CELL  # the API's own guard counts the same bytes

    need = int(rows) * max(int(columns), 1) * SAMPLE_BYTES_PER_CELL
    avail = available_memory()
    if avail is not None and need > avail:
        raise UsageProblem(f"{what}: {int(rows):,} rows x {columns} columns would need about {_gib(need)} "
                           f"of memory, {_gib(avail)} available; ask for fewer rows with --rows")


def check_marginal_sizes(domain, cliques: Iterable[tuple[str, ...]], limit: int) -> None:
    """Raise :class:`UsageProblem` when a marginal the method may count or model (``cliques``,
    e.g. its selector's supporting cliques) has more than ``limit`` cells, before any work."""
    worst, cells = None, 0
    for c in cliques:
        n = math.prod(domain[a] for a in c)
        if n > cells:
            worst, cells = c, n
    if worst is not None and cells > limit:
        raise UsageProblem(
            f"domain too large: the marginal on ({', '.join(worst)}) has {cells:,} cells and would need "
            f"{_gib(cells * 8)} (limit {_gib(limit * 8)}); use a smaller workload or columns with fewer values")
