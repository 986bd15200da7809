"""Seed deep_full.yaml's results with the paper sweep's finished cells (issue 20), so that its
summary and figures show AIM, MST, PrivPGD, Independent and the real-data baseline beside the deep
methods without rerunning them.

paper_results/results.jsonl was run before the data moved to ../../shared/data (commit 19a5060);
a cell's key hashes its data path, so its keys differ from those that paper.yaml (and
deep_full.yaml, which copies its specs) gives today. Everything else in the keys is the same
(method, params, epsilon, seed, delta, split; checked here), so each record is given the key of
deep_full.yaml's cell with the same dataset, method, epsilon and seed. Records of cells that
deep_full.yaml does not have are left out; cells already in the output are kept.

    cd benchmarks && PYTHONPATH=../src python deep_full_import.py
"""

from __future__ import annotations

import json
from pathlib import Path

from privmarg.benchmark.config import load_config

HERE = Path(__file__).resolve().parent


def main() -> None:
    cfg = load_config(HERE / "deep_full.yaml")
    seeds = sorted(set(cfg.seeds) | {0, 1, 2})  # every seed the paper ran, whatever deep_full's list says now
    cfg.seeds = seeds
    cells = {(c.dataset.name, c.method.name, c.epsilon, c.seed): c for c in cfg.cells()}
    out = cfg.results_path
    out.parent.mkdir(parents=True, exist_ok=True)
    have = set()
    if out.exists():
        have = {json.loads(line)["key"] for line in out.read_text().splitlines() if line.strip()}
    added = 0
    with out.open("a") as f:
        for line in (HERE / "paper_results" / "results.jsonl").read_text().splitlines():
            r = json.loads(line)
            c = cells.get((r["dataset"], r["method"], r["epsilon"], r["seed"]))
            if c is None or r.get("status") != "ok":
                continue
            if r["params"] != c.method.params or r.get("delta") != (cfg.delta if c.epsilon is not None else None):
                raise SystemExit(f"{r['key']}: not the same spec as deep_full.yaml's cell")
            if c.key in have:
                continue
            r["key"], r["spec_hash"], r["imported_from"] = c.key, c.spec_hash, "paper_results/" + r["key"]
            f.write(json.dumps(r) + "\n")
            added += 1
    print(f"{added} records imported into {out}")


if __name__ == "__main__":
    main()
