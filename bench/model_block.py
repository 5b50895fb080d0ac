"""`bench/model_block.py`: one decoder layer of a catalog architecture run from its stage references and from an
exported package's ops (``solforge export -o DIR``), each compared with the architecture's whole-layer reference,
with the latency of both; a Markdown table per token count. Exits 1 when either way misses the layer's tolerance.

    solforge problems extract --model qwen2.5-7b --level all -o kernels_tmp/qwen   # the problems a campaign runs on
    solforge run kernels_tmp/qwen ... ; solforge export -o kernels_tmp/qwen_export
    python bench/model_block.py qwen2.5-7b --export kernels_tmp/qwen_export --device cuda -o block.md

The problems are cut again from the same architecture and config (``--config``, ``--dtype``), so the stage
problems the package's ops were exported for are found by name.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from solforge.export.model_block import BlockCheck, BlockError, block_problems, check_block, shared_tokens  # noqa: E402
from solforge.problems.extract import ExtractError, parse_override  # noqa: E402


def table(arch: str, device: str, checks: list[BlockCheck]) -> str:
    lines = [f"# One {arch} decoder layer on {device}: stage references vs exported ops", "",
             "| tokens | exported stages | winner calls | references, ms | exported, ms | speedup | matches layer | max abs err |",
             "|---:|---|---|---:|---:|---:|---|---:|"]  # fmt: skip
    for c in checks:
        calls = ", ".join(f"{k} {v}" for k, v in sorted(c.exported.kernel_calls.items())) or "–"
        ok = "yes" if c.reference_matches and c.exported_matches else f"no: {c.reason}"
        lines.append(f"| {c.tokens} | {', '.join(c.exported.exported) or '–'} | {calls} | {c.reference.latency_ms:.4f} "
                     f"| {c.exported.latency_ms:.4f} | {c.reference.latency_ms / c.exported.latency_ms:.2f}x | {ok} "
                     f"| {c.exported_max_abs_err:.3g} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("arch", help="architecture key (solforge problems extract --list)")
    ap.add_argument("--export", type=Path, required=True, help="the directory `solforge export -o` wrote")
    ap.add_argument("--config", action="append", default=[], help="KEY=VALUE override, as for extract")
    ap.add_argument("--dtype", help="run dtype, as for extract")
    ap.add_argument("--tokens", type=int, action="append", help="token counts [those every stage was cut with]")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()
    overrides = dict(parse_override(c) for c in args.config)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            problems = block_problems(args.arch, Path(tmp), overrides, args.dtype)
            tokens = args.tokens or shared_tokens(problems)
            checks = [check_block(problems, args.export, t, args.device, args.iterations) for t in tokens]
        except (BlockError, ExtractError) as e:
            print(f"model_block: {e}", file=sys.stderr)
            return 2
    text = table(args.arch, args.device, checks)
    print(text)
    if args.output:
        args.output.write_text(text)
    return 0 if all(c.reference_matches and c.exported_matches for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
