"""The README's method table is the registry's (one list of names)."""

from __future__ import annotations

import re
from pathlib import Path

from privmarg import registry

README = Path(__file__).resolve().parents[1] / "README.md"


def methods_table() -> str:
    rows = ["| name | kind | what |", "|---|---|---|"]
    rows += [f"| `{e.name}` | {e.kind} | {e.summary} |" for e in registry.ENTRIES if e.kind in ("preset", "generator")]
    return "\n".join(rows)


def test_readme_lists_the_registry():
    text = README.read_text()
    m = re.search(r"<!-- methods:[^>]*-->\n(.*?)\n<!-- /methods -->", text, re.S)
    assert m, "README lost its methods table markers"
    assert m.group(1) == methods_table(), "README's method table is stale; replace it with:\n" + methods_table()


def test_every_preset_is_exported_under_its_class_name():
    import privmarg

    for e in registry.entries("preset"):
        assert getattr(privmarg, e.target.rsplit(":", 1)[-1]) is registry.preset_class(e.name)
