"""The documentation site: a page per method, JSON Schemas that accept the shipped files and the
examples in the docs, and a strict mkdocs build (when mkdocs is installed, as `make test` does)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from privmarg import datasets, registry

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
jsonschema = pytest.importorskip("jsonschema")


def schema(name: str) -> dict:
    s = json.loads((DOCS / "schemas" / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(s)
    return s


def test_every_preset_has_a_method_page_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    for e in registry.entries("preset"):
        page = DOCS / "methods" / f"{e.name}.md"
        assert page.is_file(), f"no docs page for method {e.name}"
        assert f"methods/{e.name}.md" in nav
        assert "Privacy cost" in page.read_text() and "When to use it" in page.read_text()


def test_bundled_files_match_the_json_schemas():
    dom, tab = schema("domain"), schema("schema")
    checked = 0
    for name in datasets.names():
        folder = datasets.path(name)
        for f, s in (("domain.json", dom), ("schema.json", tab)):
            if (folder / f).is_file():
                jsonschema.validate(json.loads((folder / f).read_text()), s)
                checked += 1
    assert checked == len(datasets.names())


def test_the_formats_page_examples_match_their_schemas():
    text = (DOCS / "formats.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    names = ["domain", "workload", "zeros", "schema", "schema"]  # the last: a schema with rules
    assert len(blocks) == len(names)
    for block, name in zip(blocks, names):
        jsonschema.validate(json.loads(block), schema(name))


@pytest.mark.parametrize("bad,name", [
    ({"a": 0}, "domain"),                      # a column needs at least one value
    (["ab"], "workload"),                      # a clique is a list, not a string
    ({"a": 1}, "workload"),                    # not a list of cliques
    ([{"attrs": ["a"], "weight": 0}], "workload"),
    ([{"attrs": ["a"]}], "zeros"),             # neither cells nor allowed
    ({"columns": {"x": {"type": "float"}}}, "schema"),  # numeric without bounds
    ({"columns": {"x": {"type": "categorical", "values": ["a"], "bins": 3}}}, "schema"),
])
def test_the_json_schemas_reject_malformed_files(bad, name):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema(name))


def test_the_formats_page_examples_are_accepted_by_privmarg():
    from privmarg import Domain
    from privmarg.core import load_zeros, parse_workload
    from privmarg.schema import Schema

    text = (DOCS / "formats.md").read_text()
    dom_ex, work_ex, zero_ex, schema_ex, rules_ex = (json.loads(b) for b in re.findall(r"```json\n(.*?)```", text, re.S))
    Domain.from_dict(dom_ex)
    adult = datasets.load("adult").domain
    assert len(parse_workload(work_ex, Domain.from_dict({**dom_ex, "income>50K": 2}))) == 2
    assert len(load_zeros(zero_ex, adult)) == 2
    assert len(Schema.from_dict(schema_ex).columns) == 7
    assert len(Schema.from_dict(rules_ex).rules) == 4


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
                    reason="mkdocs not installed (pip install -e '.[docs]')")
def test_mkdocs_builds_without_warnings(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    r = subprocess.run([mkdocs, "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "site" / "methods" / "aim" / "index.html").is_file()
    raw = re.compile(r":(class|meth|func|mod|attr|data|exc|obj):<code>")
    pages = list((tmp_path / "site").rglob("*.html"))
    assert pages and not [p for p in pages if raw.search(p.read_text(encoding="utf-8"))]  # roles became links
    linked = (tmp_path / "site" / "api" / "data" / "index.html").read_text(encoding="utf-8")
    assert 'class="autorefs autorefs-internal"' in linked


def test_the_api_reference_covers_the_public_api_and_the_cli():
    """Every name in privmarg.__all__ has an entry on an API page (the presets through
    privmarg.presets, those made from registry entries through their selectors), and every CLI
    command is on the command-line page."""
    import privmarg
    from privmarg import registry
    from privmarg.cli import app

    api = "\n".join(p.read_text() for p in (ROOT / "docs" / "api").glob("*.md"))
    directives = set(re.findall(r"^::: (\S+)", api, re.M))
    presets = {registry.preset_class(n).__name__: registry.entry("preset", n) for n in registry.names("preset")}
    missing = []
    for name in privmarg.__all__:
        if name in presets:
            e = presets[name]
            sel = registry.make_selector(e.selector) if e.selector else None
            ok = "privmarg.presets" in directives if sel is None else \
                f"{type(sel).__module__}.{type(sel).__name__}" in directives
        else:
            obj = getattr(privmarg, name)
            ok = f"privmarg.{name}" in directives or any(
                d.endswith("." + name) or d == getattr(obj, "__name__", None) for d in directives)
        if not ok:
            missing.append(name)
    assert missing == []
    cli = (ROOT / "docs" / "cli.md").read_text()
    commands = [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups]
    assert [c for c in commands if f"privmarg {c}" not in cli] == []


def _fenced(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block, fences paired in order."""
    out, lang, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                out.append((lang, "\n".join(body) + "\n"))
                lang = None
        elif lang is not None:
            body.append(line)
    return out


def _commands(text: str) -> list[list[str]]:
    """The ``privmarg ...`` lines of a page's plain code blocks (continuation lines joined)."""
    import shlex

    out = []
    for lang, block in _fenced(text):
        if lang:
            continue
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("privmarg "):
                out.append(shlex.split(line)[1:])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("page", ["tutorial.md", "getting-started.md"])
def test_the_walkthrough_pages_run_as_written(page, tmp_path, monkeypatch):
    """Every Python block (in one namespace, in order) and every privmarg command of the page, in
    a scratch folder, as a reader would paste them."""
    text = (ROOT / "docs" / page).read_text()
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__docs__"}
    for i, block in enumerate(b for lang, b in _fenced(text) if lang == "python"):
        exec(compile(block, f"{page} python block {i + 1}", "exec"), ns)
    commands = _commands(text)
    assert len(commands) >= (6 if page == "tutorial.md" else 3)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for argv in commands:
        r = subprocess.run([sys.executable, "-m", "privmarg", *argv], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, (argv, r.stderr[-2000:])
    if page == "tutorial.md":
        import pandas as pd

        married = pd.read_csv(tmp_path / "pums" / "married.csv")
        assert len(married) == 1000 and (married["married"] == 1).all()
        assert "What the privacy guarantee means" in (tmp_path / "pums" / "evaluation.html").read_text()
