"""Integer-coded tables and marginal counting.

Reading a table and counting its marginals are the only places private data is touched outside the
privacy primitives; counts returned here are private and must only be released through a charged
mechanism (:mod:`privmarg.privacy`).
"""

from __future__ import annotations

import csv
import gzip
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.domain import Domain


class DataError(ValueError):
    """Bad input data: the message names the column and the problem."""


class Dataset:
    """A table of integer codes ``0 .. size-1`` over a :class:`Domain` (one column per attribute)."""

    def __init__(self, codes: np.ndarray, domain: Domain, *, validate: bool = True):
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != len(domain):
            raise DataError(f"expected a 2-d array with {len(domain)} columns, got shape {codes.shape}")
        if validate:
            _check_codes(codes, domain)
        self.codes = np.ascontiguousarray(codes, dtype=np.int64)
        self.domain = domain

    @classmethod
    def from_frame(cls, df: pd.DataFrame, domain: Domain, *, drop_unknown: bool = False) -> "Dataset":
        """Validate and encode a DataFrame of integer codes; columns may come in any order."""
        dups = sorted({str(c) for c in df.columns[df.columns.duplicated()]})
        if dups:
            raise DataError(f"duplicate column name(s) {dups}: every column must have its own name")
        missing = [a for a in domain.attrs if a not in df.columns]
        if missing:
            raise DataError(f"column(s) missing from the data: {missing}")
        extra = [c for c in df.columns if c not in domain]
        if extra and not drop_unknown:
            raise DataError(f"column(s) not in the domain: {extra} (drop them or add them to the domain)")
        if len(df) == 0:
            raise DataError("the table is empty")
        cols = []
        for a in domain.attrs:
            col = df[a]
            if col.isna().any():
                raise DataError(f"column {a!r}: {int(col.isna().sum())} missing value(s) (NaN)")
            values = col.to_numpy()
            if not np.issubdtype(values.dtype, np.integer):
                as_float = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)
                if np.isnan(as_float).any():
                    raise DataError(f"column {a!r}: values must be integer codes, got {col.dtype}")
                inf = ~np.isfinite(as_float)
                if inf.any():
                    raise DataError(f"column {a!r}: {int(inf.sum())} non-finite value(s): values must be integer codes")
                if not np.all(as_float == np.round(as_float)):
                    raise DataError(f"column {a!r}: values must be integer codes, got {col.dtype}")
                out = (as_float < 0) | (as_float >= domain[a])  # before the cast, which would wrap
                if out.any():
                    raise DataError(f"column {a!r}: {int(out.sum())} code(s) outside the domain "
                                    f"0..{domain[a] - 1}")
                values = as_float.astype(np.int64)
            cols.append(values.astype(np.int64, copy=False))
        return cls(np.column_stack(cols), domain)

    @classmethod
    def read(cls, path: str | Path, domain: Domain, **kw) -> "Dataset":
        """Read integer codes from CSV (optionally gzipped) or Parquet."""
        return cls.from_frame(read_table(path), domain, **kw)

    def take(self, rows: np.ndarray) -> "Dataset":
        """The records at positions ``rows`` (a split or subsample of the table)."""
        return Dataset(self.codes[rows], self.domain, validate=False)

    def neighbour(self, row: Any, relation: str) -> "Dataset":
        """A neighbouring table: this one plus ``row`` (``"add_remove"``) or with its first record
        replaced by ``row`` (``"replace_one"``); for privacy audits and tests."""
        row = np.asarray(row, dtype=self.codes.dtype).reshape(1, -1)
        if relation == "add_remove":
            return Dataset(np.vstack([self.codes, row]), self.domain)
        if relation == "replace_one":
            other = self.codes.copy()
            other[0] = row[0]
            return Dataset(other, self.domain)
        raise ValueError(f"unknown neighbouring relation {relation!r}: add_remove or replace_one")

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.codes, columns=list(self.domain.attrs))

    def __len__(self) -> int:
        return self.codes.shape[0]

    def project(self, attrs: Iterable[str]) -> np.ndarray:
        """Counts of the marginal on ``attrs``, flat, row-major in the order given, float64. Private."""
        attrs = tuple(attrs)
        if len(set(attrs)) != len(attrs):
            raise ValueError(f"repeated attribute in {attrs}")
        self.domain.canonical(attrs)  # unknown names are an error
        if not attrs:
            return np.array([float(len(self))])
        axes = self.domain.axes(attrs)
        sizes = self.domain.sizes(attrs)
        idx = np.ravel_multi_index(tuple(self.codes[:, i] for i in axes), sizes)
        return np.bincount(idx, minlength=int(np.prod(sizes))).astype(float)

    def marginals(self, cliques: Iterable[Iterable[str]]) -> list[np.ndarray]:
        """``[self.project(c) for c in cliques]``, a clique sharing all but its last attribute with
        the one before it reusing that prefix's cell codes (a selector's candidates come sorted, so
        they share one pass over the rows; benchmarks/RESULTS.md, wide tables). Private."""
        out: list[np.ndarray] = []
        prefix: tuple[str, ...] | None = None
        code = None
        for attrs in map(tuple, cliques):
            if len(attrs) < 2 or len(set(attrs)) != len(attrs):
                out.append(self.project(attrs))  # the one-pass case, and its error for a repeat
                continue
            self.domain.canonical(attrs)  # unknown names are an error
            if attrs[:-1] != prefix:
                prefix, axes = attrs[:-1], self.domain.axes(attrs[:-1])
                code = self.codes[:, axes[0]]
                for i, a in zip(axes[1:], prefix[1:]):
                    code = code * self.domain[a] + self.codes[:, i]
            last = attrs[-1]
            idx = code * self.domain[last] + self.codes[:, self.domain.axes((last,))[0]]
            counts = np.bincount(idx, minlength=self.domain.size(attrs))
            if counts.size != self.domain.size(attrs):  # a code past its attribute's size (unvalidated codes)
                raise ValueError(f"a code outside the domain in {attrs}")
            out.append(counts.astype(float))
        return out


#: column separators a CSV may use: a comma, or else the one that splits the header line into most
#: fields (a semicolon, as spreadsheets write CSV in many locales; a tab; a bar)
SEPARATORS = (",", ";", "\t", "|")


def _header(path: Path) -> tuple[str, list[str]]:
    """(separator, column names) of a CSV by its header line (quotes respected): a comma unless
    another of :data:`SEPARATORS` splits the line into more fields."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as fh:
        line = fh.readline().rstrip("\r\n")
    fields = {sep: next(csv.reader([line], delimiter=sep), []) for sep in SEPARATORS}
    best = max(SEPARATORS, key=lambda sep: len(fields[sep]))  # the first of equals: a comma on a tie
    sep = best if len(fields[best]) > len(fields[","]) else ","
    return sep, fields[sep]


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV (``.csv``, ``.csv.gz``; comma-separated, or separated by semicolons, tabs or bars
    where one of those splits the header line into more fields) or Parquet file into a DataFrame."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a table")
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError) as e:  # pyarrow's errors derive from these
            raise DataError(f"{path}: not a readable Parquet file ({' '.join(str(e).split())})") from None
    try:
        sep, names = _header(path)
        df = pd.read_csv(path, sep=sep)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the table is empty") from None
    except pd.errors.ParserError as e:
        raise DataError(f"{path}: not a valid CSV table: {e}") from None
    except (EOFError, OSError, zlib.error) as e:  # a truncated or damaged .gz
        raise DataError(f"{path}: cannot be read to its end ({' '.join(str(e).split())}): truncated or damaged?") from None
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not text in UTF-8 ({e.reason})") from None
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:  # pandas would rename the second one ("a.1"), which --drop-unknown would then drop
        raise DataError(f"{path}: duplicate column name(s) {dups}: every column must have its own name")
    return df


def _check_codes(codes: np.ndarray, domain: Domain) -> None:
    if codes.shape[0] == 0:
        raise DataError("the table is empty")
    if codes.dtype == bool:
        codes = codes.astype(np.int64)
    if not np.issubdtype(codes.dtype, np.integer):
        try:
            as_float = codes.astype(float)
        except (TypeError, ValueError):
            raise DataError("codes must be integers (got values that are not numbers)") from None
        if np.isnan(as_float).any():
            raise DataError("the table holds missing values (NaN)")
        if not np.isfinite(as_float).all():
            raise DataError("codes must be integers (got infinite values)")
        frac = as_float != np.round(as_float)
        if frac.any():  # 1.5 would be read as 1: refused, not truncated
            cols = sorted({domain.attrs[j] for j in np.nonzero(frac.any(axis=0))[0]})
            raise DataError(f"codes must be integers: column(s) {cols} hold {int(frac.sum())} fractional value(s)")
        codes = as_float
    lo = codes.min(axis=0)
    hi = codes.max(axis=0)
    for i, a in enumerate(domain.attrs):
        if lo[i] < 0 or hi[i] >= domain.shape[i]:  # the count, not the values: they are private
            n_bad = int(((codes[:, i] < 0) | (codes[:, i] >= domain.shape[i])).sum())
            raise DataError(f"column {a!r}: {n_bad} code(s) outside the domain 0..{domain.shape[i] - 1}")
