"""Benchmark runner: config, a smoke sweep, resuming after a killed worker / killed sweep, summaries."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console
from typer.testing import CliRunner

from privmarg.benchmark import ConfigError, check_available, load_config, run_benchmark, split_dataset
from privmarg.benchmark.methods import METHODS
from privmarg.benchmark.results import append_record, load_results, repair
from privmarg.benchmark.summary import collect
from privmarg.cli import app
from privmarg.data import Dataset
from privmarg.core import Domain

HERE = Path(__file__).resolve().parent
QUIET = Console(stderr=True, quiet=True)


# -------------------------------------------------------------------------------------------
# fake methods (imported by the spawned workers as test_benchmark:NAME)
# -------------------------------------------------------------------------------------------
class Shuffle:
    """A fast stand-in mechanism: independent column shuffles of the training data."""

    def __init__(self, epsilon, delta, seed=None, sleep=0.0, crash_flag=None):
        self.seed, self.sleep, self.crash_flag = seed, sleep, crash_flag

    def fit(self, data):
        if self.crash_flag and os.path.exists(self.crash_flag):
            os.unlink(self.crash_flag)  # crash once: the next attempt succeeds
            os.kill(os.getpid(), signal.SIGKILL)  # what the OOM killer does
        time.sleep(self.sleep)
        rng = np.random.default_rng(self.seed)
        self.codes_ = np.column_stack([rng.permutation(c) for c in data.codes.T])
        return self

    def sample_codes(self, rows=None):
        return self.codes_


@pytest.fixture
def data_dir(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    a = rng.integers(0, 4, n)
    df = pd.DataFrame({"a": a, "b": (a + rng.integers(0, 2, n)) % 3, "c": rng.integers(0, 5, n),
                       "y": (a >= 2).astype(int)})
    df.to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "domain.json").write_text(json.dumps({"a": 4, "b": 3, "c": 5, "y": 2}))
    return tmp_path


def write_config(d: Path, methods: dict, **extra) -> Path:
    cfg = {
        "output": "out", "workers": 1, "delta": 1e-5, "epsilons": [1.0], "seeds": [0, 1],
        "metrics": ["tv_2way", "covariance_error"], "baseline": False,
        "datasets": {"toy": {"data": "data.csv", "domain": "domain.json", "target": "y"}},
        "methods": methods, **extra,
    }
    import yaml

    p = d / "bench.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def keys(path):
    return [r["key"] for r in load_results(path)]


# -------------------------------------------------------------------------------------------
# config, split, registry
# -------------------------------------------------------------------------------------------
def test_bench_names_missing_data_files_before_running(data_dir):
    (data_dir / "data.csv").unlink()  # e.g. fire or salary, which are not bundled
    r = CliRunner().invoke(app, ["bench", str(write_config(data_dir, {"independent": {}}))])
    text = r.output.strip()
    assert r.exit_code == 2 and len(text.splitlines()) == 1, text
    assert "datasets.toy: " in text and "data.csv" in text and "domain.json" not in text
    assert not (data_dir / "out").exists()


def test_config_cells_and_errors(data_dir):
    p = write_config(data_dir, {"independent": {"params": {"iters": 50}}, "mst": {}}, epsilons=[0.5, 1],
                     seeds=[0, 1, 2], baseline=True)
    cfg = load_config(p)
    cells = cfg.cells()
    assert len(cells) == 1 + 2 * 2 * 3 and cells[0].method.name == "real"
    assert len({c.key for c in cells}) == len(cells)
    assert cfg.output == data_dir / "out" and Path(cfg.datasets[0].data).is_absolute()
    # editing a method's params changes its cells' identity (no stale reuse)
    p2 = write_config(data_dir, {"independent": {"params": {"iters": 60}}, "mst": {}}, epsilons=[0.5, 1],
                      seeds=[0, 1, 2], baseline=True)
    k2 = {c.key for c in load_config(p2).cells()}
    assert {c.key for c in cells if c.method.name == "mst"} <= k2
    assert not {c.key for c in cells if c.method.name == "independent"} & k2
    for bad in [dict(epsilons=[0]), dict(colour="red"), dict(split={"test_fraction": 1.5})]:
        with pytest.raises(ConfigError):
            load_config(write_config(data_dir, {"mst": {}}, **bad))


def test_split_is_deterministic_and_disjoint():
    dom = Domain(["a"], [1000])
    data = Dataset(np.arange(1000).reshape(-1, 1), dom)
    tr, te = split_dataset(data, 0.2, seed=3)
    tr2, te2 = split_dataset(data, 0.2, seed=3)
    assert len(te) == 200 and len(tr) == 800
    assert np.array_equal(te.codes, te2.codes)
    assert not set(tr.codes.ravel()) & set(te.codes.ravel())


def test_registry_is_lazy_and_reports_missing_methods():
    assert METHODS["privpgd"] == "privmarg.presets:PrivPGD"
    ok, why = check_available("no_such_module_xyz:Mech")
    assert not ok and "no_such_module_xyz" in why
    assert check_available("mst") == (True, "")
    ok, why = check_available("smartnoise-aim")
    assert ok or "smartnoise" in why.lower() or "peers" in why.lower()


# -------------------------------------------------------------------------------------------
# smoke sweep with real mechanisms, summary, CLI
# -------------------------------------------------------------------------------------------
def test_smoke_sweep_and_rerun_skips(data_dir):
    p = write_config(data_dir, {"independent": {"params": {"iters": 50}},
                                "mst": {"params": {"iters": 50, "final_iters": 100}},
                                "missing": {"method": "no_such_module_xyz:Mech"}},
                     seeds=[0], baseline=True, reference="mst",
                     metrics=["tv_2way", "covariance_error", "counting_query_error", "ml_efficacy"],
                     ml_models=["gbdt"])
    cfg = load_config(p)
    out = run_benchmark(cfg, console=QUIET)
    assert out.finished == 3 and out.skipped and "no_such_module_xyz:Mech" in out.skipped
    recs = load_results(cfg.results_path)
    assert sorted(r["method"] for r in recs) == ["independent", "mst", "real"]
    for r in recs:
        assert r["timing"]["fit_seconds"] >= 0 and r["memory"]["peak_rss_mb"] > 0
        assert "tv_2way" in r["metrics"] and "downstream" in r["metrics"]["ml_efficacy"]
    real = next(r for r in recs if r["method"] == "real")
    assert real["metrics"]["tv_2way"] == 0 and real["epsilon"] is None
    mst = next(r for r in recs if r["method"] == "mst")
    assert mst["privacy"]["rho_spent"] <= mst["privacy"]["rho_total"] + 1e-12
    for f in ("summary.md", "summary.csv", "log2ratio_eps1.png"):
        assert (cfg.output / f).exists()
    table = pd.read_csv(cfg.output / "summary.csv")
    assert {"tv_2way_mean", "tv_2way_std", "downstream_mean"} <= set(table.columns)
    assert "| toy | mst | 1 |" in (cfg.output / "summary.md").read_text()
    before = cfg.results_path.read_bytes()
    again = run_benchmark(cfg, console=QUIET)  # nothing left to do
    assert again.finished == 0 and again.already_done == 3
    assert cfg.results_path.read_bytes() == before
    r = CliRunner().invoke(app, ["bench", str(p), "--dry-run"])
    assert r.exit_code == 0 and "3/4 finished" in r.output and "skip  toy/missing" in r.output
    # the summary follows the config's order (baseline first), not the order cells finished in
    lines = cfg.results_path.read_text().splitlines(keepends=True)
    cfg.results_path.write_text("".join(sorted(lines, key=lambda l: json.loads(l)["method"] != "mst")))
    assert list(collect(cfg)["method"]) == ["real", "independent", "mst"]


def _modules(**extra):
    return {"params": {"neighbour": "add_remove"},
            "selector_params": {"aim": {"workload": "all-2way", "loop": {"name": "pgm", "iters": 20}},
                                "mst": {"loop": {"name": "pgm", "iters": 20}}},
            "generator_params": {"pgm": {"iters": 30},
                                 "privpgd": {"n_particles": 300, "epochs": 2, "proj_iters": 10,
                                             "proj_num_projections": 10}},
            "sweeps": [{"selectors": ["mst", "aim"], "generators": ["pgm", "privpgd"]},
                       {"selectors": ["mst"], "generators": ["pgm", "nosuchgen"]}], **extra}


def test_module_pair_sweep_runs_every_valid_pair_and_skips_unknown_names(data_dir):
    """A ``modules:`` section expands to every selector x generator of each sweep (once each); a
    name this privmarg lacks is kept in the grid, noted, and skipped with the reason."""
    p = write_config(data_dir, {}, seeds=[0], modules=_modules(), metrics=["tv_2way"])
    cfg = load_config(p)
    names = [m.name for m in cfg.methods]
    assert names == ["mst/pgm", "mst/privpgd", "aim/pgm", "aim/privpgd", "mst/nosuchgen"]  # mst/pgm once
    assert any("nosuchgen" in n and "generator" in n for n in cfg.notes)
    assert check_available("pair:mst/pgm") == (True, "")
    ok, why = check_available("pair:mst/nosuchgen")
    assert not ok and "nosuchgen" in why and "registry" in why
    ok, why = check_available("pair:jam/pgm")  # needs public data, which bench does not pass
    assert not ok and "public" in why
    out = run_benchmark(cfg, console=QUIET)
    assert out.finished == 4 and set(out.skipped) == {"pair:mst/nosuchgen"}
    recs = {r["method"]: r for r in load_results(cfg.results_path)}
    assert set(recs) == {"mst/pgm", "mst/privpgd", "aim/pgm", "aim/privpgd"}
    for r in recs.values():
        assert r["privacy"]["neighbour"] == "add_remove"
        assert r["privacy"]["rho_spent"] == pytest.approx(r["privacy"]["rho_total"], rel=1e-9)
        assert r["rows"]["synthetic"] > 0 and "tv_2way" in r["metrics"]
    # the selector's and generator's own parameters reach them (and change the cells' identity)
    assert recs["aim/pgm"]["params"]["selector"]["workload"] == "all-2way"
    edited = _modules()
    edited["generator_params"]["pgm"] = {"iters": 31}
    other = load_config(write_config(data_dir, {}, seeds=[0], metrics=["tv_2way"], modules=edited))
    changed = {c.method.name for c in other.cells()} - {c.method.name for c in cfg.cells()}
    assert not changed
    old = {c.key for c in cfg.cells()}
    assert {c.method.name for c in other.cells() if c.key not in old} == {"mst/pgm", "aim/pgm"}


@pytest.mark.parametrize("bad", [
    {"sweeps": []},
    {"sweeps": [{"selectors": ["mst"]}]},
    {"sweeps": [{"selectors": [], "generators": ["pgm"]}]},
    {"sweeps": [{"selectors": ["mst"], "generators": ["pgm"]}], "selectors": ["aim"]},
    {"sweeps": [{"selectors": ["mst"], "generators": ["pgm"]}], "selector_params": {"aim": {}}},
    {"sweeps": [{"selectors": ["mst"], "generators": ["pgm"]}], "colour": 1},
    ["mst", "pgm"],
])
def test_bad_module_sections_are_refused(data_dir, bad):
    with pytest.raises(ConfigError, match="modules"):
        load_config(write_config(data_dir, {}, modules=bad))


def test_module_pairs_beside_methods_and_name_clash(data_dir):
    sweep = {"selectors": ["mst"], "generators": ["pgm"]}
    cfg = load_config(write_config(data_dir, {"independent": {}}, modules=sweep))
    assert [m.name for m in cfg.methods] == ["independent", "mst/pgm"] and cfg.notes == []
    with pytest.raises(ConfigError, match="clashes"):
        load_config(write_config(data_dir, {"x": {"method": "mst"}, "mst/pgm": {"method": "mst"}}, modules=sweep))
    with pytest.raises(ConfigError, match="methods"):
        load_config(write_config(data_dir, {}))


# -------------------------------------------------------------------------------------------
# killed workers and killed sweeps
# -------------------------------------------------------------------------------------------
def test_killed_worker_is_retried_without_redoing_finished_cells(data_dir):
    flag = data_dir / "crash.flag"
    flag.write_text("x")
    p = write_config(data_dir, {"shuffle": {"method": "test_benchmark:Shuffle"},
                                "crashy": {"method": "test_benchmark:Shuffle", "params": {"crash_flag": str(flag)}},
                                "after": {"method": "test_benchmark:Shuffle", "params": {"sleep": 0.01}}})
    cfg = load_config(p)
    out = run_benchmark(cfg, console=QUIET, summarize=False)
    assert not flag.exists()  # the crash happened
    assert out.pool_restarts == 1 and out.complete
    ks = keys(cfg.results_path)
    assert sorted(ks) == sorted(c.key for c in cfg.cells())  # nothing lost
    assert len(ks) == len(set(ks))  # nothing done twice


def test_sweep_resumes_after_giving_up_on_a_crashing_cell(data_dir):
    flag = data_dir / "crash.flag"
    flag.write_text("x")
    p = write_config(data_dir, {"shuffle": {"method": "test_benchmark:Shuffle"},
                                "crashy": {"method": "test_benchmark:Shuffle", "params": {"crash_flag": str(flag)}}},
                     max_crashes=1)
    cfg = load_config(p)
    out = run_benchmark(cfg, console=QUIET, summarize=False)
    assert not out.complete and len(out.given_up) == 1 and "crashy" in out.given_up[0]
    first = cfg.results_path.read_bytes()
    assert len(keys(cfg.results_path)) == 3  # both shuffle seeds and crashy's other seed survived
    assert json.loads(cfg.errors_path.read_text().splitlines()[-1])["status"] == "crashed"
    # rerun: only the given-up cell runs; earlier lines are untouched
    out2 = run_benchmark(cfg, console=QUIET, summarize=False)
    assert out2.complete and out2.finished == 1 and out2.already_done == 3
    assert cfg.results_path.read_bytes().startswith(first)
    ks = keys(cfg.results_path)
    assert sorted(ks) == sorted(c.key for c in cfg.cells()) and len(ks) == len(set(ks))


def test_killed_sweep_resumes(data_dir):
    p = write_config(data_dir, {"slow": {"method": "test_benchmark:Shuffle", "params": {"sleep": 0.3}}},
                     seeds=list(range(6)))
    cfg = load_config(p)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", "from privmarg.cli import app; app()", "bench", str(p)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and len(keys(cfg.results_path)) < 2:
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its workers, mid-run
        proc.wait()
    done_before = keys(cfg.results_path)
    assert 2 <= len(done_before) < 6
    prefix = cfg.results_path.read_bytes()
    with open(cfg.results_path, "ab") as fh:  # as if the parent died in the middle of a line
        fh.write(b'{"key": "toy/slow/eps=1/seed=5/parti')
    out = run_benchmark(cfg, console=QUIET, summarize=False)
    assert out.complete and out.finished == 6 - len(done_before)
    data = cfg.results_path.read_bytes()
    assert data.startswith(prefix) and data.endswith(b"\n")
    ks = keys(cfg.results_path)
    assert Counter(ks) == Counter(c.key for c in cfg.cells())


def test_results_file_repair_and_append(tmp_path):
    path = tmp_path / "r.jsonl"
    append_record(path, {"key": "a", "status": "ok", "x": float("nan")})
    append_record(path, {"key": "b", "status": "ok"})
    with open(path, "ab") as fh:
        fh.write(b'{"key": "c", "sta')
    assert [r["key"] for r in load_results(path)] == ["a", "b"]
    assert repair(path) > 0 and path.read_bytes().endswith(b"\n")
    append_record(path, {"key": "c", "status": "ok"})
    assert [r["key"] for r in load_results(path)] == ["a", "b", "c"]
    assert load_results(path)[0]["x"] == "nan"


def test_sweep_split_by_dataset_into_folders_merges_to_the_full_sweep(data_dir):
    import yaml

    p = write_config(data_dir, {"independent": {}}, baseline=True)
    raw = yaml.safe_load(p.read_text())
    raw["datasets"]["toy2"] = dict(raw["datasets"]["toy"])  # same table under a second name
    p.write_text(yaml.safe_dump(raw))
    cfg = load_config(p)
    every = {c.key for c in cfg.cells()}
    bad = CliRunner().invoke(app, ["bench", str(p), "--dataset", "nope"])
    assert bad.exit_code == 2 and "nope not in" in bad.output and "toy, toy2" in bad.output
    shard = data_dir / "shard2"
    r = CliRunner().invoke(app, ["bench", str(p), "--dataset", "toy2", "--output", str(shard)])
    assert r.exit_code == 0, r.output
    got = set(keys(shard / "results.jsonl"))
    assert got == {k for k in every if k.startswith("toy2/")} and len(got) == 3  # real + 2 seeds
    assert not (cfg.output / "results.jsonl").exists()  # the config's folder is untouched
    r = CliRunner().invoke(app, ["bench", str(p), "--dataset", "toy"])
    assert r.exit_code == 0, r.output
    with (cfg.output / "results.jsonl").open("a") as fh:  # merge the shard: keys do not name folders
        fh.write((shard / "results.jsonl").read_text())
    r = CliRunner().invoke(app, ["bench", str(p), "--dry-run"])
    assert r.exit_code == 0 and f"{len(every)}/{len(every)} finished" in r.output


def test_method_and_epsilon_narrow_a_run_with_the_same_keys(data_dir):
    p = write_config(data_dir, {"independent": {}, "mst": {}}, epsilons=[0.5, 1.0], seeds=[0])
    every = {c.key for c in load_config(p).cells()}
    for flag, bad in (("--method", "nope"), ("--epsilon", "3")):
        r = CliRunner().invoke(app, ["bench", str(p), flag, bad])
        assert r.exit_code == 2 and "not in" in r.output
    r = CliRunner().invoke(app, ["bench", str(p), "--method", "mst", "--epsilon", "1"])
    assert r.exit_code == 0, r.output
    got = set(keys(data_dir / "out" / "results.jsonl"))
    assert got == {k for k in every if k.startswith("toy/mst/eps=1/")} and len(got) == 1
    r = CliRunner().invoke(app, ["bench", str(p)])  # the rest; the narrowed cell is not rerun
    assert r.exit_code == 0, r.output
    assert sorted(keys(data_dir / "out" / "results.jsonl")) == sorted(every)


@pytest.mark.parametrize("fresh", [True, False])
def test_fresh_worker_per_cell(data_dir, fresh):
    """By default every cell runs in a new worker process (its peak RSS is its own); with
    ``fresh_worker: false`` one worker runs them all."""
    p = write_config(data_dir, {"independent": {}}, seeds=[0, 1, 2], fresh_worker=fresh)
    cfg = load_config(p)
    assert cfg.fresh_worker is fresh
    assert run_benchmark(cfg, console=QUIET).finished == 3
    pids = {r["pid"] for r in load_results(cfg.results_path)}
    assert len(pids) == (3 if fresh else 1)


def test_cell_timeout_stops_a_cell_and_later_runs_skip_it_until_raised(data_dir):
    p = write_config(data_dir, {"slow": {"method": "test_benchmark:Shuffle", "params": {"sleep": 3.0}}},
                     seeds=[0], cell_timeout=0.5)
    cfg = load_config(p)
    assert cfg.cell_timeout == 0.5
    out = run_benchmark(cfg, console=QUIET)
    assert out.finished == 0 and len(out.errors) == 1
    err = [r for r in load_results(cfg.errors_path)]
    assert err[0]["status"] == "timeout" and err[0]["cell_timeout"] == 0.5 and "0.5 s" in err[0]["error"]
    assert not cfg.results_path.exists() or not keys(cfg.results_path)
    again = run_benchmark(cfg, console=QUIET)  # same limit: not retried
    assert again.finished == 0 and again.timed_out == [err[0]["key"]] and not again.errors
    r = CliRunner().invoke(app, ["bench", str(p), "--dry-run"])
    assert "ran past cell_timeout 0.5 s before" in r.output
    cfg.cell_timeout = 10.0  # raised: retried, and now it finishes
    assert run_benchmark(cfg, console=QUIET).finished == 1
    with pytest.raises(ConfigError, match="cell_timeout"):
        load_config(write_config(data_dir, {"independent": {}}, cell_timeout=0))
