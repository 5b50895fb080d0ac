"""The texts an LLM worker sees: the protocol, the language notes, the task and the feedback turns.

Prompts are Markdown files beside this module; this module only loads and fills them. Rendering
feedback is a pure function of the attempts, so it can be tested without a model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Sequence

from sol_bench.problem import Problem

from .base import AttemptFeedback, WorkloadFeedback
from .reply import solution_block

HERE = Path(__file__).parent
PROTOCOL_FILE = HERE / "protocol.md"
LANGUAGE_DIR = HERE / "languages"
PROMPT_DIR = HERE / "prompts"

MAX_WORKLOADS_SHOWN = 8
MAX_ATTEMPTS_IN_FULL = 4
MAX_LOG_LINES = 12
MAX_LOG_CHARS = 1500

_ERROR_LINE = re.compile(r"(error|Error|ERROR|undefined|expected|cannot|not declared|no member|mismatch)")


def language_notes_path(language: str) -> Path:
    return LANGUAGE_DIR / f"{language}.md"


def available_languages() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in LANGUAGE_DIR.glob("*.md")))


def system_prompt(language: str) -> str:
    """The protocol followed by the notes of the run's language."""
    notes = language_notes_path(language)
    if not notes.is_file():
        raise ValueError(f"no language notes for {language!r} (have {', '.join(available_languages())})")
    return PROTOCOL_FILE.read_text() + "\n\n" + notes.read_text()


def _template(name: str) -> Template:
    return Template((PROMPT_DIR / name).read_text())


def task_prompt(problem: Problem, language: str, hardware: str) -> str:
    d = problem.definition.model_dump(mode="json", exclude_none=True)
    shown = problem.workloads[:MAX_WORKLOADS_SHOWN]
    workloads = "\n".join(json.dumps(w.model_dump(mode="json")) for w in shown)
    return _template("task.md").substitute(
        name=problem.name,
        language=language,
        hardware=hardware,
        definition=json.dumps(d, indent=1),
        workloads=workloads,
        n_workloads=len(problem.workloads),
    )


def retry_prompt(reason: str) -> str:
    return _template("retry.md").substitute(reason=reason)


def trim_log(log: str, status: str) -> str:
    """The part of a log a model can act on: error lines (with one line after) for builds, else the head."""
    lines = [ln.rstrip() for ln in log.splitlines() if ln.strip()]
    if status == "COMPILE_ERROR":
        keep: list[str] = []
        for i, ln in enumerate(lines):
            if _ERROR_LINE.search(ln):
                keep.extend(lines[i : i + 2])
            if len(keep) >= MAX_LOG_LINES:
                break
        lines = list(dict.fromkeys(keep)) or lines[-MAX_LOG_LINES:]
    lines = lines[:MAX_LOG_LINES]
    text = "\n".join(lines)
    if len(text) > MAX_LOG_CHARS:
        text = text[:MAX_LOG_CHARS] + " ..."
    return text


def _ms(x: float | None) -> str:
    return "?" if x is None else f"{x:.4g} ms"


def render_workload(w: WorkloadFeedback) -> str:
    if w.status == "PASSED":
        parts = [f"latency {_ms(w.latency_ms)}", f"T_b {_ms(w.t_b_ms)}", f"T_SOL {_ms(w.t_sol_ms)}"]
        if w.sol_score is not None:
            parts.append(f"SOL score {w.sol_score:.2f}")
        if w.latency_ms and w.t_b_ms:
            parts.append(f"{w.t_b_ms / w.latency_ms:.2f}x vs T_b")
        return f"- {w.workload_uuid} PASSED  " + " | ".join(parts)
    head = f"- {w.workload_uuid} {w.status}"
    if w.reason:
        head += f": {w.reason}"
    if w.max_abs_error is not None:
        head += f" (max abs error {w.max_abs_error:.4g})"
    log = trim_log(w.log_excerpt, w.status)
    if log:
        head += "\n  log: " + log.replace("\n", "\n       ")
    return head


def _dedupe_failures(workloads: Sequence[WorkloadFeedback]) -> list[WorkloadFeedback]:
    """Identical failures on many workloads say the same thing: show each (status, reason, log) once."""
    seen: set[tuple[str, str | None, str]] = set()
    out = []
    for w in workloads:
        key = (w.status, w.reason, w.log_excerpt)
        if w.status != "PASSED" and key in seen:
            continue
        seen.add(key)
        out.append(w)
    return out


def render_attempt(index: int, attempt: AttemptFeedback, parent_id: str | None = None) -> str:
    n_pass = sum(w.status == "PASSED" for w in attempt.workloads)
    lineage = f"candidate {attempt.candidate_id}" + (f", parent {parent_id}" if parent_id else "")
    head = f"### Attempt {index} ({lineage}): {n_pass}/{len(attempt.workloads)} workloads PASSED"
    shown = _dedupe_failures(attempt.workloads)
    lines = [head, *(render_workload(w) for w in shown)]
    hidden = len(attempt.workloads) - len(shown)
    if hidden:
        lines.append(f"- ({hidden} more workloads failed the same way)")
    return "\n".join(lines)


def render_summary_line(index: int, attempt: AttemptFeedback) -> str:
    n_pass = sum(w.status == "PASSED" for w in attempt.workloads)
    statuses = sorted({w.status for w in attempt.workloads if w.status != "PASSED"})
    scores = [w.sol_score for w in attempt.workloads if w.sol_score is not None]
    tail = f", mean SOL score {sum(scores) / len(scores):.2f}" if scores else ""
    fails = f", failures: {', '.join(statuses)}" if statuses else ""
    return f"- attempt {index} ({attempt.candidate_id}): {n_pass}/{len(attempt.workloads)} PASSED{fails}{tail}"


def next_instruction(attempt: AttemptFeedback) -> str:
    if attempt.passed:
        return "All workloads pass. Make it faster: close the gap to T_SOL, one idea at a time."
    return "Fix the failures first, then think about speed."


@dataclass(frozen=True)
class Turn:
    role: str
    content: str


def conversation(
    problem: Problem,
    history: Sequence[AttemptFeedback],
    *,
    language: str,
    hardware: str,
    pending_failure: str | None = None,
    max_in_full: int = MAX_ATTEMPTS_IN_FULL,
) -> list[Turn]:
    """The whole chat for the next call: earlier attempts replayed as assistant turns with their feedback.

    Only the newest ``max_in_full`` attempts are replayed in full; older ones become one summary line each,
    so the prompt stays bounded however long the campaign runs.
    """
    turns = [Turn("system", system_prompt(language)), Turn("user", task_prompt(problem, language, hardware))]
    cut = max(0, len(history) - max_in_full)
    old, recent = history[:cut], history[cut:]
    if old:
        summary = "\n".join(render_summary_line(i + 1, a) for i, a in enumerate(old))
        turns[-1] = Turn("user", turns[-1].content + "\n\n## Your earlier attempts (summary)\n" + summary)
    for offset, attempt in enumerate(recent):
        index = len(old) + offset + 1
        parent = history[index - 2].candidate_id if index >= 2 else None
        turns.append(Turn("assistant", solution_block(attempt.solution)))
        feedback = render_attempt(index, attempt, parent)
        turns.append(
            Turn("user", _template("next_turn.md").substitute(feedback=feedback, instruction=next_instruction(attempt)))
        )
    if pending_failure:
        turns.append(Turn("user", retry_prompt(pending_failure)))
    return _merge_consecutive(turns)


def _merge_consecutive(turns: list[Turn]) -> list[Turn]:
    """Some providers reject two user turns in a row: join them."""
    out: list[Turn] = []
    for t in turns:
        if out and out[-1].role == t.role:
            out[-1] = Turn(t.role, out[-1].content + "\n\n" + t.content)
        else:
            out.append(t)
    return out
