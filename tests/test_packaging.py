"""The package as a user installs it: a wheel and an sdist built from the tree, the wheel installed
on its own (no source tree on the path), with its data, its type marker, its licence, the CLI and a fit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(wheel, sdist) built from a copy of the tree (the build writes into its source folder)."""
    work = tmp_path_factory.mktemp("pkg")
    src = work / "tree"
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    dist = work / "dist"
    for hook in ("build_wheel", "build_sdist"):  # one process each: setuptools keeps state between them
        code = f"import sys; from setuptools import build_meta as b; b.{hook}(sys.argv[1])"
        subprocess.run([sys.executable, "-c", code, str(dist)], cwd=src, check=True, capture_output=True)
    (wheel,) = dist.glob("privmarg-*.whl")
    (sdist,) = dist.glob("privmarg-*.tar.gz")
    return wheel, sdist, work


@pytest.mark.slow
def test_wheel_and_sdist_hold_the_data_licence_and_type_marker(built):
    wheel, sdist, _ = built
    names = zipfile.ZipFile(wheel).namelist()
    assert "privmarg/py.typed" in names
    assert any(n.startswith("privmarg/datasets/adult/") and n.endswith(".csv.gz") for n in names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any("tests/" in n for n in names)
    with tarfile.open(sdist) as tar:
        members = tar.getnames()
    assert any(m.endswith("/LICENSE") for m in members) and any(m.endswith("/privmarg/py.typed") for m in members)


@pytest.mark.slow
def test_installed_wheel_runs_the_cli_and_a_fit_without_the_source_tree(built):
    wheel, _, work = built
    site = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target",
                    str(site), str(wheel)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)  # the dependencies come from this interpreter, privmarg only from the wheel
    code = ("import privmarg, pathlib, sys; assert pathlib.Path(privmarg.__file__).is_relative_to(sys.argv[1]); "
            "df, dom = privmarg.datasets.load('adult'); m = privmarg.Independent(1.0, 1e-9, seed=0)"
            ".fit(privmarg.Dataset(df[list(dom.attrs)].to_numpy(), dom), dom); print(len(m.sample(50)))")
    r = subprocess.run([sys.executable, "-c", code, str(site)], cwd=work, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "50", r.stderr
    r = subprocess.run([sys.executable, "-m", "privmarg", "--version"], cwd=work, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip().endswith(__import__("privmarg").__version__), r.stderr
    script = site / "bin" / "privmarg"
    assert script.exists()
