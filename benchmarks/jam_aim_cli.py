"""JAM against AIM from the command line (issue #44): wall seconds of `privmarg synth` as a user runs it.

On the bundled adult-public-split (private table; JAM also reads public-050), ε = 0.1, δ = 1e-9,
seeds 0..runs-1, AIM and JAM alternating so that any drift in the machine's load hits both
(``--aim-public``: AIM is given the same public table, its public start). Each
command runs pinned to one core (``--core``); the whole command is timed (start-up, reading,
encoding, fit, sampling, writing). One JSON line per run in --out::

    .venv/bin/python benchmarks/jam_aim_cli.py --runs 5 --core 0
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "privmarg" / "datasets" / "adult-public-split"


def command(method: str, seed: int, out: Path, epsilon: float, aim_public: bool = False) -> list[str]:
    cli = [sys.executable, "-m", "privmarg", "synth", str(DATA / "private.csv.gz"), "--domain",
           str(DATA / "domain.json"), "--method", method, "--epsilon", str(epsilon), "--delta", "1e-9",
           "--seed", str(seed), "-o", str(out)]
    if method == "jam" or aim_public:
        cli[5:5] = ["--public", str(DATA / "public-050.csv.gz")]
    return cli


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--core", type=int, default=0)
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--aim-public", action="store_true", help="give AIM the public table too")
    ap.add_argument("--note", default="", help="how the machine was loaded (recorded with each run)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "jam_aim_cli.jsonl")
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    walls: dict[str, list[float]] = {"aim": [], "jam": []}
    with tempfile.TemporaryDirectory() as tmp, open(args.out, "a") as fh:
        for run in range(args.runs):
            for method in ("aim", "jam"):
                out = Path(tmp) / f"{method}{run}.csv"
                t0 = time.perf_counter()
                subprocess.run(["taskset", "-c", str(args.core)] + command(method, run, out, args.epsilon, args.aim_public),
                               env=env, check=True, capture_output=True)
                wall = time.perf_counter() - t0
                walls[method].append(wall)
                fh.write(json.dumps({"method": method, "run": run, "seed": run, "wall_seconds": wall,
                                     "epsilon": args.epsilon, "core": args.core, "note": args.note,
                                     "aim_public": args.aim_public,
                                     "code": code}) + "\n")
                fh.flush()
    aim, jam = (sum(walls[m]) / len(walls[m]) for m in ("aim", "jam"))
    print(f"AIM {aim:.2f} s, JAM {jam:.2f} s (mean wall of {args.runs}); JAM/AIM {jam / aim:.2f}")


if __name__ == "__main__":
    main()
