"""Example tables bundled with privmarg, so that the demo, the tests and the README run from the
package alone::

    from privmarg import datasets
    df, domain = datasets.load("adult")                    # integer codes and their Domain
    public, _ = datasets.load("titanic", table="public")   # a dataset's other tables, by name
    raw, schema = datasets.load("hmeq")                    # raw values and a public Schema
    datasets.write("adult", "out/data")                    # adult.csv and domain.json on disk

Each dataset is a folder next to this module holding ``<table>.csv.gz`` (gzip-compressed CSV) and
either ``domain.json`` (``{"column": number_of_values}``, codes 0..size-1) or ``schema.json`` (a
public schema for a raw table). README.md in the same folder gives each one's source, licence and
columns; ``privmarg datasets`` lists them on the command line.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from ..core import Domain
from ..io import write_bytes
from ..schema import Schema


@dataclass(frozen=True)
class DatasetInfo:
    """What a bundled dataset holds; README.md next to this module documents each one."""

    name: str
    title: str
    kind: str                 # "integer-coded" (load gives a Domain) or "raw" (load gives a Schema)
    tables: tuple[str, ...]   # table names, the first being load()'s default (the private table)
    rows: tuple[int, ...]     # rows of each table, in the order of ``tables``
    columns: int
    source: str
    licence: str

    @property
    def spec_file(self) -> str:
        """``domain.json`` or ``schema.json``."""
        return "domain.json" if self.kind == "integer-coded" else "schema.json"


_PUBLIC_SPLITS = ("public-025", "public-050", "public-075", "public-100")

_DATASETS = {d.name: d for d in (
    DatasetInfo("adult", "UCI Adult census extract (numeric columns pre-binned)", "integer-coded",
                ("adult",), (48842,), 14,
                "UCI Machine Learning Repository (Adult); integer coding of the Private-PGM repository",
                "CC BY 4.0 (UCI); coding from Private-PGM (MIT)"),
    DatasetInfo("adult-public-split", "Adult: a private table and four public tables of growing shift "
                "(share of sex=0: 25%, 50%, 75%, 100%)", "integer-coded",
                ("private", *_PUBLIC_SPLITS), (32384, 3238, 3238, 3238, 3238), 15,
                "UCI Adult as split for JAM-PGM (Fuentes et al., AISTATS 2024): Private-PGM and JAM-PGM code",
                "CC BY 4.0 (UCI Adult); split files: MIT (Private-PGM), not stated (JAM-PGM code)"),
    DatasetInfo("titanic", "Titanic passengers, with a public split", "integer-coded",
                ("private", "public"), (1004, 300), 9,
                "JAM-PGM paper's code (Fuentes et al., AISTATS 2024)",
                "not stated (historical passenger list, widely redistributed)"),
    DatasetInfo("hmeq", "Home-equity loan applications, raw mixed types with missing values", "raw",
                ("hmeq",), (5960,), 13,
                "SAS sample data SAMPSIO.HMEQ (also Baesens, Roesch & Scheule, Credit Risk Analytics)",
                "not stated by the source"),
    DatasetInfo("pums", "US Census PUMS person sample, raw with missing values and an identifier", "raw",
                ("pums",), (1948,), 7,
                "OpenDP SmartNoise test data (PUMS_null.csv), a sample of Census PUMS",
                "PUMS: US Census Bureau public-use data (US government work)"),
)}


class Example(NamedTuple):
    """A bundled table and its public description; unpacks as ``df, domain = load(name)``."""

    data: pd.DataFrame
    domain: Domain | Schema   # Domain for integer-coded tables, Schema for raw ones


def names() -> list[str]:
    """The bundled datasets' names."""
    return list(_DATASETS)


def info(name: str) -> DatasetInfo:
    """Tables, row counts, kind, source and licence of dataset ``name`` (ValueError if unknown)."""
    try:
        return _DATASETS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown dataset {name!r}: choose one of {', '.join(_DATASETS)}") from None


def _folder(name: str):
    return resources.files(__name__).joinpath(info(name).name)


def path(name: str) -> Path:
    """The dataset's folder inside the installed package (read-only): ``<table>.csv.gz`` files and
    ``domain.json`` or ``schema.json``. ``privmarg synth`` and ``read_table`` read the ``.csv.gz``
    files as they are."""
    folder = _folder(name)
    if not isinstance(folder, Path):  # imported from a zip archive: no files on disk
        raise RuntimeError("privmarg is not installed as files on disk: use load() or write() instead")
    return folder


def load(name: str, table: str | None = None) -> Example:
    """Dataset ``name``'s table ``table`` (default: its first, private table) and its Domain (integer
    codes) or Schema (raw values)."""
    meta = info(name)
    table = meta.tables[0] if table is None else table
    if table not in meta.tables:
        raise ValueError(f"dataset {name!r} has no table {table!r}: choose one of {', '.join(meta.tables)}")
    folder = _folder(name)
    with folder.joinpath(f"{table}.csv.gz").open("rb") as fh:
        data = pd.read_csv(fh, compression="gzip")
    spec = json.loads(folder.joinpath(meta.spec_file).read_text(encoding="utf-8"))
    if meta.kind == "integer-coded":
        return Example(data, Domain.from_dict(spec))
    return Example(data, Schema.from_dict(spec, source=f"privmarg.datasets:{name}/{meta.spec_file}"))


def write(name: str, directory: str | Path, force: bool = False) -> list[Path]:
    """Write dataset ``name`` into ``directory``: one ``<table>.csv`` per table (the bundled bytes,
    uncompressed) and its ``domain.json`` or ``schema.json``. Returns the paths written.

    Refuses (FileExistsError, nothing written) when a target exists, unless ``force``. Each file is
    written atomically, and files this call created are removed again if a later one fails.
    """
    meta = info(name)
    folder, directory = _folder(name), Path(directory)
    blobs = {directory / f"{t}.csv": gzip.decompress(folder.joinpath(f"{t}.csv.gz").read_bytes())
             for t in meta.tables}
    blobs[directory / meta.spec_file] = folder.joinpath(meta.spec_file).read_bytes()
    existing = [p for p in blobs if p.exists()]
    if existing and not force:
        raise FileExistsError(f"{existing[0]} exists (overwrite with force=True, --force on the command line)")
    written: list[Path] = []
    try:
        for p, blob in blobs.items():
            write_bytes(blob, p)
            written.append(p)
    except BaseException:
        for p in written:
            if p not in existing:
                p.unlink(missing_ok=True)
        raise
    return written
