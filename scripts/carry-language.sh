#!/usr/bin/env bash
# Carry a kernel language's Python packages to the GPU machine, which has no package registry and takes at most
# 64 MiB per call. Two halves:
#
#   here:   scripts/carry-language.sh pack LANG      wheels for Python 3.12 / x86-64 into .carry/LANG/, one tar
#                                                    split into parts of at most 51 MiB (CARRY_PART_MIB) (the working tree travels
#                                                    beside them): .carry/LANG.part-00, -01, ...
#   there:  scripts/carry-language.sh unpack LANG    appends the part(s) carried in this call to
#                                                    /opt/solbench-carry/LANG.tar (files outside the repository stay
#                                                    between calls of one lease); once every part is there, installs
#                                                    the wheels into /opt/solbench-lang/LANG, a folder of its own
#
# Send one part per call, back to back within one lease (carry: [".carry/LANG.part-00"], then -01, ...), each call
# running `scripts/carry-language.sh unpack LANG`; the last call installs. A lease that ends in between loses the
# parts: start again. Each language has its own folder because TileLang and TVM TIRx pin different
# apache-tvm-ffi versions; an evaluation in LANG runs with SOLBENCH_EXTRA_PATH=/opt/solbench-lang/LANG.
# docs/GPU.md describes the procedure.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?pack or unpack}; lang=${2:?language}
declare -A PACKAGES=(
  [cute_dsl]="nvidia-cutlass-dsl"
  [tilelang]="tilelang apache-tvm-ffi<0.1.13 z3-solver"
  [tvm_tirx]="apache-tvm==0.25.0.post1"
  [cutile]="cuda-tile"
  [cutlass]="nvidia-cutlass"
  [cudnn_frontend]="nvidia-cudnn-frontend"
)
[ -n "${PACKAGES[$lang]:-}" ] || { echo "unknown language $lang (known: ${!PACKAGES[*]})" >&2; exit 2; }
case "$mode" in
  pack)
    rm -rf ".carry/$lang" ".carry/$lang.part-"*
    mkdir -p ".carry/$lang"
    grep -qx '/.carry/' .git/info/exclude 2>/dev/null || echo '/.carry/' >> .git/info/exclude
    # shellcheck disable=SC2086
    python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d ".carry/$lang" ${PACKAGES[$lang]}
    # what the GPU machine's image already holds (torch, numpy, ...) stays out: it would shadow the image's builds
    for skip in torch- numpy- typing_extensions- triton- sympy- networkx- jinja2- filelock- fsspec- mpmath- \
                markupsafe- nvidia_cublas nvidia_cuda_ nvidia_cudnn_cu nvidia_cufft nvidia_cufile nvidia_curand \
                nvidia_cusolver nvidia_cusparse nvidia_nccl nvidia_nvjitlink nvidia_nvshmem nvidia_nvtx; do
      rm -f ".carry/$lang/${skip}"*.whl
    done
    tar -C .carry -cf ".carry/$lang.tar" "$lang"
    split -b "${CARRY_PART_MIB:-51}m" -d -a 2 ".carry/$lang.tar" ".carry/$lang.part-"
    rm -f ".carry/$lang.tar"
    ls -l ".carry/$lang.part-"* | awk '{print $5, $9}'
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
    expected=$(ls "$store/$lang".part-* 2>/dev/null | wc -l)
    cat "$store/$lang".part-* > "$store/$lang.tar"
    if tar -tf "$store/$lang.tar" >/dev/null 2>&1; then
      rm -rf "$store/$lang" && tar -C "$store" -xf "$store/$lang.tar"
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$target" \
        "$store/$lang"/*.whl
      echo "installed $lang into $target ($expected parts): run with SOLBENCH_EXTRA_PATH=$target PYTHONPATH=$target"
    else
      echo "$expected part(s) of $lang here; the archive is not complete yet: carry the next part"
    fi
    ;;
  *) echo "mode must be pack or unpack" >&2; exit 2 ;;
esac
