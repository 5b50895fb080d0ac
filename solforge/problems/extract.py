"""Extract problems from an architecture, merge duplicates across models, and write problem directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from .atomic import replacing_dir
from .catalog import get_architecture
from .draft import ProblemDraft, Source
from .plans import PLANNERS

DTYPE_ALIASES = {
    "bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16", "fp32": "float32",
    "float32": "float32", "fp8": "float8_e4m3fn", "float8_e4m3fn": "float8_e4m3fn",
}  # fmt: skip
LEVELS = ("l1", "l2", "all")


class ExtractError(ValueError):
    """A request the extractor cannot honour (unknown architecture, config key, dtype, level or clash)."""


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE parsed as JSON where it parses (ints, floats, booleans, lists), else a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ExtractError(f"config override {text!r} is not KEY=VALUE")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = {"True": True, "False": False}.get(raw, raw)
    return key.strip(), value


def extract(
    arch_key: str, overrides: dict[str, Any] | None = None, *, dtype: str | None = None, level: str = "all",
    ops: Iterable[str] | None = None,
) -> list[ProblemDraft]:
    """The problems of one architecture, each carrying its provenance."""
    try:
        arch = get_architecture(arch_key)
    except KeyError as e:
        raise ExtractError(str(e.args[0])) from None
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(arch.config))
    if unknown:
        raise ExtractError(f"{arch_key}: unknown config keys {unknown}; known: {sorted(arch.config)}")
    if level not in LEVELS:
        raise ExtractError(f"level {level!r} is not one of {LEVELS}")
    if dtype is not None and dtype not in DTYPE_ALIASES:
        raise ExtractError(f"dtype {dtype!r} is not one of {sorted(DTYPE_ALIASES)}")
    cfg = {**arch.config, **overrides}
    run_dtype = DTYPE_ALIASES[dtype] if dtype else arch.dtype
    try:
        cuts = PLANNERS[arch.planner](cfg, run_dtype)
    except (KeyError, TypeError, ZeroDivisionError) as e:
        raise ExtractError(f"{arch_key}: the config does not describe a buildable model ({type(e).__name__}: {e})")
    wanted = set(ops) if ops is not None else None
    if wanted is not None:
        missing = wanted - {c.op for c in cuts}
        if missing:
            raise ExtractError(f"{arch_key}: no ops {sorted(missing)}; available: {sorted(c.op for c in cuts)}")
    model = arch.model
    if overrides or (dtype and run_dtype != arch.dtype):
        changes = [f"{k}={v}" for k, v in sorted(overrides.items())] + ([f"dtype={run_dtype}"] if dtype else [])
        model = f"{arch.model} [{', '.join(changes)}]"
    out: list[ProblemDraft] = []
    for cut in cuts:
        if wanted is not None and cut.op not in wanted:
            continue
        if level != "all" and cut.draft.level.lower() != level:
            continue
        src = Source(arch=arch.key, model=model, family=arch.family, module=cut.module,
                     config=tuple((k, cfg[k]) for k in cut.uses if k in cfg))  # fmt: skip
        out.append(cut.draft.with_sources((src,)))
    return merge(out)


def merge(drafts: Iterable[ProblemDraft]) -> list[ProblemDraft]:
    """One problem per name; identical problems from several models keep every source. Order: first seen."""
    by_name: dict[str, ProblemDraft] = {}
    for d in drafts:
        seen = by_name.get(d.name)
        if seen is None:
            by_name[d.name] = d
        elif seen.content_key() == d.content_key():
            by_name[d.name] = seen.with_sources(d.sources)
        else:
            raise ExtractError(f"two different problems are both named {d.name!r}")
    return list(by_name.values())


def _sources_from_json(definition: dict[str, Any]) -> tuple[Source, ...]:
    prov = definition.get("provenance") or {}
    return tuple(
        Source(arch=s["arch"], model=s["model"], family=s["family"], module=s["module"],
               config=tuple(s.get("config", {}).items()))  # fmt: skip
        for s in prov.get("sources", [])
    )


def _same_problem(existing: Path, draft: ProblemDraft) -> bool:
    ignore = {"description", "hf_id", "tags", "provenance"}
    old = json.loads((existing / "definition.json").read_text())
    new = draft.definition_json()
    old_lines = (existing / "workload.jsonl").read_text().splitlines()
    return {k: v for k, v in old.items() if k not in ignore} == {
        k: v for k, v in new.items() if k not in ignore
    } and old_lines == draft.workload_lines()


def problem_path(out_dir: Path, draft: ProblemDraft) -> Path:
    return Path(out_dir) / draft.category / draft.name


def write_problem(draft: ProblemDraft, out_dir: Path, overwrite: bool = False) -> Path:
    """Write one problem directory atomically; an identical problem already there gains the new sources."""
    target = problem_path(out_dir, draft)
    if (target / "definition.json").is_file():
        if _same_problem(target, draft):
            old = json.loads((target / "definition.json").read_text())
            draft = draft.with_sources(_sources_from_json(old))
        elif not overwrite:
            raise ExtractError(f"{target} holds a different problem of the same name (use overwrite to replace)")
    with replacing_dir(target) as tmp:
        (tmp / "definition.json").write_text(json.dumps(draft.definition_json(), indent=2) + "\n")
        (tmp / "workload.jsonl").write_text("\n".join(draft.workload_lines()) + "\n")
    return target


def write_problems(drafts: Iterable[ProblemDraft], out_dir: Path, overwrite: bool = False) -> list[Path]:
    return [write_problem(d, out_dir, overwrite=overwrite) for d in merge(drafts)]
