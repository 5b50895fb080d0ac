"""``solforge problems extract``: write problems cut from a model architecture."""

from __future__ import annotations

from pathlib import Path

import click


def _problems_group(root: click.Group) -> click.Group:
    group = root.commands.get("problems")
    if isinstance(group, click.Group):
        return group

    @root.group("problems")
    def problems() -> None:
        """Problem sets: extract problems from model architectures."""

    return problems


@click.command("extract")
@click.option("--model", "arch", help="Architecture key (see --list).")
@click.option("--config", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value (repeatable), e.g. hidden_size=2048.")  # fmt: skip
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32", "fp8"]), default=None,
              help="Run dtype; default: as the model runs (fp8 GEMMs for DeepSeek-V3, else bf16).")  # fmt: skip
@click.option("--level", type=click.Choice(["l1", "l2", "all"]), default="all", show_default=True,
              help="Single ops (l1), fused blocks (l2) or both.")  # fmt: skip
@click.option("--op", "ops", multiple=True, help="Only these cuts (repeatable); --list --model ARCH names them.")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Output directory; problems land in OUT/<L1|L2|Quant>/<name>/.")  # fmt: skip
@click.option("--list", "list_only", is_flag=True, help="List architectures (or, with --model, its cuts) and exit.")
@click.option("--overwrite", is_flag=True, help="Replace a different problem of the same name already in OUT.")
def extract(arch, overrides, dtype, level, ops, out_dir, list_only, overwrite) -> None:
    """Cut a model architecture into SOL-ExecBench problems (definition.json + workload.jsonl).

    Problems identical to one already in OUT (same op, sizes and workloads) are not duplicated: the
    existing problem gains the new model in its provenance.

    \b
    Example:
      solforge problems extract --model llama3-8b --level l1 -o my_problems
      solforge problems extract --model qwen2.5-0.5b --config intermediate_size=4096 -o my_problems
    """
    from solforge.problems import ARCHITECTURES, ExtractError, parse_override, write_problems
    from solforge.problems import extract as extract_problems

    if list_only:
        if arch:
            try:
                drafts = extract_problems(arch, dtype=dtype, level=level)
            except ExtractError as e:
                raise click.BadParameter(str(e), param_hint="--model") from None
            for d in drafts:
                click.echo(f"{d.level:3s} {d.name:72s} {'; '.join(s.module for s in d.sources)}")
            return
        for key, a in sorted(ARCHITECTURES.items()):
            click.echo(f"{key:20s} {a.family:11s} {a.model}")
        return
    if not arch:
        raise click.UsageError("--model is required (see --list)")
    if out_dir is None:
        raise click.UsageError("-o/--out is required")
    try:
        values = dict(parse_override(o) for o in overrides)
        drafts = extract_problems(arch, values, dtype=dtype, level=level, ops=ops or None)
        paths = write_problems(drafts, out_dir, overwrite=overwrite)
    except ExtractError as e:
        raise click.UsageError(str(e)) from None
    for p in paths:
        click.echo(str(p))
    click.echo(f"{len(paths)} problems from {arch} in {out_dir}", err=True)


def register(root: click.Group) -> None:
    _problems_group(root).add_command(extract)
