"""The command's allocator: freed blocks stay in the process (cli/allocator.py), and only the
command's own process sets it (never ``import privmarg``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# a 64 MB table freed, then the bytes glibc's heap holds free (mallinfo2, glibc >= 2.33)
PROBE = """
import numpy as np
from privmarg.memory import heap_free_bytes
{setup}
table = np.ones(8_000_000)
del table
print(heap_free_bytes() // 2**20)
"""


def _glibc() -> bool:
    import ctypes

    try:
        ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return False
    return sys.platform.startswith("linux")


def _free_mb(setup: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE.format(setup=setup)], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not _glibc(), reason="glibc's mallopt and mallinfo2 only")
def test_freed_table_stays_in_the_process():
    assert _free_mb("") < 32  # by default the freed 64 MB went back to the system
    assert _free_mb("from privmarg.cli.allocator import keep_freed_memory\nassert keep_freed_memory()") >= 60


@pytest.mark.skipif(not _glibc(), reason="glibc's mallopt and mallinfo2 only")
def test_the_command_sets_it_and_import_does_not():
    assert _free_mb("import privmarg, privmarg.cli") < 32
    # the script's entry (run) sets it before the app starts
    assert _free_mb("import privmarg.cli as cli\ncli.app = lambda **kw: None\ncli.run()") >= 60


@pytest.mark.skipif(not _glibc(), reason="glibc's mallopt and mallinfo2 only")
def test_memory_kept_for_reuse_counts_as_available():
    """Memory checks (a model's fit, a sample's rows) see what the process freed and keeps: with
    the allocator set, freeing 384 MB hands nothing back to the system, yet the memory available
    to the next allocation is as before."""
    probe = """
import numpy as np
from privmarg.cli.allocator import keep_freed_memory
from privmarg.memory import available_memory, heap_free_bytes
assert keep_freed_memory()
before = available_memory()
table = np.ones(48_000_000)
del table
print(heap_free_bytes() // 2**20, (available_memory() - before) // 2**20)
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    kept, change = map(int, out.stdout.split())
    assert kept >= 360  # the freed table stayed in the process
    assert change > -128  # and still counts as available (the system's own figure moves by tens of MB)


def test_script_entry_is_run():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["privmarg"] == "privmarg.cli:run"
    assert "run()" in (ROOT / "src" / "privmarg" / "__main__.py").read_text()


def test_off_linux_neither_is_set(monkeypatch):
    from privmarg.cli import allocator

    monkeypatch.setattr(allocator.sys, "platform", "darwin")
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    assert allocator.keep_freed_memory() is False
    assert allocator.skip_hugepage_advice() is False


HUGEPAGE_PROBE = """
{setup}
try:
    from numpy._core.multiarray import _get_madvise_hugepage
except ImportError:  # numpy < 1.26.2
    from numpy.core.multiarray import _get_madvise_hugepage
print(_get_madvise_hugepage())
"""


def _advises_hugepages(setup: str, env: dict | None = None) -> str:
    out = subprocess.run([sys.executable, "-c", HUGEPAGE_PROBE.format(setup=setup)], capture_output=True,
                         text=True, check=True, cwd=ROOT, env=env)
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="numpy advises huge pages on Linux only")
def test_the_command_stops_hugepage_advice_and_import_does_not():
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    run_app = "import privmarg.cli as cli\ncli.app = lambda **kw: None\ncli.run()"
    # numpy's own default (on on kernels since 4.6) is what import privmarg leaves
    assert _advises_hugepages("import privmarg, privmarg.cli", env) == _advises_hugepages("import numpy", env)
    assert _advises_hugepages(run_app, env) == "False"
    # a user's own setting stands
    assert _advises_hugepages(run_app, env | {"NUMPY_MADVISE_HUGEPAGE": "1"}) == "True"
