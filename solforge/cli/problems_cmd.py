"""``solforge problems``: check problem directories, generate new ones (see extract_cmd for model cuts)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .options import json_option


@click.group("problems")
def problems() -> None:
    """Problem sets: validate directories, extract problems from model architectures, generate new ones.

    \b
    Example:
      solforge problems validate data/problems
    """


@problems.command("validate")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@json_option
def validate(dirs, as_json) -> None:
    """Check problem directories (a directory holding many problems is searched).

    With --json: one object per problem with path, problem, valid, error.

    \b
    Example:
      solforge problems validate data/problems --json
    """
    from sol_bench.cli import run_validate

    sys.exit(run_validate(list(dirs), as_json))


def _family_list(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(f.strip() for v in values for f in v.split(",") if f.strip()))


@problems.command("generate")
@click.option("--seed", type=int, help="Seed: the same seed and count always give byte-identical output.")
@click.option("--count", type=int, help="Number of problems to generate.")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path),
              help="Output directory: OUT/<L1|L2|Quant>/<name>/ per problem, plus OUT/manifest.json.")  # fmt: skip
@click.option("--families", "families", multiple=True, metavar="NAME[,NAME...]",
              help="Only these families (repeatable or comma-separated; default all, see --list).")  # fmt: skip
@click.option("--cpu-check-mib", type=int, default=192, show_default=True,
              help="Largest smallest-workload (inputs + outputs, MiB) the CPU check runs; bigger samples are redrawn.")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it exists and is not empty.")
@click.option("--list", "list_only", is_flag=True, help="List the families and exit.")
def generate(seed, count, out_dir, families, cpu_check_mib, overwrite, list_only) -> None:
    """Generate new problems composed from the op builders, with sampled configurations and shapes.

    Every problem is checked before it is kept (it loads, its reference runs on the CPU on its smallest
    workload, the speed-of-light model prices it); failed samples are redrawn and counted in the manifest.
    Prints the problem directories; exit 0 on success, 1 when a family keeps failing, 2 on a bad request.

    \b
    Example:
      solforge problems generate --seed 7 --count 40 -o kernels_tmp/gen7
      solforge problems generate --seed 1 --count 5 --families rope,moe_dispatch -o kernels_tmp/gen1
    """
    from solforge.problems.generate import GenerateConfig, GenerateError
    from solforge.problems.generate import generate as generate_problems
    from solforge.problems.sampling import FAMILIES

    if list_only:
        for name in FAMILIES:
            click.echo(name)
        return
    missing = [opt for opt, v in (("--seed", seed), ("--count", count), ("-o/--out", out_dir)) if v is None]
    if missing:
        raise click.UsageError(f"{', '.join(missing)} required")
    config = GenerateConfig(seed=seed, count=count, families=_family_list(families), cpu_check_mib=cpu_check_mib)
    try:
        config.check()
    except GenerateError as e:
        raise click.UsageError(str(e)) from None
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())) and not overwrite:
        raise click.UsageError(f"{out_dir} exists and is not empty (--overwrite replaces it)")
    try:
        manifest = generate_problems(out_dir, config, overwrite=overwrite)
    except GenerateError as e:
        raise click.ClickException(str(e)) from None
    for p in manifest.problems:
        click.echo(str(out_dir / p.path))
    click.echo(f"{len(manifest.problems)} problems in {out_dir} (seed {seed}; {len(manifest.rejected)} samples "
               f"rejected, see manifest.json)", err=True)  # fmt: skip


def register(root: click.Group) -> None:
    root.add_command(problems)
