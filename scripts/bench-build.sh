#!/usr/bin/env bash
# Benchmarks the kernel build: the build step alone (kda-build's build_timing example, on a copy
# of kernels/), then `cargo build --release` of this crate after the same edits to the real tree,
# each against the full kernel build of the same run. Edits are comments, undone on exit.
#
# Usage: scripts/bench-build.sh     (needs nvcc: NVCC, CUDA_HOME, or scripts/install-cuda.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
export NVCC="${NVCC:-$(bash scripts/install-cuda.sh | tail -n 1)}"

echo "== the build step alone"
cargo run -q --release -p kda-build --example build_timing -- \
    kernels.toml kernels norm.cu kda_common.cuh

echo "== cargo build --release -p kda"
edited=(kernels/norm.cu kernels/kda_common.cuh)
for file in "${edited[@]}"; do cp "$file" "$file.bench-orig"; done
restore() { for file in "${edited[@]}"; do mv -f "$file.bench-orig" "$file"; done; }
trap restore EXIT
seconds() { local start end; start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N); echo "$end - $start" | bc; }
cargo build -q --release -p kda
# Every module's cache record is keyed on the targets: building for others and back again makes
# the second build a full kernel build.
CUDA_COMPUTE_CAP=80 cargo build -q --release -p kda
full=$(seconds cargo build --release -p kda)
printf '%-30s %7.2f s\n' "full kernel build" "$full"
for file in "${edited[@]}"; do
    printf '\n// edited\n' >> "$file"
    took=$(seconds cargo build --release -p kda)
    printf '%-30s %7.2f s  %5.1f %% of the full build\n' "after editing ${file#kernels/}" "$took" \
        "$(echo "100 * $took / $full" | bc -l)"
done
