#!/usr/bin/env bash
# Installs a pinned CUDA 13.0 nvcc from the CUDA wheels on the Python package index, for building
# kernels/*.cu on machines without a CUDA toolkit (the dev/CI machines), and nvdisasm beside it, for
# the checks of the kernels' SASS (tests/sass.rs). No GPU or driver is needed.
#
# Usage:   scripts/install-cuda.sh            (install if needed, verify, print the nvcc path)
#          NVCC="$(scripts/install-cuda.sh)"  (the nvcc path is the last line of stdout)
#
# Environment:
#   KDA_CUDA_PREFIX   where to install (default: $HOME/.cache/kda/cuda-13.0.88)
#   PYTHON            the Python 3 interpreter whose pip installs the wheels (default: python3)
#
# Layout after a successful run:
#   $KDA_CUDA_PREFIX/pkgs/nvidia/cu13/   the wheels' contents: bin/nvcc, bin/nvdisasm, nvvm/,
#                                        include/ (cccl too)
#   $KDA_CUDA_PREFIX/cuda -> pkgs/nvidia/cu13   a CUDA_HOME-like root: bin/nvcc, bin/nvdisasm,
#                                        include/, lib/
#   $KDA_CUDA_PREFIX/.installed          stamp: the pinned wheel list, written after verification
#
# Use $KDA_CUDA_PREFIX/cuda/bin/nvcc as given (NVCC, or CUDA_HOME=$KDA_CUDA_PREFIX/cuda). nvcc finds
# its headers (the runtime's, crt's and cccl's) through its nvcc.profile, relative to the directory
# of the binary: no -I flags are needed. Do NOT symlink the nvcc binary itself elsewhere (its
# profile would then look for headers next to the link); a link to the whole directory is fine.
#
# Every wheel of the compiler is pinned to CUDA 13.0.x, including the ones nvcc depends on: an
# unpinned nvidia-nvvm resolves to the newest release, whose PTX this ptxas (and the CUDA 13.0
# driver) rejects. The one exception is nvdisasm: the index has no 13.0 nvdisasm wheel, and the
# standalone 13.2.51 one (a single binary, nothing shared with the 13.0 wheels) disassembles the
# sm_90 cubins of this nvcc; it only reads what nvcc built, so it cannot change a kernel.
# Idempotent: a second run with the same pins only re-checks `nvcc --version`, `nvdisasm
# --version` and exits.
set -euo pipefail

readonly PINS=(
    nvidia-cuda-nvcc==13.0.88
    nvidia-nvvm==13.0.88
    nvidia-cuda-crt==13.0.88
    nvidia-cuda-runtime==13.0.96
    nvidia-cuda-cccl==13.0.85
    # Not 13.0 (see above): the oldest CUDA 13 nvdisasm on the index.
    nvidia-cuda-nvdisasm==13.2.51
)
readonly EXPECTED_RELEASE="V13.0.88"
readonly EXPECTED_NVDISASM_RELEASE="V13.2.51"

PREFIX="${KDA_CUDA_PREFIX:-$HOME/.cache/kda/cuda-13.0.88}"
PYTHON="${PYTHON:-python3}"
CUDA_ROOT="$PREFIX/cuda"
NVCC="$CUDA_ROOT/bin/nvcc"
NVDISASM="$CUDA_ROOT/bin/nvdisasm"
STAMP="$PREFIX/.installed"

log() { printf 'install-cuda: %s\n' "$*" >&2; }
die() { printf 'install-cuda: error: %s\n' "$*" >&2; exit 1; }

pin_list() { printf '%s\n' "${PINS[@]}"; }

# True when a previous run installed exactly these pins and nvcc and nvdisasm still run as the
# pinned releases.
installed() {
    [[ -f "$STAMP" && -x "$NVCC" && -x "$NVDISASM" ]] || return 1
    [[ "$(cat "$STAMP")" == "$(pin_list)" ]] || return 1
    "$NVCC" --version 2>/dev/null | grep -q "$EXPECTED_RELEASE" || return 1
    "$NVDISASM" --version 2>/dev/null | grep -q "$EXPECTED_NVDISASM_RELEASE"
}

# Compiles a kernel that includes <cuda_bf16.h> to PTX and to a fatbin (which runs ptxas: a
# mismatched nvvm fails here), checks the entry is exported unmangled, and disassembles its sm_90
# cubin with nvdisasm.
verify() {
    local dir
    dir="$(mktemp -d)"
    cat >"$dir/probe.cu" <<'EOF'
#include <cuda_bf16.h>
extern "C" __global__ void kda_install_probe(const __nv_bfloat16* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __bfloat162float(x[i]) * 2.0f + 1.0f;
}
EOF
    "$NVCC" --ptx -arch=sm_90 --fmad=false -O3 "$dir/probe.cu" -o "$dir/probe.ptx" \
        || die "nvcc could not compile a <cuda_bf16.h> kernel to PTX (see above)"
    grep -q '\.entry kda_install_probe(' "$dir/probe.ptx" \
        || die "the probe kernel is missing from the PTX (expected '.entry kda_install_probe(')"
    "$NVCC" --fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
        --fmad=false -O3 "$dir/probe.cu" -o "$dir/probe.fatbin" \
        || die "nvcc could not build a sm_90 fatbin (a ptxas/nvvm version mismatch fails here)"
    [[ -s "$dir/probe.fatbin" ]] || die "nvcc wrote an empty fatbin"
    "$NVCC" --cubin -arch=sm_90 --fmad=false -O3 "$dir/probe.cu" -o "$dir/probe.cubin" \
        || die "nvcc could not build a sm_90 cubin"
    "$NVDISASM" --print-code "$dir/probe.cubin" >"$dir/probe.sass" \
        || die "nvdisasm could not disassemble an sm_90 cubin of this nvcc (see above)"
    grep -q '^kda_install_probe:' "$dir/probe.sass" && grep -q 'EXIT' "$dir/probe.sass" \
        || die "nvdisasm printed no code for the probe kernel (expected 'kda_install_probe:' and EXIT)"
    rm -rf "$dir"
}

mkdir -p "$PREFIX" || die "cannot create $PREFIX (set KDA_CUDA_PREFIX to a writable folder)"

# Serialise concurrent runs on the same prefix (parallel CI jobs, build scripts).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$PREFIX/.lock"
    flock 9
fi

if installed; then
    log "nvcc $EXPECTED_RELEASE and nvdisasm $EXPECTED_NVDISASM_RELEASE already installed in $CUDA_ROOT"
    echo "$NVCC"
    exit 0
fi

command -v "$PYTHON" >/dev/null 2>&1 || die "'$PYTHON' not found: install Python 3 with pip, or set PYTHON"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "'$PYTHON -m pip' does not work: install pip"

log "installing $(pin_list | tr '\n' ' ')into $PREFIX"
staging="$PREFIX/pkgs.partial"
rm -rf "$staging"
# --no-deps with every dependency pinned explicitly: pip's resolver would otherwise pick the newest
# nvidia-nvvm. Binary wheels only; the index is the only thing reached.
PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install \
    --disable-pip-version-check --no-input --quiet \
    --no-deps --only-binary=:all: \
    --target "$staging" \
    "${PINS[@]}" \
    || die "pip could not install the pinned CUDA wheels (is the package index reachable?)"
[[ -x "$staging/nvidia/cu13/bin/nvcc" ]] \
    || die "the wheels did not provide nvidia/cu13/bin/nvcc (unexpected wheel layout)"
[[ -f "$staging/nvidia/cu13/include/cuda_bf16.h" && -e "$staging/nvidia/cu13/include/nv/target" ]] \
    || die "cuda_bf16.h or the cccl headers (nv/target) are missing from the wheels"
[[ -x "$staging/nvidia/cu13/bin/nvdisasm" ]] \
    || die "the nvdisasm wheel did not provide nvidia/cu13/bin/nvdisasm (unexpected wheel layout)"

rm -f "$STAMP"
rm -rf "$PREFIX/pkgs"
mv "$staging" "$PREFIX/pkgs"
ln -sfn "pkgs/nvidia/cu13" "$CUDA_ROOT"

"$NVCC" --version | grep -q "$EXPECTED_RELEASE" \
    || die "$NVCC is not release $EXPECTED_RELEASE: $("$NVCC" --version | tail -n 1)"
"$NVDISASM" --version | grep -q "$EXPECTED_NVDISASM_RELEASE" \
    || die "$NVDISASM is not release $EXPECTED_NVDISASM_RELEASE: $("$NVDISASM" --version | tail -n 1)"
verify
pin_list >"$STAMP"

log "verified: compiles <cuda_bf16.h> kernels to sm_90 PTX and fatbin, and disassembles sm_90 cubins"
log "use NVCC=$NVCC (or CUDA_HOME=$CUDA_ROOT); no extra -I flags are needed; nvdisasm: $NVDISASM"
echo "$NVCC"
