"""Read a model's reply: the last ```json block, validated as a Solution for this problem and run."""

from __future__ import annotations

import json
import re

from pydantic import ValidationError

from sol_bench.models import Language, Solution

_FENCE = re.compile(r"```json[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)


class MalformedReply(ValueError):
    """The reply holds no usable solution; the message says why, in words a model can act on."""


def extract_json_block(text: str) -> str:
    blocks = _FENCE.findall(text)
    if not blocks:
        raise MalformedReply("the reply has no ```json fenced block holding the solution object")
    return blocks[-1]


def parse_solution(text: str, *, definition: str, language: str, author: str) -> Solution:
    """The solution in ``text``; ``definition`` and ``author`` are set by us, the language must match."""
    raw = extract_json_block(text)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise MalformedReply(f"the ```json block is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})")
    if not isinstance(data, dict):
        raise MalformedReply("the ```json block must hold one solution object, not a list or a value")
    data["definition"] = definition
    data["author"] = author
    try:
        solution = Solution.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        msg = first["msg"].removeprefix("Value error, ")
        raise MalformedReply(f"the object is not a valid solution: {where}: {msg}") from None
    langs = {lang.value for lang in solution.spec.languages}
    if Language(language).value not in langs:
        raise MalformedReply(
            f"this is a {language} run but spec.languages is {sorted(langs)}; write a {language} solution"
        )
    return solution


def solution_block(solution: Solution) -> str:
    """A solution as the model should have written it (used to replay earlier turns)."""
    body = solution.model_dump(mode="json", exclude_none=True)
    return "```json\n" + json.dumps(body, indent=1) + "\n```"
