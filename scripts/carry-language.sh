#!/usr/bin/env bash
# Carry a kernel language's Python packages to the GPU machine, which has no package registry and takes at most
# 64 MiB per call. Two halves:
#
#   here:   scripts/carry-language.sh pack LANG      downloads the wheels for Python 3.12 / x86-64, installs them
#                                                    into a folder (.carry/LANG/tree, pip --target, no byte code),
#                                                    compresses that folder with xz (installed files shrink to about
#                                                    a fifth; wheels, already zipped, barely do) and splits it into
#                                                    parts of at most 51 MiB (CARRY_PART_MIB), so that a part, the
#                                                    working tree and .whl fit in one call: .carry/LANG.part-00, ...
#   there:  scripts/carry-language.sh unpack LANG    keeps the part(s) carried in this call in /opt/solbench-carry
#                                                    (files outside the repository stay between calls of one lease);
#                                                    once the parts make a whole xz stream, unpacks it into
#                                                    /opt/solbench-lang/LANG, a folder of its own (no pip needed)
#
# Send the parts in calls back to back within one lease (carry: [".carry/LANG.part-00"], then -01, ...; parts of
# several languages may share a call while its files stay under 64 MiB), each call running
# `scripts/carry-language.sh unpack LANG`; the call that completes the stream unpacks. A lease that ends in between
# loses the parts: start again. Each language has its own folder because TileLang's fork of TVM would shadow
# apache-tvm's; scripts/gpu-check.sh sets SOLBENCH_LANG_ROOT, and a solution's candidate gets its own language's
# folder on the path, no other (evaluate/languages/packages.py). docs/GPU.md describes it.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?pack or unpack}; lang=${2:?language}
declare -A PACKAGES=(
  [cute_dsl]="nvidia-cutlass-dsl"
  [tilelang]="tilelang apache-tvm-ffi<0.1.13 z3-solver"
  [tvm_tirx]="apache-tvm[cuda]==0.25.0.post1 apache-tvm-ffi<0.1.13"
  [cutile]="cuda-tile"
  [cutlass]="nvidia-cutlass"
  [cudnn_frontend]="nvidia-cudnn-frontend"
)
# what travels without its dependencies: for CUDA C++ with CUTLASS only the headers in nvidia-cutlass count, not
# its Python interface's scipy and cuda-python
declare -A NO_DEPS=([cutlass]=1)
[ -n "${PACKAGES[$lang]:-}" ] || { echo "unknown language $lang (known: ${!PACKAGES[*]})" >&2; exit 2; }
case "$mode" in
  pack)
    rm -rf ".carry/$lang" ".carry/$lang.part-"*
    mkdir -p ".carry/$lang/wheels"
    grep -qx '/.carry/' .git/info/exclude 2>/dev/null || echo '/.carry/' >> .git/info/exclude
    platforms=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
               --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
               --platform manylinux2014_x86_64)
    # shellcheck disable=SC2086
    python3 -m pip download -q "${platforms[@]}" ${NO_DEPS[$lang]:+--no-deps} -d ".carry/$lang/wheels" ${PACKAGES[$lang]}
    # what the GPU machine's image already holds (torch, numpy, ...) stays out: it would shadow the image's builds
    for skip in torch- numpy- typing_extensions- triton- sympy- networkx- jinja2- filelock- fsspec- mpmath- \
                markupsafe- nvidia_cublas nvidia_cuda_ nvidia_cudnn_cu nvidia_cufft nvidia_cufile nvidia_curand \
                nvidia_cusolver nvidia_cusparse nvidia_nccl nvidia_nvjitlink nvidia_nvshmem nvidia_nvtx; do
      rm -f ".carry/$lang/wheels/${skip}"*.whl
    done
    python3 -m pip install -q --no-index --no-deps --no-compile --ignore-requires-python "${platforms[@]}" --target ".carry/$lang/tree" \
      ".carry/$lang/wheels"/*.whl
    rm -rf ".carry/$lang/tree/bin"  # console scripts with this machine's interpreter in their first line
    tar -C ".carry/$lang/tree" -cf - . | xz -T0 -6 | split -b "${CARRY_PART_MIB:-51}m" -d -a 2 - ".carry/$lang.part-"
    du -sh ".carry/$lang/wheels" ".carry/$lang/tree" | sed 's/^/  /'
    ls -l ".carry/$lang.part-"* | awk '{print "  " $5, $9}'
    echo "carry each part in its own call, in order, each running: scripts/carry-language.sh unpack $lang"
    ;;
  unpack)
    store=${CARRY_STORE:-/opt/solbench-carry}; target=${CARRY_TARGET:-/opt/solbench-lang}/$lang
    mkdir -p "$store"
    for part in .carry/"$lang".part-*; do
      [ -f "$part" ] || continue
      name=$(basename "$part")
      [ -f "$store/$name" ] || cp "$part" "$store/$name"
    done
    have=$(ls "$store/$lang".part-* 2>/dev/null | wc -l)
    [ "$have" -gt 0 ] || { echo "no part of $lang here: carry .carry/$lang.part-00" >&2; exit 2; }
    # a stream cut short fails xz's decoding: more parts are to come
    rm -rf "$target.new" && mkdir -p "$target.new"
    if cat "$store/$lang".part-* | xz -d 2>/dev/null | tar -C "$target.new" -xf - 2>/dev/null; then
      rm -rf "$target" && mv "$target.new" "$target"
      echo "unpacked $lang into $target ($have part(s), $(du -sh "$target" | cut -f1))"
    else
      rm -rf "$target.new"
      echo "$have part(s) of $lang here; the stream is not complete yet: carry the next part"
    fi
    ;;
  *) echo "mode must be pack or unpack" >&2; exit 2 ;;
esac
