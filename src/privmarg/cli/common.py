"""What every command shares: one-line errors (exit 2), peak memory."""

from __future__ import annotations

import resource

import typer
from rich.console import Console

err = Console(stderr=True)


class UsageProblem(Exception):
    """Bad input: reported as one line, exit code 2."""


def fail(msg: str) -> None:
    err.print(f"[bold red]error:[/] {msg}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def one_line(e: BaseException) -> str:
    msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    return " ".join(msg.split()) or type(e).__name__


def peak_memory_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
