"""Issue #16: malformed input through ``synth``, ``evaluate``, ``schema draft`` and ``bench``.

Every case must end with exit code 2 and exactly one ``error:`` line on stderr (no traceback), leave
the folder exactly as it was (no output, report or temporary file, inputs byte-identical) and, where
the run could spend budget, fail before the accountant is charged. The only exception is a noisy
row count too large to sample: it is known only after measuring, so budget is spent, but still
nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privmarg.cli import app
from privmarg.privacy import Accountant

runner = CliRunner()

SCHEMA = {"columns": {"age": {"type": "integer", "min": 0, "max": 99, "bins": 4},
                      "sex": {"type": "categorical", "values": ["F", "M"]}}}
BENCH = {"output": "benchout", "workers": 1, "delta": 1e-5, "epsilons": [1.0], "seeds": [0],
         "baseline": False, "metrics": ["tv_2way"], "datasets": {"toy": {"data": "data.csv", "domain": "domain.json"}},
         "methods": {"mst": {}}}


def _json(path, obj):
    path.write_text(json.dumps(obj))


def _make_readonly(path) -> bool:
    """Make a folder unwritable, also for root (immutable flag); False if this system cannot."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        return True
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0 \
        and not os.access(path, os.W_OK)


def _undo_readonly(path) -> None:
    if os.geteuid() == 0 and shutil.which("chattr"):
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    path.chmod(0o755)


@pytest.fixture
def ws(tmp_path):
    """A folder of tiny inputs, good and bad; yields (folder, whether ro/ is really read-only)."""
    d = tmp_path
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 3, 120), "b": rng.integers(0, 4, 120), "c": rng.integers(0, 2, 120)})
    df.to_csv(d / "data.csv", index=False)
    df.to_csv(d / "data.csv.gz", index=False)
    df.to_csv(d / "public.csv", index=False)
    df.to_csv(d / "syn.csv", index=False)
    _json(d / "domain.json", {"a": 3, "b": 4, "c": 2})
    os.symlink(d / "data.csv", d / "link.csv")
    os.link(d / "data.csv", d / "hard.csv")
    # domains too large for memory (the data's codes fit them)
    _json(d / "dom3big.json", {"a": 1000, "b": 1000, "c": 1000})
    _json(d / "dom1big.json", {"a": 3, "b": 4, "c": 2**28})
    _json(d / "dom2big.json", {"a": 3, "b": 20000, "c": 20000})
    _json(d / "dom_zero.json", {"a": 0, "b": 4, "c": 2})
    _json(d / "dom_list.json", ["a", "b", "c"])
    (d / "dom_bad.json").write_text("{a: 3")
    # workloads
    _json(d / "wl_ok.json", [["a", "b"]])
    _json(d / "wl_bc.json", [["b", "c"]])
    _json(d / "wl_str.json", ["ab"])
    _json(d / "wl_dict.json", {"a": 1})
    (d / "wl_nan.json").write_text('[{"attrs": ["a", "b"], "weight": NaN}]')
    (d / "wl_inf.json").write_text('[[["a", "b"], Infinity]]')
    _json(d / "wl_neg.json", [[["a", "b"], -1]])
    _json(d / "wl_zero.json", [{"attrs": ["a"], "weight": 0}])
    _json(d / "wl_bool.json", [[["a"], True]])
    _json(d / "wl_wstr.json", [{"attrs": ["a"], "weight": "2"}])
    _json(d / "wl_empty.json", [])
    _json(d / "wl_emptyclique.json", [[]])
    _json(d / "wl_rep.json", [["a", "a"]])
    _json(d / "wl_unknown.json", [["a", "zz"]])
    _json(d / "wl_key.json", [{"attrs": ["a"], "w": 2}])
    (d / "wl_garbage.json").write_text("[[a, b]")
    _json(d / "wl_topstr.json", "ab")
    _json(d / "wl_num.json", 5)
    _json(d / "wl_attrstr.json", [{"attrs": "ab"}])
    # tables
    (d / "dup.csv").write_text("a,b,a\n" + "".join(f"{i % 3},{i % 4},{i % 3}\n" for i in range(30)))
    (d / "dup3.csv").write_text("a,b,c,c\n" + "".join(f"{i % 3},{i % 4},{i % 2},0\n" for i in range(30)))
    for name, value in [("inf", "inf"), ("ninf", "-inf"), ("huge", "1e30"), ("frac", "1.5"), ("text", "x"),
                        ("neg", "-1"), ("nan", "")]:
        bad = df.astype(str)
        bad.loc[7, "a"] = value
        bad.to_csv(d / f"{name}.csv", index=False)
    df.iloc[:0].to_csv(d / "header_only.csv", index=False)
    (d / "blank.csv").write_text("")
    df.drop(columns=["b"]).to_csv(d / "missing_col.csv", index=False)
    df.assign(z=1).to_csv(d / "extra_col.csv", index=False)
    (d / "indir.csv").mkdir()
    # structural zeros
    _json(d / "zeros_ok.json", [{"attrs": ["a", "b"], "cells": [[0, 0]]}])
    _json(d / "z_none_allowed.json", [{"attrs": ["c"], "allowed": []}])
    _json(d / "z_all_cells.json", [{"attrs": ["a"], "cells": [[0], [1], [2]]}])
    _json(d / "z_joint.json", [{"attrs": ["a"], "allowed": [[0]]},
                               {"attrs": ["b", "a"], "cells": [[0, 0], [1, 0], [2, 0], [3, 0]]}])
    _json(d / "z_unknown.json", [{"attrs": ["zz"], "cells": [[0]]}])
    _json(d / "z_outside.json", [{"attrs": ["a"], "cells": [[7]]}])
    _json(d / "z_shape.json", {"attrs": ["a"], "cells": [[0]]})
    _json(d / "z_entry.json", ["a"])
    # raw table + schema
    _json(d / "schema.json", SCHEMA)
    pd.DataFrame({"age": rng.integers(0, 99, 60), "sex": rng.choice(["F", "M"], 60)}).to_csv(d / "raw.csv", index=False)
    os.symlink(d / "raw.csv", d / "rawlink.json")
    # a run report for evaluate, a bench config
    _json(d / "rep.json", {"method": "mst", "rows": 120, "privacy": {"epsilon": 1.0}})
    _json(d / "rep_list.json", [{"method": "mst"}])
    _json(d / "rep_nomethod.json", {"rows": 120})
    _json(d / "rep_badbound.json", {"method": "aim", "privacy": {}, "error_bounds": [{"attrs": "a"}]})
    _json(d / "rep_unknownbound.json", {"method": "aim", "privacy": {},
                                        "error_bounds": [{"attrs": ["zz"], "l1_bound": 0.5, "supported": True}]})
    (d / "dom_dup.json").write_text('{"a": 3, "b": 4, "c": 2, "a": 5}')
    _json(d / "rep_badrisk.json", {"method": "mst", "privacy": {"risk": {"membership_tpr_at_fpr": {"0.01": 2.0},
                                                                        "attribute_success_from_baseline": {},
                                                                        "max_membership_advantage": 0.1}}})
    import gzip

    packed = gzip.compress(df.to_csv(index=False).encode() * 50)
    (d / "trunc.csv.gz").write_bytes(packed[: len(packed) // 2])
    (d / "latin1.csv").write_bytes(b"a,b,c\n\xff\xfe,1,0\n")
    import yaml

    (d / "bench.yaml").write_text(yaml.safe_dump(BENCH))
    (d / "bench_typo.yaml").write_text(yaml.safe_dump({**BENCH, "methods": {"mts": {}}}))
    (d / "bench_eps.yaml").write_text(yaml.safe_dump({**BENCH, "epsilons": [0]}))
    (d / "bench_syntax.yaml").write_text("methods: [mst\n")
    # outputs that cannot be written
    (d / "isdir.csv").mkdir()
    (d / "isdir.json").mkdir()
    (d / "ro").mkdir()
    (d / "ro" / "old.txt").write_text("old")
    readonly = _make_readonly(d / "ro")
    try:
        yield d, readonly
    finally:
        _undo_readonly(d / "ro")


S = "synth {d}/data.csv --domain {d}/domain.json --method independent"
A = "synth {d}/data.csv --domain {d}/domain.json --method aim"
O = "-o {d}/out.csv --report {d}/out.json"

# (id, command, words the error line must contain, flags): flags "spends" = fails after measuring
CASES = [
    # ---- outputs that are inputs, directories or unwritable (checked before any budget)
    ("out_is_input", S + " -o {d}/data.csv", "refusing to overwrite", ""),
    ("out_is_input_gz", "synth {d}/data.csv.gz --domain {d}/domain.json -o {d}/data.csv.gz", "refusing", ""),
    ("report_is_input", S + " -o {d}/out.csv --report {d}/data.csv", "refusing", ""),
    ("report_is_domain", S + " -o {d}/out.csv --report {d}/domain.json", "refusing", ""),
    ("out_is_public", "synth {d}/data.csv --domain {d}/domain.json --method jam --public {d}/public.csv "
                      "-o {d}/public.csv", "refusing", ""),
    ("report_is_workload", A + " --workload {d}/wl_ok.json -o {d}/out.csv --report {d}/wl_ok.json", "refusing", ""),
    ("report_is_zeros", S + " --zeros {d}/zeros_ok.json -o {d}/out.csv --report {d}/zeros_ok.json", "refusing", ""),
    ("out_via_symlink", S + " -o {d}/link.csv", "refusing", ""),
    ("out_via_hardlink", "synth {d}/hard.csv --domain {d}/domain.json -o {d}/data.csv", "refusing", ""),
    ("out_via_dotdot", S + " -o {d}/nowhere/../data.csv", "refusing", ""),
    ("report_is_output", S + " -o {d}/out.csv --report {d}/out.csv", "also --output", ""),
    ("report_is_schema", "synth {d}/raw.csv --schema {d}/schema.json -o {d}/out.csv --report {d}/schema.json",
     "refusing", ""),
    ("out_is_dir", S + " -o {d}/isdir.csv", "is a directory", ""),
    ("report_is_dir", S + " -o {d}/out.csv --report {d}/isdir.json", "is a directory", ""),
    ("out_parent_is_file", S + " -o {d}/data.csv/x.csv", "not a directory", ""),
    ("out_readonly", S + " -o {d}/ro/x.csv", "not writable", "ro"),
    ("report_readonly", S + " -o {d}/out.csv --report {d}/ro/r.json", "not writable", "ro"),
    ("out_readonly_nested", S + " -o {d}/ro/new/x.csv", "not writable", "ro"),
    ("out_suffix", S + " -o {d}/out.json", "must end in", ""),
    # ---- memory and size guards
    ("rows_huge", S + " --rows 1000000000000 " + O, "would need", ""),
    ("rows_astronomical", S + " --rows " + str(10**30) + " " + O, "would need", ""),
    ("rows_negative", S + " --rows -1 " + O, "--rows", ""),
    ("noisy_rows_huge", S + " --epsilon 1e-300 --seed 3 " + O, "noisy row count", "spends"),
    ("domain_3way", "synth {d}/data.csv --domain {d}/dom3big.json --method aim --workload all-3way " + O,
     "domain too large", ""),
    ("domain_1way", "synth {d}/data.csv --domain {d}/dom1big.json --method independent " + O, "domain too large", ""),
    ("domain_2way_mst", "synth {d}/data.csv --domain {d}/dom2big.json --method mst " + O, "domain too large", ""),
    ("workload_clique_big", "synth {d}/data.csv --domain {d}/dom2big.json --method aim --workload {d}/wl_bc.json "
     + O, "domain too large", ""),
    # ---- workloads: strict parsing, before any measurement
    ("wl_string_clique", A + " --workload {d}/wl_str.json " + O, "must be a list of attribute names", ""),
    ("wl_dict", A + " --workload {d}/wl_dict.json " + O, "must be a list of cliques", ""),
    ("wl_nan_weight", A + " --workload {d}/wl_nan.json " + O, "NaN", ""),
    ("wl_inf_weight", A + " --workload {d}/wl_inf.json " + O, "Infinity", ""),
    ("wl_negative_weight", A + " --workload {d}/wl_neg.json " + O, "finite positive", ""),
    ("wl_zero_weight", A + " --workload {d}/wl_zero.json " + O, "finite positive", ""),
    ("wl_bool_weight", A + " --workload {d}/wl_bool.json " + O, "finite positive", ""),
    ("wl_string_weight", A + " --workload {d}/wl_wstr.json " + O, "finite positive", ""),
    ("wl_empty", A + " --workload {d}/wl_empty.json " + O, "empty", ""),
    ("wl_empty_clique", A + " --workload {d}/wl_emptyclique.json " + O, "at least one attribute", ""),
    ("wl_repeated_attr", A + " --workload {d}/wl_rep.json " + O, "repeated", ""),
    ("wl_unknown_attr", A + " --workload {d}/wl_unknown.json " + O, "zz", ""),
    ("wl_unknown_key", A + " --workload {d}/wl_key.json " + O, "attrs", ""),
    ("wl_not_json", A + " --workload {d}/wl_garbage.json " + O, "not valid JSON", ""),
    ("wl_top_string", A + " --workload {d}/wl_topstr.json " + O, "list of cliques", ""),
    ("wl_top_number", A + " --workload {d}/wl_num.json " + O, "list of cliques", ""),
    ("wl_attrs_string", A + " --workload {d}/wl_attrstr.json " + O, "list of attribute names", ""),
    ("wl_no_file", A + " --workload {d}/nope.json " + O, "expected all-Kway", ""),
    ("wl_target_unknown", A + " --workload all-3way:target=zz " + O, "zz", ""),
    ("wl_mwem_string_clique", "synth {d}/data.csv --domain {d}/domain.json --method mwem --workload "
                              "{d}/wl_str.json " + O, "list of attribute names", ""),
    # ---- tables
    ("dup_columns_drop_unknown", "synth {d}/dup.csv --domain {d}/domain.json --drop-unknown " + O, "duplicate", ""),
    ("dup_columns", "synth {d}/dup3.csv --domain {d}/domain.json " + O, "duplicate", ""),
    ("inf_code", "synth {d}/inf.csv --domain {d}/domain.json " + O, "column 'a': 1 non-finite", ""),
    ("ninf_code", "synth {d}/ninf.csv --domain {d}/domain.json " + O, "column 'a': 1 non-finite", ""),
    ("huge_code", "synth {d}/huge.csv --domain {d}/domain.json " + O, "outside the domain", ""),
    ("fractional_code", "synth {d}/frac.csv --domain {d}/domain.json " + O, "integer codes", ""),
    ("text_code", "synth {d}/text.csv --domain {d}/domain.json " + O, "integer codes", ""),
    ("negative_code", "synth {d}/neg.csv --domain {d}/domain.json " + O, "outside the domain", ""),
    ("nan_code", "synth {d}/nan.csv --domain {d}/domain.json " + O, "missing value", ""),
    ("header_only", "synth {d}/header_only.csv --domain {d}/domain.json " + O, "empty", ""),
    ("blank_file", "synth {d}/blank.csv --domain {d}/domain.json " + O, "empty", ""),
    ("missing_column", "synth {d}/missing_col.csv --domain {d}/domain.json " + O, "missing", ""),
    ("extra_column", "synth {d}/extra_col.csv --domain {d}/domain.json " + O, "not in the domain", ""),
    ("public_inf", "synth {d}/data.csv --domain {d}/domain.json --method jam --public {d}/inf.csv " + O,
     "non-finite", ""),
    ("input_is_dir", "synth {d}/indir.csv --domain {d}/domain.json " + O, "directory", ""),
    ("input_truncated_gz", "synth {d}/trunc.csv.gz --domain {d}/domain.json " + O, "truncated", ""),
    ("input_not_utf8", "synth {d}/latin1.csv --domain {d}/domain.json " + O, "UTF-8", ""),
    ("input_missing", "synth {d}/nope.csv --domain {d}/domain.json " + O, "no such file", ""),
    # ---- domain files
    ("domain_size_zero", "synth {d}/data.csv --domain {d}/dom_zero.json " + O, "positive integer", ""),
    ("domain_not_object", "synth {d}/data.csv --domain {d}/dom_list.json " + O, "JSON object", ""),
    ("domain_bad_json", "synth {d}/data.csv --domain {d}/dom_bad.json " + O, "", ""),
    ("domain_missing", "synth {d}/data.csv --domain {d}/nope.json " + O, "nope.json", ""),
    ("domain_duplicate_key", "synth {d}/data.csv --domain {d}/dom_dup.json " + O, "appears twice", ""),
    # ---- structural zeros: checked before measuring
    ("zeros_none_allowed", S + " --zeros {d}/z_none_allowed.json " + O, "forbid every cell", ""),
    ("zeros_all_cells", S + " --zeros {d}/z_all_cells.json " + O, "forbid every cell", ""),
    ("zeros_joint", S + " --zeros {d}/z_joint.json " + O, "together forbid", ""),
    ("zeros_unknown_attr", S + " --zeros {d}/z_unknown.json " + O, "zz", ""),
    ("zeros_code_outside", S + " --zeros {d}/z_outside.json " + O, "outside the domain", ""),
    ("zeros_not_list", S + " --zeros {d}/z_shape.json " + O, "must be a list", ""),
    ("zeros_bad_entry", S + " --zeros {d}/z_entry.json " + O, "entry 1", ""),
    # with --schema, --zeros holds raw values (issue #15): zeros over the codes' columns are refused
    ("zeros_with_schema", "synth {d}/raw.csv --schema {d}/schema.json --zeros {d}/zeros_ok.json " + O,
     "structural zero #1", ""),
    # ---- parameters
    ("eps_zero", S + " --epsilon 0 " + O, "--epsilon", ""),
    ("eps_nan", S + " --epsilon nan " + O, "--epsilon", ""),
    ("eps_inf", S + " --epsilon inf " + O, "--epsilon", ""),
    ("delta_zero", S + " --delta 0 " + O, "--delta", ""),
    ("delta_one", S + " --delta 1 " + O, "--delta", ""),
    ("max_model_size_nan", A + " --max-model-size nan " + O, "max_model_size", ""),
    ("max_model_size_zero", A + " --max-model-size 0 " + O, "max_model_size", ""),
    ("method_unknown", "synth {d}/data.csv --domain {d}/domain.json --method gan " + O, "unknown method", ""),
    ("generator_unknown", S + " --generator gan " + O, "unknown generator", ""),
    ("neighbour_unknown", S + " --neighbour everyone " + O, "--neighbour", ""),
    ("domain_and_schema", S + " --schema {d}/schema.json " + O, "either", ""),
    ("neither_domain_nor_schema", "synth {d}/data.csv " + O, "either", ""),
    ("jam_without_public", "synth {d}/data.csv --domain {d}/domain.json --method jam " + O, "needs --public", ""),
    ("public_without_jam", S + " --public {d}/public.csv " + O, "not used", ""),
    # ---- evaluate
    ("eval_out_is_run_report", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json --run-report {d}/rep.json "
                               "-o {d}/rep.json", "refusing", ""),
    ("eval_json_beside_is_run_report", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json --run-report "
                                       "{d}/rep.json -o {d}/rep.html", "refusing", ""),
    ("eval_out_is_domain", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json -o {d}/domain.json",
     "refusing", ""),
    ("eval_readonly", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json -o {d}/ro/e.json",
     "not writable", "ro"),
    ("eval_out_is_dir", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json -o {d}/isdir.json",
     "is a directory", ""),
    ("eval_unknown_metric", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json --metrics tv_9way "
                            "-o {d}/e.json", "unknown metric", ""),
    ("eval_dup_columns", "evaluate {d}/data.csv {d}/dup3.csv --domain {d}/domain.json -o {d}/e.json",
     "duplicate", ""),
    ("eval_inf_code", "evaluate {d}/data.csv {d}/inf.csv --domain {d}/domain.json -o {d}/e.json", "non-finite", ""),
    ("eval_run_report_list", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json --run-report "
                             "{d}/rep_list.json -o {d}/e.json", "not a report of privmarg synth", ""),
    ("eval_run_report_no_method", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json --run-report "
                                  "{d}/rep_nomethod.json -o {d}/e.json", "not a report of privmarg synth", ""),
    ("eval_run_report_bad_bound", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json --run-report "
                                  "{d}/rep_badbound.json -o {d}/e.json", "malformed", ""),
    ("eval_run_report_unknown_column", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json --run-report "
                                       "{d}/rep_unknownbound.json -o {d}/e.json", "does not have", ""),
    ("eval_run_report_bad_risk", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json --run-report "
                                 "{d}/rep_badrisk.json -o {d}/e.json", "risk panel is malformed", ""),
    ("eval_task_bogus", "evaluate {d}/data.csv {d}/syn.csv --domain {d}/domain.json --task bogus -o {d}/e.json",
     "--task", ""),
    # ---- schema draft
    ("draft_out_is_input", "schema draft {d}/raw.csv -o {d}/rawlink.json", "refusing", ""),
    ("draft_readonly", "schema draft {d}/raw.csv -o {d}/ro/s.json", "not writable", "ro"),
    ("draft_out_is_dir", "schema draft {d}/raw.csv -o {d}/isdir.json", "is a directory", ""),
    ("draft_dup_columns", "schema draft {d}/dup.csv -o {d}/s.json", "duplicate", ""),
    # ---- bench
    ("bench_unknown_method", "bench {d}/bench_typo.yaml", "unknown method 'mts'", ""),
    ("bench_no_pyyaml", "bench {d}/bench.yaml", "privmarg[bench]", "no_yaml"),
    ("bench_yaml_syntax", "bench {d}/bench_syntax.yaml", "bench_syntax.yaml", ""),
    ("bench_eps_zero", "bench {d}/bench_eps.yaml", "epsilon", ""),
]


def _snapshot(root) -> dict:
    """Every file (content hash), folder and link under ``root``."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = "dir"
        for name in filenames:
            p = os.path.join(dirpath, name)
            key = os.path.relpath(p, root)
            if os.path.islink(p):
                out[key] = "link:" + os.readlink(p)
            else:
                with open(p, "rb") as fh:
                    out[key] = hashlib.sha256(fh.read()).hexdigest()
    return out


def test_battery_is_large_and_unique():
    assert len(CASES) >= 60
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("name,command,needle,flags", CASES, ids=[c[0] for c in CASES])
def test_bad_input(ws, monkeypatch, name, command, needle, flags):
    d, readonly = ws
    if "ro" in flags and not readonly:
        pytest.skip("cannot make a read-only folder here")
    if "no_yaml" in flags:
        monkeypatch.setitem(sys.modules, "yaml", None)  # `import yaml` raises ImportError
    charges = []
    original = Accountant.charge

    def spy(self, *a, **kw):
        charges.append(a)
        return original(self, *a, **kw)

    monkeypatch.setattr(Accountant, "charge", spy)
    before = _snapshot(d)
    r = runner.invoke(app, command.format(d=d).split())
    assert r.exit_code == 2, (name, r.output, r.exception)
    assert isinstance(r.exception, SystemExit), (name, r.exception)
    assert "Traceback" not in r.output
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and errors[0] == lines[-1], (name, r.stderr)
    assert needle.lower() in errors[0].lower(), (name, errors[0])
    if "spends" in flags:
        assert charges  # known only after measuring; still nothing written
    else:
        assert len(lines) == 1, (name, r.stderr)
        assert not charges, (name, "budget spent before the error")
    assert _snapshot(d) == before, name  # nothing written, inputs byte-identical


# --------------------------------------------------------------------------------------------------
# all or nothing when the failure comes late (after the budget is spent)
# --------------------------------------------------------------------------------------------------
def test_noisy_row_count_guard_with_small_memory(ws, monkeypatch):
    """A noisy N is known only after fitting: its memory is estimated before sampling."""
    d, _ = ws
    import privmarg.cli.common as common

    monkeypatch.setattr(common, "available_memory", lambda: 1000)
    r = runner.invoke(app, (S + " " + O).format(d=d).split())
    assert r.exit_code == 2 and "noisy row count" in r.stderr and "--rows" in r.stderr
    assert not (d / "out.csv").exists() and not (d / "out.json").exists()
    r = runner.invoke(app, (S + " --rows 5 " + O).format(d=d).split())  # 5 rows fit
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("fail_on", [1, 2])
def test_table_and_report_published_together(ws, monkeypatch, fail_on):
    """If the table's or the report's rename fails, neither is left behind and an existing table
    and report are restored byte for byte."""
    d, _ = ws
    (d / "out.csv").write_text("old table\n")
    (d / "out.json").write_text("old report\n")
    before = _snapshot(d)
    import privmarg.io as pio

    calls = []
    real_replace = os.replace

    def flaky(src, dst):
        if str(src).endswith(".tmp"):
            calls.append(dst)
            if len(calls) == fail_on:
                raise PermissionError(13, "Permission denied", str(dst))
        return real_replace(src, dst)

    monkeypatch.setattr(pio.os, "replace", flaky)
    r = runner.invoke(app, (S + " " + O).format(d=d).split())
    assert r.exit_code == 2 and "Permission denied" in r.stderr and "Traceback" not in r.output
    assert _snapshot(d) == before


def test_publish_creates_then_removes_new_folders(tmp_path, monkeypatch):
    from privmarg.io import publish, text_writer

    def boom(tmp):
        raise OSError("disk full")

    with pytest.raises(OSError):
        publish([(tmp_path / "new" / "deep" / "a.txt", text_writer("a")), (tmp_path / "b.txt", boom)])
    assert list(tmp_path.iterdir()) == []
    publish([(tmp_path / "new" / "a.txt", text_writer("a")), (tmp_path / "b.txt", text_writer("b"))])
    assert (tmp_path / "new" / "a.txt").read_text() == "a" and (tmp_path / "b.txt").read_text() == "b"


def test_tracebacks_never_show_locals():
    """An unexpected error's traceback must not print local variables (private values)."""
    from privmarg.cli import app as main_app

    assert main_app.pretty_exceptions_show_locals is False


def test_library_refuses_contradictory_zeros_before_measuring(monkeypatch):
    from privmarg import MST
    from privmarg.core import Domain, StructuralZero

    dom = Domain(["a", "b"], [2, 3])
    data = np.zeros((10, 2), dtype=int)
    charges = []
    monkeypatch.setattr(Accountant, "charge", lambda self, *a, **kw: charges.append(a))
    z = StructuralZero.from_allowed(dom, ["b"], [])
    with pytest.raises(ValueError, match="forbid every cell"):
        MST(1.0, 1e-6).fit(data, dom, zeros=[z])
    assert not charges


def test_real_process_one_line_exit_2(ws):
    """The same through a real process (real stderr, typer's exception hook installed)."""
    d, _ = ws
    before = _snapshot(d)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-c", "import sys; from privmarg.cli import app; sys.argv[0] = 'privmarg'; app()",
           "synth", f"{d}/data.csv", "--domain", f"{d}/domain.json", "--method", "aim",
           "--workload", f"{d}/wl_str.json", "-o", f"{d}/data.csv"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("error:"), p.stderr
    assert _snapshot(d) == before


def test_outputs_follow_the_umask(tmp_path):
    """Published files get 0666 & ~umask like any created file (temporary files start at 0600)."""
    import os
    import stat

    from privmarg.io import publish, text_writer

    old = os.umask(0o022)
    try:
        publish([(tmp_path / "a.txt", text_writer("x"))])
        assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644
        os.umask(0o077)
        publish([(tmp_path / "b.txt", text_writer("y"))])
        assert stat.S_IMODE((tmp_path / "b.txt").stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_api_refuses_fractional_codes_before_any_charge():
    """The API read 1.5 as 1 after charging the budget: a float code must be whole."""
    from privmarg import Dataset, Domain, Independent
    from privmarg.data import DataError

    dom = Domain(["a", "b"], [3, 4])
    x = np.array([[1.5, 2.0], [0.0, 1.0]] * 50)
    m = Independent(1.0, 1e-6, seed=0)
    with pytest.raises(DataError, match=r"column\(s\) \['a'\] hold 50 fractional"):
        m.fit(x, dom)
    assert not hasattr(m, "accountant_") or m.accountant_.rho_spent == 0
    assert Dataset(np.array([[1.0, 2.0], [0.0, 3.0]]), dom).codes.dtype == np.int64  # whole floats are codes
    with pytest.raises(DataError, match="outside the domain") as e:
        Dataset(np.array([[1, 9], [0, 3]]), dom)
    assert "9" not in str(e.value).replace("0..3", "")  # a count, not the private value


def _three_outputs(d, seed):
    return (S + f" -o {{d}}/out.csv --report {{d}}/out.json --save-model {{d}}/model --seed {seed}").format(d=d).split()


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two-step"])
@pytest.mark.parametrize("fail_on", [1, 2, 3])
def test_table_report_and_model_published_together(ws, monkeypatch, fail_on, exchange):
    """A run with --save-model --force over an earlier one: a failure at any move (the table's,
    the report's, the model folder's) leaves the earlier three byte for byte and nothing else;
    with and without the atomic folder exchange."""
    d, _ = ws
    assert runner.invoke(app, _three_outputs(d, 1)).exit_code == 0
    before = _snapshot(d)
    import privmarg.io as pio

    moves = []
    real_replace, real_exchange = os.replace, pio._exchange

    def count():
        moves.append(1)
        if len(moves) == fail_on:
            raise OSError(28, "No space left on device")

    def flaky_replace(src, dst):
        if str(src).endswith(".tmp"):
            count()
        return real_replace(src, dst)

    def flaky_exchange(a, b):
        if not exchange:
            return False
        if str(a).endswith(".tmp"):
            count()
        return real_exchange(a, b)

    monkeypatch.setattr(pio.os, "replace", flaky_replace)
    monkeypatch.setattr(pio, "_exchange", flaky_exchange)
    r = runner.invoke(app, _three_outputs(d, 2) + ["--force"])
    assert r.exit_code == 2 and "No space left" in r.stderr and "Traceback" not in r.output, r.output
    assert len(moves) == fail_on
    assert _snapshot(d) == before
    monkeypatch.undo()
    assert runner.invoke(app, _three_outputs(d, 2) + ["--force"]).exit_code == 0
    after = _snapshot(d)
    changed = {k for k in after if after[k] != before.get(k)}
    assert {"out.csv", "out.json", "model/model.json", "model/arrays.npz"} <= changed
    assert set(after) == set(before)  # no temporary or old folder left


def test_interrupt_at_the_model_move_publishes_nothing(ws, monkeypatch):
    d, _ = ws
    import privmarg.io as pio

    def interrupted(tmp, path):
        raise KeyboardInterrupt

    before = _snapshot(d)
    monkeypatch.setattr(pio, "_put_directory", interrupted)
    r = runner.invoke(app, _three_outputs(d, 1))
    assert r.exit_code == 130 and "interrupted: nothing written" in r.stderr
    assert _snapshot(d) == before


@pytest.mark.parametrize("outputs", ["-o {d}/m.csv --save-model {d}/m.csv",
                                     "-o {d}/model/out.csv --save-model {d}/model",
                                     "-o {d}/out.csv --report {d}/model/r.json --save-model {d}/model"])
def test_model_folder_must_not_hold_the_other_outputs(ws, outputs):
    d, _ = ws
    before = _snapshot(d)
    cmd = (S + " " + outputs).format(d=d).split()
    r = runner.invoke(app, cmd)
    assert r.exit_code == 2 and r.stderr.count("error:") == 1 and "--save-model" in r.stderr, r.output
    assert _snapshot(d) == before


def test_exchange_swaps_two_folders_in_one_step(tmp_path):
    from privmarg.io import _exchange

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_text("a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("b")
    if not _exchange(str(tmp_path / "a"), str(tmp_path / "b")):
        pytest.skip("no renameat2 exchange on this system")
    assert (tmp_path / "a" / "x").read_text() == "b" and (tmp_path / "b" / "x").read_text() == "a"


def test_a_seeded_release_is_warned_about(ws):
    d, _ = ws
    seeded = runner.invoke(app, (S + " -o {d}/out.csv --seed 3").format(d=d).split())
    assert seeded.exit_code == 0 and "warning: --seed makes the noise reproducible" in seeded.stderr
    plain = runner.invoke(app, (S + " -o {d}/out2.csv").format(d=d).split())
    assert plain.exit_code == 0 and "--seed" not in plain.stderr


@pytest.mark.parametrize("eps,delta,words", [("50", "1e-9", ["epsilon 50 protects individuals only weakly"]),
                                              ("1", "0.5", ["delta 0.5 is the chance"]),
                                              ("1", "1e-9", [])])
def test_a_weak_budget_is_warned_about_before_spending(ws, eps, delta, words):
    d, _ = ws
    r = runner.invoke(app, (S + f" --epsilon {eps} --delta {delta} -o {{d}}/out.csv").format(d=d).split())
    assert r.exit_code == 0
    warned = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warned) == len(words) and all(w in " ".join(warned) for w in words), r.stderr


def test_concurrent_publishes_to_one_model_folder_leave_one_whole_model(tmp_path):
    """Two runs saving to the same --save-model folder at once: whichever order their moves take,
    the folder ends up holding one run's files, never a mix, and no temporary is left behind; a run
    that loses the race fails with an error (nothing of it published)."""
    import threading
    from pathlib import Path

    from privmarg.io import DirectoryWriter, publish

    target = tmp_path / "model"

    def writer(tag):
        def write(folder):
            for name in ("model.json", "arrays.npz"):
                (Path(folder) / name).write_text(tag * 1000)
        return DirectoryWriter(write)

    for trial in range(20):
        barrier = threading.Barrier(2)
        errors = []

        def run(tag):
            barrier.wait()
            try:
                publish([(target, writer(tag))])
            except OSError as e:
                errors.append(e)
            except BaseException as e:  # anything else fails the test below
                errors.append(("unexpected", e))

        threads = [threading.Thread(target=run, args=(t,)) for t in (f"a{trial}", f"b{trial}")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        files = {p.name: p.read_text() for p in target.iterdir()}
        assert set(files) == {"model.json", "arrays.npz"}
        assert files["model.json"] == files["arrays.npz"] in (f"a{trial}" * 1000, f"b{trial}" * 1000)
        assert len(errors) <= 1 and not any(isinstance(e, tuple) for e in errors), errors
        assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
