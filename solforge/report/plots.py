"""The report's figures, drawn with matplotlib and returned as self-contained SVG data URIs."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # no display on the machines that render reports

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from solforge.store.report_queries import CandidateResult, Winner  # noqa: E402

from .series import Curve, GroupRow, mean_curve  # noqa: E402

_STYLE = {
    "svg.fonttype": "path",  # glyphs as paths: the page needs no font
    "svg.hashsalt": "solforge-report",  # stable element ids, so the same data gives the same file
    "axes.grid": True,
    "grid.alpha": 0.3,
    "font.size": 9,
}
PASS_COLOR, FAIL_COLOR, ACCENT = "#2a7ab0", "#c4553a", "#333333"


@dataclass(frozen=True)
class Plot:
    """One figure of the page: what it shows (alt text) and its SVG as a data URI."""

    title: str
    alt: str
    uri: str


def _svg_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def per_problem(problems: Sequence[str], winners: Sequence[Winner]) -> Plot:
    """Best speedup vs T_b (log scale) and best SOL score per problem, best score first."""
    won = {w.problem: w for w in winners}
    order = sorted(problems, key=lambda p: (won[p].sol_score or 0.0) if p in won else -1.0)
    y = range(len(order))
    with plt.rc_context(_STYLE):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 1.2 + 0.28 * len(order)), sharey=True)
        speedups = [won[p].speedup if p in won and won[p].speedup else 0.0 for p in order]
        ax1.barh(y, speedups, color=[PASS_COLOR if s >= 1 else FAIL_COLOR for s in speedups])
        ax1.axvline(1.0, color=ACCENT, lw=1)
        ax1.set_xscale("log")
        ax1.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax1.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
        ax1.xaxis.set_minor_formatter(NullFormatter())
        ax1.set_xlabel("best speedup vs T_b (log; 1 = baseline)")
        ax1.set_yticks(list(y), [p if p in won else f"{p} (no pass)" for p in order])
        scores = [(won[p].sol_score or 0.0) if p in won else 0.0 for p in order]
        ax2.barh(y, scores, color=PASS_COLOR)
        ax2.set_xlim(0, 1)
        ax2.set_xlabel("best SOL score (1 = speed-of-light)")
        for i, s in enumerate(scores):
            ax2.text(min(s + 0.01, 0.9), i, f"{s:.2f}", va="center", fontsize=7)
        fig.suptitle("Best result per problem")
        return Plot("Speedup vs T_b and SOL score per problem",
                    f"bar charts of the best speedup and SOL score of {len(order)} problems", _svg_uri(fig))


def sol_distribution(cands: Sequence[CandidateResult], winners: Sequence[Winner]) -> Plot:
    passing = [c.sol_score for c in cands if c.passed and c.sol_score is not None]
    best = [w.sol_score for w in winners if w.sol_score is not None]
    bins = [i / 20 for i in range(21)]
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(7, 3.2))
        ax.hist(passing, bins=bins, color=PASS_COLOR, alpha=0.5, label=f"passing candidates ({len(passing)})")
        ax.hist(best, bins=bins, color=ACCENT, histtype="step", lw=2, label=f"winners ({len(best)})")
        ax.set_xlim(0, 1)
        ax.set_xlabel("SOL score")
        ax.set_ylabel("count")
        ax.legend(loc="upper left")
        return Plot("SOL score distribution",
                    f"histogram of the SOL scores of {len(passing)} passing candidates and {len(best)} winners",
                    _svg_uri(fig))


def best_so_far(by_attempt: Sequence[Curve], over_time: Sequence[Curve]) -> Plot:
    """Left: each problem's best SOL score against its attempts (grey) and their mean; right: each run's
    mean best score against wall time."""
    with plt.rc_context(_STYLE):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
        for c in by_attempt:
            ax1.step(c.x, c.y, where="post", color="grey", alpha=0.35, lw=1)
        mean = mean_curve(by_attempt)
        ax1.step(mean.x, mean.y, where="post", color=PASS_COLOR, lw=2.5, label=mean.label)
        ax1.set_xlabel("attempt")
        ax1.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax1.set_ylabel("best SOL score so far")
        ax1.set_ylim(0, 1)
        ax1.legend(loc="lower right")
        for c in over_time:
            ax2.step(c.x, c.y, where="post", lw=2, marker="o", ms=3, label=f"run {c.label}")
        ax2.set_xlabel("minutes since the run's first candidate")
        ax2.set_ylabel("mean best SOL score over problems")
        ax2.set_ylim(0, 1)
        if over_time:
            ax2.legend(loc="lower right")
        return Plot("Best so far, over attempts and over time",
                    "step curves of the best SOL score so far per problem against attempts and per run against time",
                    _svg_uri(fig))


def by_group(kinds: Sequence[GroupRow], languages: Sequence[GroupRow]) -> Plot:
    with plt.rc_context(_STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(10, 1.4 + 0.3 * max(len(kinds), len(languages), 1)))
        for ax, rows, what in ((axes[0], kinds, "kind (op_type)"), (axes[1], languages, "language")):
            y = range(len(rows))
            ax.barh(y, [r.mean_best_sol_score for r in rows], color=PASS_COLOR)
            ax.set_yticks(list(y), [r.group for r in rows])
            ax.set_xlim(0, 1)
            ax.set_xlabel("mean best SOL score (unsolved = 0)")
            ax.set_title(f"by {what}")
            for i, r in enumerate(rows):
                ax.text(0.01, i, f"{r.solved}/{r.problems} solved, {r.passed}/{r.attempts} attempts passed",
                        va="center", fontsize=7, color="white" if r.mean_best_sol_score > 0.6 else ACCENT)
        return Plot("Results by kind and language",
                    "bar charts of the mean best SOL score per problem kind and per language", _svg_uri(fig))


def cost(rows: Sequence[GroupRow]) -> Plot:
    """Spend per problem: the agents' cost in USD and the judge's GPU minutes."""
    y = range(len(rows))
    with plt.rc_context(_STYLE):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 1.2 + 0.28 * len(rows)), sharey=True)
        ax1.barh(y, [r.cost_usd for r in rows], color=PASS_COLOR)
        ax1.set_yticks(list(y), [r.group for r in rows])
        ax1.set_xlabel("agent cost (USD)")
        ax2.barh(y, [r.gpu_s / 60.0 for r in rows], color=ACCENT)
        ax2.set_xlabel("judge GPU time (minutes)")
        fig.suptitle("Cost and GPU time per problem")
        return Plot("Cost and GPU time", f"bar charts of agent cost and GPU minutes for {len(rows)} problems",
                    _svg_uri(fig))
