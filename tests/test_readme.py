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


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_every_python_block_runs_in_order(tmp_path, monkeypatch):
    """The README's Python examples, executed top to bottom in one namespace, as a reader would
    paste them (in a scratch directory: some write files)."""
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__readme__"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"README.md python block {i + 1}", "exec"), ns)
        except Exception as e:  # name the block: a traceback into exec'd text is hard to place
            raise AssertionError(f"README python block {i + 1} failed: {e!r}\n{block}") from e
