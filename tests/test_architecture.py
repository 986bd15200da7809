"""The shape of the code, checked: imports go one way, and release code never reads rows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "privmarg"


def test_import_layers_contract():
    pytest.importorskip("importlinter")
    exe = Path(sys.executable).with_name("lint-imports")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "importlinter.cli"]
    res = subprocess.run(cmd, cwd=SRC.parents[1], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout


# release code: what selects, measures through a session, generates and preprocesses
RELEASE = ["select", "generate", "preprocess", "schema", "synth.py", "presets.py", "registry.py"]
# reading rows or counting a table directly; models and factors project freely (they are released);
# a saved model's array names ("….codes") are strings, not reads
ROWS = re.compile(r"\.codes\b(?![_\"'])|\b(data|dataset|private|table|source)\.project\(")


def test_release_code_reads_private_data_only_through_a_session():
    hits = []
    for part in RELEASE:
        for path in ([SRC / part] if part.endswith(".py") else sorted((SRC / part).rglob("*.py"))):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if ROWS.search(line.split("#")[0]):
                    hits.append(f"{path.relative_to(SRC)}:{n}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_the_pattern_catches_row_access():
    assert ROWS.search("x = data.codes[:, 0]") and ROWS.search("y = data.project(r)")
    assert not ROWS.search("model.project(r)") and not ROWS.search("self.codes_ = c")
    assert not ROWS.search('arrays[f"{key}.codes"] = records') and ROWS.search("x = table.codes")


def _relative_imports(package: Path) -> dict[str, set[str]]:
    """Each module of ``package`` → the sibling modules it imports (at any depth of its code,
    function-level imports included)."""
    import ast

    names = {p.stem for p in package.glob("*.py")}
    graph = {}
    for p in package.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        graph[p.stem] = {d for d in deps if d in names and d != p.stem}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(u, path):
        state[u] = 1
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                return path[path.index(v):] + [v]
            if v not in state and (found := visit(v, path + [v])):
                return found
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state and (found := visit(u, [u])):
            return found
    return None


PACKAGES = sorted(str(p.relative_to(SRC)) for p in [SRC, *SRC.rglob("*")]
                  if p.is_dir() and (p / "__init__.py").exists())


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_between_the_modules_of_a_package(package):
    """No module imports, at any depth of its code, a sibling that imports it back (the import-linter
    contract orders the packages; this orders the modules inside each). The privacy ledger replay
    lives in privacy.ledger for this reason, the schema's value keys in schema.values."""
    graph = _relative_imports(SRC / package)
    assert _cycle(graph) is None, _cycle(graph)


def test_the_cycle_check_can_fail():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_every_preset_is_in_the_public_api():
    import privmarg
    from privmarg import registry

    names = [registry.preset_class(n).__name__ for n in registry.names("preset")]
    assert [n for n in names if n not in privmarg.__all__] == []
    scope: dict = {}
    exec("from privmarg import *", scope)
    assert all(n in scope for n in names)


MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 100


def test_files_and_functions_stay_small():
    """No module of src/ over MAX_FILE_LINES lines; no function over MAX_FUNCTION_LINES (signature
    included)."""
    import ast

    big_files, long_funcs = [], set()
    for p in SRC.rglob("*.py"):
        text = p.read_text()
        if text.count("\n") > MAX_FILE_LINES:
            big_files.append(str(p.relative_to(SRC)))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                long_funcs.add((str(p.relative_to(SRC)), node.name))
    assert not big_files, big_files
    assert not long_funcs, long_funcs


def test_the_seam_protocols_say_what_each_source_can_do():
    """The sessions read sources only through declared protocols: marginals (every source), rows
    (RecordSource, for charged sums over records) and raw columns (ColumnSource, preprocessing)."""
    import numpy as np

    from privmarg import Dataset, Domain
    from privmarg.data import (ColumnCounts, ColumnSource, MappedSource, MarginalSource, MemorySource,
                               PrecomputedSource, RecordSource)

    dom = Domain(["a", "b"], [2, 3])
    mem = MemorySource(Dataset(np.array([[0, 1], [1, 2]]), dom))
    pre = PrecomputedSource(dom, {("a", "b"): np.ones(6)})
    cols = ColumnCounts({"a": np.array([0, 1, -1])}, 3)
    assert isinstance(mem, RecordSource) and isinstance(mem, MarginalSource)
    assert isinstance(pre, MarginalSource) and not isinstance(pre, RecordSource)
    assert isinstance(cols, ColumnSource) and not isinstance(cols, MarginalSource)
    assert not isinstance(mem, ColumnSource)
    mapped = MappedSource(mem, Domain(["a", "b"], [2, 2]), {"b": np.array([0, 1, 1])})
    assert isinstance(mapped, MarginalSource)
