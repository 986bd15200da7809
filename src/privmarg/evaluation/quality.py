"""sdmetrics' QualityReport beside privmarg's own metrics, for users who compare tools by it.

Optional: used when ``sdmetrics`` is installed (``pip install 'privmarg[sdv]'``). The real table
is read (an evaluation is for the curator, not for release): no privacy cost is charged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..schema import Schema

__all__ = ["normalised", "sdmetrics_available", "sdmetrics_metadata", "sdmetrics_quality"]

_SDTYPES = {"categorical": "categorical", "boolean": "boolean", "integer": "numerical", "float": "numerical",
            "datetime": "datetime"}


def sdmetrics_available() -> bool:
    try:
        import sdmetrics  # noqa: F401
    except ImportError:
        return False
    return True


def sdmetrics_metadata(schema: Schema | None, columns: list[str]) -> dict:
    """sdmetrics' single-table metadata: each column's sdtype from the schema (integer and float
    numerical), or every column categorical when there is no schema (integer codes)."""
    if schema is None:
        return {"columns": {c: {"sdtype": "categorical"} for c in columns}}
    return {"columns": {c.name: {"sdtype": _SDTYPES[c.type]} for c in schema if c.name in columns}}


def normalised(frame: pd.DataFrame, encoder: Any) -> pd.DataFrame:
    """``frame`` read the way the schema reads it (null markers, boolean labels such as yes/no, values
    outside the listed categories as the other label, bounds clipped), so both tables reach sdmetrics
    in one form: categories as the schema's labels, numbers as numbers (datetimes in their units),
    missing values as NaN/None."""
    prepared = encoder._prepare(frame)
    out = {}
    for col in encoder.schema:
        v = prepared[col.name]
        if col.numeric:
            out[col.name] = v.astype(float)
            continue
        labels = np.empty(len(encoder.codecs_[col.name].labels()), dtype=object)
        labels[:] = encoder.codecs_[col.name].labels()
        obj = np.full(len(v), None, dtype=object)
        ok = v >= 0
        obj[ok] = labels[v[ok]]
        out[col.name] = obj
    return pd.DataFrame(out)


def sdmetrics_quality(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema | None = None,
                      encoder: Any = None) -> dict[str, Any]:
    """sdmetrics' QualityReport of ``synthetic`` against ``real`` (raw tables through ``schema``,
    or integer codes without one; with the schema's ``encoder`` both tables are first read the way
    the schema reads them, :func:`normalised`): ``{"score": 0–1, "properties": {name: 0–1 or None},
    "version": ...}``;
    higher is better; None where sdmetrics has nothing to score (Column Pair Trends counts only
    pairs associated strongly in the real table). Columns outside the schema are left out."""
    import sdmetrics

    try:  # newer sdmetrics: one report for single and multi-table data ({name: table} in)
        from sdmetrics.reports import QualityReport
        unified = "single_table" not in QualityReport.__module__
    except ImportError:
        from sdmetrics.reports.single_table import QualityReport
        unified = False

    if encoder is not None:  # both tables as the schema reads them (datetimes as numbers of units)
        real, synthetic, schema = normalised(real, encoder), normalised(synthetic, encoder), encoder.schema
    cols = [c for c in (schema.names if schema is not None else real.columns) if c in real and c in synthetic]
    meta = sdmetrics_metadata(schema, cols)
    if encoder is not None:
        meta = {"columns": {c: {"sdtype": "numerical" if spec["sdtype"] == "datetime" else spec["sdtype"]}
                            for c, spec in meta["columns"].items()}}
    real, synthetic = real[cols].copy(), synthetic[cols].copy()
    for c, spec in meta["columns"].items():
        if spec["sdtype"] == "datetime":  # parsed the same way on both sides
            real[c], synthetic[c] = pd.to_datetime(real[c], errors="coerce"), pd.to_datetime(synthetic[c], errors="coerce")
    report = QualityReport()
    if unified:
        report.generate({"table": real}, {"table": synthetic}, {"tables": {"table": meta}}, verbose=False)
    else:
        report.generate(real, synthetic, meta, verbose=False)
    props = report.get_properties()
    # NaN: a property with nothing to score (Column Pair Trends when no real pair is associated
    # strongly enough for sdmetrics; inter-table trends of one table): None in the JSON
    return {"score": float(report.get_score()),
            "properties": {str(p): (float(s) if pd.notna(s) else None) for p, s in zip(props["Property"], props["Score"])
                           if str(p) != "Intertable Trends"},
            "version": getattr(sdmetrics, "__version__", "unknown")}
