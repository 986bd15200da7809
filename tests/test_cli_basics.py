"""The command line's entry points and help: --version, -h, python -m privmarg, plain flag help."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

import privmarg
from privmarg.cli import app

runner = CliRunner()


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    r = runner.invoke(app, [flag])
    assert r.exit_code == 0 and r.output.strip() == f"privmarg {privmarg.__version__}"


@pytest.mark.parametrize("argv", [["-h"], ["synth", "-h"], ["schema", "draft", "-h"], ["datasets", "-h"],
                                  ["evaluate", "-h"], ["bench", "-h"]])
def test_short_help_everywhere(argv):
    r = runner.invoke(app, argv, prog_name="privmarg")
    assert r.exit_code == 0 and r.output.startswith("Usage: privmarg")


def test_flags_render_without_a_value():
    out = runner.invoke(app, ["synth", "--help"]).output
    line = next(ln for ln in out.splitlines() if "--drop-unknown" in ln)
    assert "<bool>" not in line and "--epsilon <float>" in out


def test_python_dash_m_runs_the_cli():
    r = subprocess.run([sys.executable, "-m", "privmarg", "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == f"privmarg {privmarg.__version__}"


def test_package_version_matches_pyproject():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert re.search(r'^version = "(.*)"', text, re.M).group(1) == privmarg.__version__


BLOCK_TORCH = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, Block())
from privmarg.cli import app
app(prog_name="privmarg")
"""


@pytest.mark.parametrize("method", [["--method", "privpgd"], ["--method", "mst", "--generator", "privpgd"]])
def test_a_method_without_its_extra_says_which_to_install(tmp_path, method):
    from privmarg import datasets

    datasets.write("titanic", tmp_path / "d")
    out = tmp_path / "o.csv"
    r = subprocess.run([sys.executable, "-c", BLOCK_TORCH, "synth", str(tmp_path / "d" / "private.csv"), "--domain",
                        str(tmp_path / "d" / "domain.json"), *method, "--epsilon", "1", "--output", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and not out.exists()
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs torch" in lines[0] and "pip install torch==2.13.0" in lines[0]


def test_the_cli_imports_without_the_unix_only_resource_module():
    code = ("import sys; sys.modules['resource'] = None\n"
            "from privmarg.cli.common import peak_memory_mb\n"
            "from privmarg.memory import peak_rss_mb\n"
            "print(peak_rss_mb(children=True))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "None"


def test_peak_memory_is_in_megabytes():
    from privmarg.memory import peak_rss_mb

    assert 10 < peak_rss_mb() < 100_000


def test_quiet_prints_errors_only_and_verbose_logs_the_steps(tmp_path):
    import logging

    from privmarg import datasets

    datasets.write("titanic", tmp_path / "d")
    base = ["synth", str(tmp_path / "d" / "private.csv"), "--domain", str(tmp_path / "d" / "domain.json"),
            "--method", "independent", "--epsilon", "1"]
    r = subprocess.run([sys.executable, "-m", "privmarg", "-q", *base, "-o", str(tmp_path / "q.csv")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stderr == "" and r.stdout == "" and (tmp_path / "q.csv").exists()
    r = subprocess.run([sys.executable, "-m", "privmarg", "-q", *base, "--method", "nope", "-o", str(tmp_path / "x.csv")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.startswith("error: unknown method 'nope'")
    r = subprocess.run([sys.executable, "-m", "privmarg", "-v", *base, "-o", str(tmp_path / "v.csv")],
                       capture_output=True, text=True, timeout=300, env={**__import__("os").environ, "COLUMNS": "200"})
    assert r.returncode == 0 and "INFO" in r.stderr and "rho" in r.stderr and "privacy spent" in r.stderr
    logging.getLogger("privmarg").setLevel(logging.WARNING)


def test_synth_noise_discrete_is_in_the_ledger(tmp_path):
    import json

    from privmarg import datasets

    datasets.write("titanic", tmp_path / "d")
    r = runner.invoke(app, ["synth", str(tmp_path / "d" / "private.csv"), "--domain", str(tmp_path / "d" / "domain.json"),
                            "--method", "independent", "--noise", "discrete", "--seed", "0",
                            "-o", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json")], prog_name="privmarg")
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "r.json").read_text())["privacy"]
    assert rep["noise"] == "discrete" and {e["mechanism"] for e in rep["ledger"]} == {"discrete_gaussian"}


def test_neighbour_help_names_every_replace_one_method():
    """The --neighbour help lists the presets whose own default is replace-one (it named PrivPGD
    only while JAM and RAP run replace-one too)."""
    from privmarg import registry

    replace_one = [registry.preset_class(n).__name__ for n in registry.names("preset")
                   if registry.make_preset(n, 1.0, 1e-9).neighbour == "replace_one"]
    text = " ".join(CliRunner().invoke(app, ["synth", "--help"], terminal_width=400).output.split())
    assert replace_one and all(name in text for name in replace_one), (replace_one, text)
