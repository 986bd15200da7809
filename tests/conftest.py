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


@pytest.fixture
def one_torch_thread():
    """Tiny torch problems on a shared 2-core machine: one thread is ~10x faster than spinning pools."""
    try:
        import torch
    except ImportError:  # torch-free tests run unchanged
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
