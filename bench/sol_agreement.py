"""Agreement of solforge's T_SOL with published per-workload T_SOL values (e.g. the leaderboard's, B200).

The published values come from a CSV or JSON-lines file with a workload ``uuid`` column and one of
``t_sol_ms`` / ``t_sol_us`` / ``sol_ms`` / ``sol_us``. solforge's values are computed here with the same
analysis ``solforge sol`` uses (or read with ``--ours`` from saved ``solforge sol --json`` lines).
Reports the share of workloads within ±TOL (default 5%), leaving out tiny workloads whose published T_SOL
is below ``--tiny-us`` (the leaderboard shows a floor near 0.4–0.5 µs there), and the worst disagreements.

    python bench/sol_agreement.py DATASET_DIR --published leaderboard_sol.csv --hardware B200 -o agreement.md
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CLI = [sys.executable, "-m", "solforge"]
_MS_KEYS = {"t_sol_ms": 1.0, "sol_ms": 1.0, "t_sol_us": 1e-3, "sol_us": 1e-3}


@dataclass(frozen=True)
class Row:
    uuid: str
    problem: str
    ours_ms: float
    published_ms: float

    @property
    def rel_error(self) -> float:
        return self.ours_ms / self.published_ms - 1.0


def read_published(path: Path) -> dict[str, float]:
    """uuid -> published T_SOL in ms; a file without a uuid or T_SOL column is an error naming the file."""
    text = path.read_text()
    if path.suffix == ".csv":
        records = list(csv.DictReader(text.splitlines()))
    else:
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    out: dict[str, float] = {}
    for i, rec in enumerate(records, start=1):
        key = next((k for k in _MS_KEYS if rec.get(k) not in (None, "")), None)
        if "uuid" not in rec or key is None:
            raise SystemExit(f"{path}: record {i}: needs 'uuid' and one of {sorted(_MS_KEYS)}")
        out[str(rec["uuid"])] = float(rec[key]) * _MS_KEYS[key]
    return out


def ours_from_cli(problem_dirs: list[str], hardware: str) -> list[dict]:
    proc = subprocess.run([*CLI, "sol", *problem_dirs, "--hardware", hardware, "--json"], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"solforge sol failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def compare(ours: list[dict], published: dict[str, float]) -> tuple[list[Row], list[str]]:
    """Rows for workloads both sides have, and the uuids solforge could not analyse."""
    rows, unanalysed = [], []
    for o in ours:
        if o["uuid"] not in published:
            continue
        if o.get("t_sol_ms") is None:
            unanalysed.append(o["uuid"])
            continue
        rows.append(Row(o["uuid"], o["problem"], float(o["t_sol_ms"]), published[o["uuid"]]))
    return rows, unanalysed


def report(rows: list[Row], unanalysed: list[str], missing: int, tol: float, tiny_us: float, worst: int = 15) -> str:
    tiny = [r for r in rows if r.published_ms * 1e3 < tiny_us]
    real = [r for r in rows if r.published_ms * 1e3 >= tiny_us]
    within = [r for r in real if abs(r.rel_error) <= tol]
    share = len(within) / len(real) if real else 0.0
    lines = [
        f"# T_SOL agreement (±{tol:.0%}, workloads with published T_SOL ≥ {tiny_us} µs)",
        "",
        f"- compared: {len(real)} workloads; within ±{tol:.0%}: {len(within)} ({share:.1%})",
        f"- tiny workloads left out: {len(tiny)}; not analysed by solforge: {len(unanalysed)}; "
        f"published but not in the problems given: {missing}",
        "",
        "| problem | uuid | solforge ms | published ms | ours / published − 1 |",
        "|---|---|---:|---:|---:|",
    ]
    for r in sorted(real, key=lambda r: -abs(r.rel_error))[:worst]:
        lines.append(f"| {r.problem} | {r.uuid} | {r.ours_ms:.6g} | {r.published_ms:.6g} | {r.rel_error:+.1%} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="*", help="problem directories (or a dataset root)")
    ap.add_argument("--published", type=Path, required=True, help="CSV or JSON lines: uuid + t_sol_ms|t_sol_us")
    ap.add_argument("--ours", type=Path, help="saved `solforge sol --json` lines instead of analysing here")
    ap.add_argument("--hardware", default="B200")
    ap.add_argument("--tol", type=float, default=0.05)
    ap.add_argument("--tiny-us", type=float, default=2.0)
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()
    if not args.ours and not args.problems:
        ap.error("give problem directories or --ours")
    published = read_published(args.published)
    if args.ours:
        ours = [json.loads(line) for line in args.ours.read_text().splitlines() if line.startswith("{")]
    else:
        ours = ours_from_cli(args.problems, args.hardware)
    rows, unanalysed = compare(ours, published)
    missing = len(set(published) - {o["uuid"] for o in ours})
    text = report(rows, unanalysed, missing, args.tol, args.tiny_us)
    print(text, end="")
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
