#!/bin/bash
# Build the site-packages bundles a GPU session carries (the GPU image has torch/triton/numpy/pandas/scipy
# but no pydantic, prefect, dask, duckdb, great-expectations or cutlass-dsl; a call carries at most 64 MiB):
#   .whl/               pydantic and its deps as wheels (installed with pip --target on the device)
#   .carryA/, .carryB/  cutlass-dsl + cuda-bindings + protobuf, xz tar split in two (~45 + ~26 MiB)
#   .carryC/            prefect, prefect-dask, dask, distributed, duckdb, great-expectations, ... (~50 MiB)
# Each of these folders must be listed in .git/info/exclude. Takes ~10 min on 2 cores (xz).
set -euo pipefail
cd "$(dirname "$0")/../.."
PLAT="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64
      --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64"
W=$(mktemp -d)
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp $PLAT -d "$W/wheels" \
    -c constraints.txt prefect prefect-dask dask distributed duckdb great-expectations pydantic nvidia-cutlass-dsl
rm -f "$W"/wheels/{numpy,pandas,scipy}-*.whl  # on the GPU image already
mkdir -p .whl && rm -f .whl/*.whl
for n in pydantic pydantic_core annotated_types typing_inspection typing_extensions; do cp "$W"/wheels/${n}-*.whl .whl/; done
mkdir -p "$W/site"
for w in "$W"/wheels/*.whl; do unzip -q -o "$w" -d "$W/site"; done
find "$W/site" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p "$W/cute/site" "$W/pipe/site"
for x in "$W"/site/*; do
  case "$(basename "$x")" in
    nvidia_cutlass_dsl*|cuda|cuda_bindings*|cuda_pathfinder*|google|protobuf*) mv "$x" "$W/cute/site/";;
    *) mv "$x" "$W/pipe/site/";;
  esac
done
tar cf - -C "$W/cute" site | xz -T0 -6 > "$W/cute_b.tar.xz"
tar cf - -C "$W/pipe" site | xz -T0 -6 > "$W/pipe_b.tar.xz"
rm -rf .carryA .carryB .carryC && mkdir -p .carryA .carryB .carryC
split -b 44m -d -a 1 "$W/cute_b.tar.xz" "$W/cute_b.tar.xz.part"
mv "$W/cute_b.tar.xz.part0" .carryA/ && mv "$W/cute_b.tar.xz.part1" .carryB/ && mv "$W/pipe_b.tar.xz" .carryC/
du -sh .whl .carryA .carryB .carryC
rm -rf "$W"
