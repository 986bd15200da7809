"""The ``privmarg`` command line: one module per command, registered on one typer app."""

from __future__ import annotations

import sys

import typer

from . import bench, datasets, evaluate, plan, sample, schema, synth
from .allocator import keep_freed_memory, skip_hugepage_advice
from .common import err, fail  # err re-exported for tests that silence it

# plain click help: typer 0.29's rich panels print flags as "--flag <bool>", as if they took a value;
# an unexpected error's traceback must never print local variables: they may hold private values
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  pretty_exceptions_show_locals=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Differentially private synthetic tables from noisy marginals.")


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"privmarg {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                      help="Print the version and exit."),
         quiet: bool = typer.Option(False, "--quiet", "-q", help="Print errors only (no progress or summary)."),
         verbose: int = typer.Option(0, "--verbose", "-v", count=True,
                                     help="Log each step (selection rounds, budget spent) to stderr; -vv for more.")) -> None:
    """privmarg: select, measure, generate."""
    if quiet and verbose:
        fail("--quiet and --verbose contradict each other: give one")
    err.quiet = quiet
    if verbose:
        import logging

        from rich.logging import RichHandler

        logger = logging.getLogger("privmarg")
        logger.setLevel(logging.INFO if verbose == 1 else logging.DEBUG)
        if not logger.handlers:
            logger.addHandler(RichHandler(console=err, show_path=False, markup=False))


for _command in (plan, synth, sample, schema, evaluate, bench, datasets):
    _command.register(app)


def run() -> None:
    """The ``privmarg`` script: the app in a process of its own, which runs one job and exits, so
    freed tables stay in it for the next ones, with no huge pages advised for them
    (:mod:`.allocator`; never on ``import privmarg``)."""
    keep_freed_memory()
    skip_hugepage_advice()
    app(prog_name="privmarg")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
