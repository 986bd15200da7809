import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # shared test helpers

import pytest  # noqa: E402


@pytest.fixture
def hide_module(monkeypatch):
    """``hide_module("duckdb")``: importing that package (or a submodule) raises ImportError."""
    import builtins

    real = builtins.__import__

    def hide(package: str) -> None:
        def fake(name, *a, **kw):
            if name == package or name.startswith(package + "."):
                raise ImportError(f"no {package}")
            return real(name, *a, **kw)

        monkeypatch.setattr(builtins, "__import__", fake)

    return hide
