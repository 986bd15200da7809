"""CLI commands of the evaluation and benchmark side (registered on the main app)."""

from __future__ import annotations


def register(app) -> None:
    """Add the evaluation/benchmark commands to the ``privmarg`` typer app."""
