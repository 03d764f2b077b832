#!/usr/bin/env bash
# Make, here, the git-ignored folders that scripts/gpu-check.sh carries to the GPU machine (no package registry
# there): .whl, the Python packages that machine lacks (docs/GPU.md lists them and why), and, given a snapshot of
# SOL-ExecBench (a git directory, e.g. from the tool library's `fetch` of NVIDIA/SOL-ExecBench), .seb for the
# `cost` stage: its wheel built from the snapshot, the dependencies it needs beside the machine's own, and its
# rmsnorm example.
#
#   scripts/carry-wheels.sh [SOL_EXECBENCH_GIT_DIR]
#
# Then name .whl (and .seb, .gpudb) in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
platforms=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
           --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
mkdir -p .git/info
grep -qxF /.whl/ .git/info/exclude 2>/dev/null || printf '/.whl/\n/.seb/\n/.gpudb/\n' >> .git/info/exclude
# no click: the machine's typer needs its own (a newer click once broke the CLI's option names there)
rm -rf .whl && python3 -m pip download -q "${platforms[@]}" -d .whl \
  pydantic==2.14.4 pydantic_core==2.50.5 annotated_types typing_inspection typing_extensions pyseccomp \
  fastapi starlette uvicorn opentelemetry-api \
  openai httpx2 httpcore2 jiter sniffio anyio h11 idna truststore
echo ".whl: $(ls .whl | wc -l) wheels, $(du -sh .whl | cut -f1)"
[ $# -ge 1 ] || exit 0
snapshot=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git --git-dir="$snapshot" archive HEAD | tar -x -C "$work"
rm -rf .seb && mkdir -p .seb/wheels .seb/example/examples/triton
python3 -m pip wheel -q --no-deps --ignore-requires-python -w .seb/wheels "$work"  # a pure wheel, for 3.12 there
python3 -m pip download -q "${platforms[@]}" -d .seb/wheels \
  pydantic==2.12.5 pydantic-core==2.41.5 annotated-types==0.7.0 typing-inspection==0.4.2 cupti-python==13.0.1
cp -r "$work/examples/triton/rmsnorm" .seb/example/examples/triton/
echo ".seb: SOL-ExecBench $(git --git-dir="$snapshot" rev-parse --short HEAD), $(du -sh .seb | cut -f1)"
