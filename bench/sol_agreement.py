"""Agreement of solforge's T_SOL with published per-workload T_SOL values (e.g. the leaderboard's, B200).

The published values come from a CSV or JSON-lines file with a workload ``uuid`` column and one of
``t_sol_ms`` / ``t_sol_us`` / ``sol_ms`` / ``sol_us`` / ``b200_sol_ms``. solforge's values are computed here with the same
analysis ``solforge sol`` uses (or read with ``--ours`` from saved ``solforge sol --json`` lines).
Reports the share of workloads within ±TOL (default 5%) and within ±2·TOL, and within ±TOL or the published
value's own rounding (a value printed as 0.0005 ms stands for 0.00045..0.00055), leaving out tiny workloads whose
published T_SOL is below ``--tiny-us`` (default 0: none; the leaderboard rounds many values to 0.1 µs, so a
workload near 1 µs cannot agree to 5%), per-problem shares, every workload solforge could not analyse
with its reason, and the worst disagreements with what set our value (bound, precision, tracing method).

    python bench/sol_agreement.py /work/shared/calibration/sol \
        --published /work/shared/calibration/sol/published_b200_sol.jsonl --hardware B200 -o agreement.md
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
_MS_KEYS = {"t_sol_ms": 1.0, "sol_ms": 1.0, "b200_sol_ms": 1.0, "t_sol_us": 1e-3, "sol_us": 1e-3}


@dataclass(frozen=True)
class Row:
    uuid: str
    problem: str
    ours_ms: float
    published_ms: float
    detail: str = ""
    resolution_ms: float = 0.0

    @property
    def rel_error(self) -> float:
        return self.ours_ms / self.published_ms - 1.0

    def agrees(self, tol: float) -> bool:
        """Within ±tol, or within the published value's own rounding (0.0005 ms stands for 0.00045..0.00055)."""
        return abs(self.rel_error) <= tol or abs(self.ours_ms - self.published_ms) <= self.resolution_ms / 2


def resolution(text: str) -> float:
    """One unit in the last printed digit of a decimal number ('0.0005' -> 0.0001); 0 for exponent notation."""
    text = text.strip().lower()
    if "e" in text or "." not in text:
        return 0.0
    return 10.0 ** -len(text.split(".", 1)[1])


def read_published(path: Path) -> dict[str, tuple[float, float]]:
    """uuid -> (published T_SOL in ms, its printed resolution in ms); a file without a uuid or T_SOL column is an
    error naming the file."""
    text = path.read_text()
    if path.suffix == ".csv":
        records = list(csv.DictReader(text.splitlines()))
    else:
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    out: dict[str, tuple[float, float]] = {}
    for i, rec in enumerate(records, start=1):
        key = next((k for k in _MS_KEYS if rec.get(k) not in (None, "")), None)
        if "uuid" not in rec or key is None:
            raise SystemExit(f"{path}: record {i}: needs 'uuid' and one of {sorted(_MS_KEYS)}")
        value = rec[key]
        text = value if isinstance(value, str) else repr(float(value))
        out[str(rec["uuid"])] = (float(value) * _MS_KEYS[key], resolution(text) * _MS_KEYS[key])
    return out


def ours_from_cli(problem_dirs: list[str], hardware: str) -> list[dict]:
    proc = subprocess.run([*CLI, "sol", *problem_dirs, "--hardware", hardware, "--json"], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"solforge sol failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _detail(o: dict) -> str:
    """What set our value: the roof, the precision and how the reference was traced."""
    parts = [f"{o.get('bound', '?')}-bound", str(o.get("precision", "?"))]
    if o.get("method"):
        parts.append(f"traced on {o['method']}")
    return ", ".join(parts)


def compare(ours: list[dict], published: dict[str, tuple[float, float]]) -> tuple[list[Row], list[tuple[str, str, str]]]:
    """Rows for workloads both sides have, and (problem, uuid, reason) for those solforge could not analyse."""
    rows, unanalysed = [], []
    for o in ours:
        if o["uuid"] not in published:
            continue
        if o.get("t_sol_ms") is None:
            unanalysed.append((o.get("problem", "?"), o["uuid"], str(o.get("error", "no value"))))
            continue
        value, res = published[o["uuid"]]
        rows.append(Row(o["uuid"], o["problem"], float(o["t_sol_ms"]), value, _detail(o), res))
    return rows, unanalysed


def shares(rows: list[Row], tol: float) -> tuple[float, float]:
    """Fractions of ``rows`` within ±tol and ±2·tol of the published value."""
    if not rows:
        return 0.0, 0.0
    near = sum(abs(r.rel_error) <= tol for r in rows)
    wide = sum(abs(r.rel_error) <= 2 * tol for r in rows)
    return near / len(rows), wide / len(rows)


def rounded_share(rows: list[Row], tol: float) -> float:
    """Fraction of ``rows`` within ±tol or within the published value's rounding."""
    return sum(r.agrees(tol) for r in rows) / len(rows) if rows else 0.0


def report(
    rows: list[Row], unanalysed: list[tuple[str, str, str]], missing: int, tol: float, tiny_us: float, worst: int = 15
) -> str:
    tiny = [r for r in rows if r.published_ms * 1e3 < tiny_us]
    real = [r for r in rows if r.published_ms * 1e3 >= tiny_us]
    within = [r for r in real if abs(r.rel_error) <= tol]
    share, wide = shares(real, tol)
    with_gaps = len(real) + len(unanalysed)
    lines = [
        f"# T_SOL agreement (±{tol:.0%}, workloads with published T_SOL ≥ {tiny_us} µs)",
        "",
        f"- compared: {len(real)} workloads; within ±{tol:.0%}: {len(within)} ({share:.1%}); "
        f"within ±{2 * tol:.0%}: {wide:.1%}; within ±{tol:.0%} or the published value's rounding: "
        f"{rounded_share(real, tol):.1%}",
        f"- counting the unanalysed as disagreeing: within ±{tol:.0%}: "
        f"{len(within) / with_gaps if with_gaps else 0:.1%} of {with_gaps}",
        f"- tiny workloads left out: {len(tiny)}; not analysed by solforge: {len(unanalysed)}; "
        f"published but not in the problems given: {missing}",
        "",
        f"| problem | workloads | within ±{tol:.0%} | ±{tol:.0%} or rounding | median ours / published − 1 |",
        "|---|---:|---:|---:|---:|",
    ]
    by_problem: dict[str, list[Row]] = {}
    for r in real:
        by_problem.setdefault(r.problem, []).append(r)
    for name, group in sorted(by_problem.items()):
        errs = sorted(r.rel_error for r in group)
        lines.append(
            f"| {name} | {len(group)} | {shares(group, tol)[0]:.0%} | {rounded_share(group, tol):.0%} "
            f"| {errs[len(errs) // 2]:+.1%} |"
        )
    lines += [
        "",
        "| problem | uuid | solforge ms | published ms | ours / published − 1 | ours set by |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in sorted((r for r in real if not r.agrees(tol)), key=lambda r: -abs(r.rel_error))[:worst]:
        lines.append(
            f"| {r.problem} | {r.uuid} | {r.ours_ms:.6g} | {r.published_ms:.6g} | {r.rel_error:+.1%} | {r.detail} |"
        )
    if unanalysed:
        lines += ["", "Not analysed (reason):", ""]
        seen: set[str] = set()
        for problem, uuid, reason in unanalysed:
            first = problem not in seen
            seen.add(problem)
            if first:
                lines.append(f"- {problem} ({sum(p == problem for p, _, _ in unanalysed)} workloads): {reason[:300]}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="*", help="problem directories (or a dataset root)")
    ap.add_argument("--published", type=Path, required=True, help="CSV or JSON lines: uuid + t_sol_ms|t_sol_us")
    ap.add_argument("--ours", type=Path, help="saved `solforge sol --json` lines instead of analysing here")
    ap.add_argument("--hardware", default="B200")
    ap.add_argument("--tol", type=float, default=0.05)
    ap.add_argument("--tiny-us", type=float, default=0.0, help="leave out workloads published below this (µs)")
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
