"""Where the benchmark scripts find their data.

adult, adult-public-split and titanic are bundled with privmarg (``privmarg.datasets``). fire and
salary are not (larger, and only the benchmarks use them): they are read from ``../shared/data/NAME``
beside the repository, a folder with ``domain.json``, ``private.csv.gz`` and ``public.csv``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def folder(name: str) -> Path:
    """The folder of dataset ``name``: the bundled copy if there is one, else ``../shared/data/NAME``;
    exits with a message saying what is missing when neither exists."""
    from privmarg import datasets

    if name in datasets.names():
        return datasets.path(name)
    path = SHARED / name
    if not (path / "domain.json").is_file():
        raise SystemExit(f"{path}: not found. The {name!r} dataset is not bundled with privmarg (bundled: "
                         f"{', '.join(datasets.names())}); put its folder (domain.json, private.csv.gz, "
                         "public.csv) there to run this benchmark.")
    return path


def seed_sweep_args(methods: list[str], out: Path, **extra: dict) -> argparse.Namespace:
    """The flags the seed-sweep scripts share (``--seeds``, ``--methods``, ``--epsilon``, ``--out``,
    ``--summary``) plus ``extra`` (flag -> add_argument keywords); ``args.out`` is a Path."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=methods)
    ap.add_argument("--epsilon", type=float, default=1.0)
    for flag, kw in extra.items():
        ap.add_argument(flag, **kw)
    ap.add_argument("--out", default=str(out))
    ap.add_argument("--summary", action="store_true", help="only print the table of what is recorded")
    args = ap.parse_args()
    args.out = Path(args.out)
    return args


def sweep_train(name: str):
    """``(train, domain)``: dataset ``name`` (see :func:`folder`) split as the sweeps split it (80/20,
    seed 0; ``privmarg.benchmark.runner.split_dataset``), rows outside the domain dropped."""
    from privmarg import Dataset, Domain
    from privmarg.benchmark.runner import split_dataset
    from privmarg.data.dataset import read_table

    path = folder(name)
    dom = Domain.from_json(path / "domain.json")
    data = Dataset.from_frame(read_table(path / "private.csv.gz"), dom, drop_unknown=True)
    train, _ = split_dataset(data, 0.2, 0)
    return train, dom
