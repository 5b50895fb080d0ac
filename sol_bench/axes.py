"""Integer axis expressions (``"H // 2"``), evaluated without ``eval``."""

from __future__ import annotations

import ast
import operator

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.Div: operator.truediv,
}


def parse(expression: str) -> ast.Expression:
    """Parse and check that only integers, names and + - * / // % ** and parentheses appear."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from e
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.Name, ast.Load)):
            continue
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            continue
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            continue
        if isinstance(node, ast.Constant) and type(node.value) is int:
            continue
        if type(node) in _BINOPS or isinstance(node, (ast.USub, ast.UAdd)):
            continue
        raise ValueError(f"{expression!r}: {type(node).__name__} is not allowed in an axis expression")
    return tree


def names(expression: str) -> set[str]:
    return {n.id for n in ast.walk(parse(expression)) if isinstance(n, ast.Name)}


def evaluate(expression: str, env: dict[str, int]) -> int:
    """Evaluate an axis expression; the result must be an integer."""

    def ev(node: ast.AST) -> int | float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ValueError(f"{expression!r}: axis {node.id!r} has no value")
            return env[node.id]
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64:
                raise ValueError(f"{expression!r}: exponent {right} too large")
            try:
                return _BINOPS[type(node.op)](left, right)
            except ZeroDivisionError as e:
                raise ValueError(f"{expression!r}: division by zero") from e
        raise ValueError(f"{expression!r}: unsupported node {type(node).__name__}")

    value = ev(parse(expression))
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{expression!r} = {value} is not an integer")
        value = int(value)
    return value


def resolve(axes: dict, workload_axes: dict[str, int]) -> dict[str, int]:
    """Resolve const axes, then the workload's var axes, then expressions (in dependency order).

    ``axes`` maps name -> Axis model (``sol_bench.models``).
    """
    env: dict[str, int] = {}
    for name, ax in axes.items():
        if ax.type == "const":
            env[name] = ax.value
    for name, ax in axes.items():
        if ax.type == "var":
            if name not in workload_axes:
                raise ValueError(f"var axis {name!r} has no value in the workload")
            env[name] = int(workload_axes[name])
    pending = {n: ax.expression for n, ax in axes.items() if ax.type == "expr"}
    while pending:
        ready = [n for n, e in pending.items() if names(e) <= env.keys()]
        if not ready:
            raise ValueError(f"axis expressions cannot be resolved (cycle or unknown axis): {sorted(pending)}")
        for n in ready:
            env[n] = evaluate(pending.pop(n), env)
    return env
