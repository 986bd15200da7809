"""Every JSON file privmarg reads refuses a key given twice (``json`` keeps the last silently)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privmarg import Dataset, Domain, Independent, Schema, load
from privmarg.cli import app
from privmarg.core import load_zeros, parse_workload, strict_json


def test_loads_refuses_a_repeated_key_at_any_depth():
    assert strict_json.loads('{"a": 1, "b": {"c": 2}}') == {"a": 1, "b": {"c": 2}}
    for text in ('{"a": 1, "a": 2}', '{"x": [{"c": 1, "c": 1}]}'):
        with pytest.raises(ValueError, match="appears twice"):
            strict_json.loads(text)


def test_domain_workload_zeros_and_schema_files_refuse_repeated_keys(tmp_path):
    dom = tmp_path / "domain.json"
    dom.write_text('{"a": 3, "b": 4, "a": 5}')
    with pytest.raises(ValueError, match="'a' appears twice"):
        Domain.from_json(dom)
    work = tmp_path / "work.json"
    work.write_text('{"workload": [["a", "b"]], "workload": [["a"]]}')
    with pytest.raises(ValueError, match="appears twice"):
        parse_workload(str(work), Domain(["a", "b"], [3, 4]))
    zeros = tmp_path / "zeros.json"
    zeros.write_text('[{"attrs": ["a", "b"], "cells": [[0, 1]], "attrs": ["a"]}]')
    with pytest.raises(ValueError, match="appears twice"):
        load_zeros(zeros, Domain(["a", "b"], [3, 4]))
    schema = tmp_path / "schema.json"
    schema.write_text('{"columns": {"a": {"type": "categorical", "values": ["x", "y"]}, '
                      '"a": {"type": "categorical", "values": ["z"]}}}')
    with pytest.raises(ValueError, match="appears twice"):
        Schema.load(schema)


def test_cli_and_saved_models_refuse_repeated_keys(tmp_path):
    rng = np.random.default_rng(0)
    pd.DataFrame({"a": rng.integers(0, 3, 200), "b": rng.integers(0, 4, 200)}).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "domain.json").write_text('{"a": 3, "b": 4, "b": 5}')
    r = CliRunner().invoke(app, ["synth", str(tmp_path / "d.csv"), "--domain", str(tmp_path / "domain.json"),
                                 "--method", "independent", "-o", str(tmp_path / "out.csv")])
    assert r.exit_code == 2 and r.output.count("error:") == 1 and "appears twice" in r.output, r.output
    assert not (tmp_path / "out.csv").exists()
    dom = Domain(["a", "b"], [3, 4])
    m = Independent(1.0, 1e-6, seed=0).fit(Dataset(rng.integers(0, 3, size=(200, 2)), dom), dom)
    m.save(tmp_path / "model")
    path = tmp_path / "model" / "model.json"
    text = path.read_text()
    info = json.loads(text)
    key = next(iter(info))
    path.write_text(text.replace("{", "{" + json.dumps(key) + ": " + json.dumps(info[key]) + ", ", 1))
    with pytest.raises(ValueError, match="appears twice"):
        load(tmp_path / "model")


def test_yaml_schemas_refuse_repeated_keys(tmp_path):
    pytest.importorskip("yaml")
    ok = tmp_path / "ok.yaml"
    ok.write_text("columns:\n  a: {type: categorical, values: [x, y]}\n  b: {type: categorical, values: [z]}\n")
    assert list(Schema.load(ok).names) == ["a", "b"]
    dup = tmp_path / "dup.yaml"
    dup.write_text("columns:\n  a: {type: categorical, values: [x, y]}\n  a: {type: categorical, values: [z]}\n")
    with pytest.raises(ValueError, match="appears twice"):
        Schema.load(dup)


def test_deep_nesting_is_a_value_error_everywhere_json_is_read(tmp_path):
    """A file of 100,000 nested brackets (200 KB) is refused as bad input, by the reader every
    privmarg file goes through, and so by the saved-model loader."""
    import privmarg
    from privmarg.core import strict_json

    deep = "[" * 100000 + "]" * 100000
    with pytest.raises(ValueError, match="nested too deeply"):
        strict_json.loads(deep)
    m = privmarg.MST(1.0, 1e-9, seed=0).fit(*privmarg.datasets.load("adult"))
    m.save(tmp_path / "m")
    (tmp_path / "m" / "model.json").write_text(deep)
    with pytest.raises(ValueError, match="corrupted"):
        privmarg.load(tmp_path / "m")
