"""``privmarg schema draft``: a starting schema for a raw table (bounds to be replaced)."""

from __future__ import annotations

from pathlib import Path

import typer

from ..data import DataError, read_table
from ..io import write_json, write_text
from ..schema import DRAFT_WARNING, draft_schema
from ..schema.draft import DP_DRAFT_WARNING
from .common import UsageProblem, check_outputs, err, fail, one_line

schema_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                         pretty_exceptions_show_locals=False, help="Public schemas for raw tables.")


@schema_app.command("draft")
def schema_draft(
    input: Path = typer.Argument(..., help="CSV or Parquet table (raw values)"),
    output: Path = typer.Option(..., "--output", "-o", help="schema file to write (.json, .yaml or .yml)"),
    dp: bool = typer.Option(False, "--dp", help='no bounds or category lists: numeric columns get "bounds": "dp", '
                            'categorical ones "values": "dp" (found by DP steps at fit time; the types still '
                            'come from the data)'),
) -> None:
    """Write a starting schema read off INPUT. Its bounds and categories come from the PRIVATE data:
    replace them with public knowledge before any release."""
    try:
        if not str(output).lower().endswith((".json", ".yaml", ".yml")):
            raise UsageProblem(f"{output}: the schema must end in .json, .yaml or .yml")
        check_outputs({"--output": output}, {"INPUT": input})
        spec, notes = draft_schema(read_table(input), dp=dp)
        if str(output).lower().endswith((".yaml", ".yml")):
            try:
                import yaml
            except ImportError:
                raise UsageProblem("writing a YAML schema needs pyyaml (pip install pyyaml), "
                                   "or write --output schema.json") from None

            write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), output)
        else:
            write_json(spec, output)
    except (UsageProblem, DataError, ValueError, OSError, ImportError) as e:
        fail(one_line(e))
    err.print(f"wrote a draft schema for {len(spec['columns'])} column(s) to {output}", highlight=False)
    for note in notes:
        err.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    err.print(f"[bold yellow]WARNING:[/] {DP_DRAFT_WARNING if dp else DRAFT_WARNING}", highlight=False,
              soft_wrap=True)



def register(app) -> None:
    app.add_typer(schema_app, name="schema")
