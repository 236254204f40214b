#!/usr/bin/env bash
# The project's GPU checks: built where Rust and nvcc are, run on a machine with a CUDA GPU and no
# Rust toolchain.
#
# Usage:
#   scripts/gpu-check.sh --build   Here (Rust, nvcc): builds the test binaries and the `kda-block` binary
#                                  with `--release --no-default-features --features cuda` (no
#                                  emulation: its libraries stay in this checkout's target/) and
#                                  KDA_REQUIRE_NVCC=1, and copies
#                                  them into gpu-check/bin/ (ignored by git; carry `gpu-check` to the
#                                  GPU machine). nvcc: $NVCC, else `nvcc` on PATH, else the project's
#                                  pinned one (scripts/install-cuda.sh).
#                                  It also builds the two engine examples: examples/cudarc-interop's
#                                  binary, and examples/candle-op's tests into gpu-check/bin/candle/,
#                                  xz-compressed (candle embeds its kernels' PTX: 64 MB a binary,
#                                  2 MB packed). candle links CUDA's libraries at build time: it
#                                  links stand-ins with their sonames here (cuda_link_stubs), and
#                                  the GPU machine's own libraries at run time.
#                                  It also fetches the pinned `fla-core` wheel (a public chunked KDA
#                                  in Triton) into gpu-check/wheels/ for the baseline below; without
#                                  pip or the index the baseline is left out, with a warning.
#   scripts/gpu-check.sh           On the GPU machine, from a copy of the repo that holds gpu-check/:
#                                  nvidia-smi (if present); the GPU parity tests (tests/gpu.rs, with
#                                  a one-rank NCCL all-reduce: libnccl.so, else PyTorch's nvidia-nccl
#                                  wheel, linked onto LD_LIBRARY_PATH);
#                                  `kda-block --backend cuda` on the default preset and on glm5-flash, and
#                                  batched at glm5-flash; `kda-block bench --backend cuda`; the
#                                  engine examples (cudarc-interop `--require-gpu`, candle-op's
#                                  tests, unpacked into a temporary folder, with the CUDA libraries
#                                  of PyTorch's nvidia wheels on LD_LIBRARY_PATH where the loader
#                                  lacks them); then, where the
#                                  machine has them, fla-core's `chunk_kda` timed at the same layer
#                                  (scripts/fla_kda_baseline.py, PyTorch's python3), Nsight Compute's
#                                  speed of light and occupancy of every kda launch of one bench run
#                                  (CSV in ${OUT:-gpu-check}/ncu-details.csv), and compute-sanitizer's
#                                  memcheck and racecheck over the small parity cases; then every
#                                  other copied test binary (the CPU suite). Tests run with
#                                  `--include-ignored --test-threads=1 --nocapture`.
#                                  Runs them all, tees everything into ${OUT:-gpu-check}/gpu-check.log,
#                                  then exits 1 if any of them failed.
#
# Environment (run mode): OUT (where the log goes), GPU_CHECK_STEP_TIMEOUT (seconds per step,
# default 600; the baseline, the profile and each sanitizer take at most 180, 150 and 90, so that
# what needs the GPU fits a 600-second call; the CPU suite, which CI runs as well, comes last).
#
# Left out of the copied tests, each for a reason the run machine cannot meet:
#   kda-macros--compiletest  trybuild: runs cargo and rustc on kda-macros/tests/ui
#   kda-build--cuda_build  runs nvcc on fixtures it finds through its compile-time source path
#   kda-build--manifest    reads kernels.toml through its compile-time source path
#   kda-build--front_end   runs cargo and nvcc on a crate it writes
#   kda--layout            reads the build's PTX from its compile-time OUT_DIR
#   kda--sass              runs nvcc and nvdisasm on kernels/ through its compile-time path
#   kda-build--fuzz_manifest  writes manifests under its compile-time CARGO_TARGET_TMPDIR
#   kda-cli--fuzz_list     runs the kda binary through its compile-time path
#   kda-cli--list_pipe     the same
#   kda-cli--list_manifest the same
#   kda--main_job          runs the kda-block binary through its compile-time path
#   kda--readme            reads README.md and the manifests through its compile-time source path
#   kda-build--lib         reads scripts/install-cuda.sh through its compile-time source path
#   kda-example--emulated  loads the example's emulated libraries from its compile-time OUT_DIR
#   kda--quick_start       runs cargo on a model crate it writes
#   kda-cli--census        runs the kda binary on a fixture library through its compile-time paths
#   kda-emu--device_api    builds fixture kernels from its compile-time source path
#   kda-emu--planted_overruns  the same
#   kda-example-library--planted  builds the library's kernels from its compile-time source path
#   kda-example-cudarc-interop--runs  runs the example binary through its compile-time path (the
#                          check runs that binary itself, `--require-gpu`)
#   kda-macros--lib        a proc-macro crate's tests link the toolchain's libstd-*.so
# `--build` fails if any copied binary still holds this checkout's absolute path (on the GPU
# machine the repo is a copy at another path, so such a binary would read files that are not
# there) or links the toolchain's libstd-*.so (there is no toolchain there).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="gpu-check/bin"
WHEELS="gpu-check/wheels"
# The public chunked KDA the baseline times: pure Python and Triton, its one other need (einops)
# on the GPU machine's image.
FLA_CORE="fla-core==0.6.0"
EXCLUDED=(kda-macros--compiletest kda--layout kda--sass kda-build--fuzz_manifest kda-build--cuda_build kda-build--front_end kda-build--manifest kda-cli--fuzz_list kda-cli--list_pipe kda-cli--list_manifest kda-cli--emulate kda--main_job kda--readme kda-build--lib kda-example--emulated kda--quick_start kda-cli--census kda-emu--device_api kda-emu--planted_overruns kda-example-library--planted kda-example-cudarc-interop--runs kda-emu--emulator kda-macros--lib)

usage() {
    sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

build() {
    set -e
    cd "$ROOT"
    export KDA_REQUIRE_NVCC=1
    if [[ -z "${NVCC:-}" ]] && ! command -v nvcc >/dev/null; then
        NVCC="$(scripts/install-cuda.sh | tail -n 1)"
        export NVCC
    fi
    echo "gpu-check --build: nvcc ${NVCC:-$(command -v nvcc)}"

    JSON="$(mktemp)"
    trap 'rm -f "$JSON"' EXIT
    # `nccl`: tests/gpu.rs's one-rank all-reduce (libnccl is opened at run time).
    cargo test --release --workspace --no-default-features --features cuda,app,nccl --no-run --message-format=json >"$JSON"
    cargo build --release --no-default-features --features cuda,app --bin kda-block
    cargo build --release -p kda-example-cudarc-interop

    rm -rf "$BIN"
    mkdir -p "$BIN/tests" "$BIN/candle"
    copy_tests "$JSON" "$BIN/tests"
    cp target/release/kda-block "$BIN/kda-block"
    cp target/release/kda-example-cudarc-interop "$BIN/cudarc-interop"
    # The candle example: its own workspace and lock file, built in a folder of this target. candle's
    # kernels build for the cap CUDA_COMPUTE_CAP names (sm_90: the H100 and H200), and the checkout's
    # path is remapped in what the binaries embed (kda's sources, outside that workspace, are
    # named by absolute path).
    # candle's own kernels build unoptimized (as CI checks them): its tests only compare with them.
    local stubs="$ROOT/target/cuda-link-stubs"
    if ! cuda_link_stubs "$stubs"; then
        echo "warning: no link-time CUDA libraries for examples/candle-op (see cuda_link_stubs): the GPU" \
            "check leaves its tests out" >&2
    elif (cd examples/candle-op && PATH="$(dirname "${NVCC:-$(command -v nvcc)}"):$PATH" \
        CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}" NVCC_APPEND_FLAGS="-Xcicc -O0 -Xptxas -O0" \
        RUSTFLAGS="--remap-path-prefix=$ROOT=kda -L native=$stubs" \
        cargo test --release --locked --no-run --target-dir "$ROOT/target/candle-op" \
        --message-format=json >"$JSON"); then
        copy_tests "$JSON" "$BIN/candle"
    else
        echo "warning: examples/candle-op's tests did not build: the GPU check leaves them out" >&2
    fi
    rm -rf "$WHEELS"
    if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$WHEELS" "$FLA_CORE"; then
        echo "warning: could not fetch $FLA_CORE: the GPU check will leave out the fla baseline" >&2
    fi
    strip "$BIN"/kda-block "$BIN"/cudarc-interop "$BIN"/tests/* "$BIN"/candle/* 2>/dev/null || true

    local unfit=()
    for binary in "$BIN"/kda-block "$BIN"/cudarc-interop "$BIN"/tests/* "$BIN"/candle/*; do
        if grep -qaF "$ROOT" "$binary"; then
            unfit+=("$binary: holds the checkout's path $ROOT")
        fi
        if grep -qa 'libstd-[0-9a-f]*\.so' "$binary"; then
            unfit+=("$binary: links the toolchain's libstd")
        fi
    done
    if ((${#unfit[@]})); then
        echo "error: binaries that cannot run on the GPU machine (add them to EXCLUDED, or fix them):" >&2
        printf '  %s\n' "${unfit[@]}" >&2
        exit 1
    fi
    if compgen -G "$BIN/candle/*" >/dev/null; then
        xz -T0 "$BIN"/candle/*
    fi
    echo "gpu-check --build: $(du -sh gpu-check | cut -f1) in gpu-check/ ($(find "$BIN" -type f | wc -l) binaries)"
    echo "next: on the GPU machine, from the repo root with gpu-check/ carried: scripts/gpu-check.sh"
}

# Link-time stand-ins, in folder $1, for the CUDA libraries candle links (cudarc's
# `dynamic-linking`: the driver, NVRTC, cuBLAS, cuBLASLt, cuRAND) where the pinned toolkit has only
# nvcc and the runtime. Each is a shared library with the real one's soname (CUDA 13's) defining
# every function cudarc's bindings of it load (`void f(void) {}`: nothing here calls them), so a
# binary links, records the real sonames, and binds the real libraries on the GPU machine, as
# linking against the toolkit's own `stubs/libcuda.so` does. The runtime (candle-kernels' `cudart`)
# is the toolkit's own, linked under its link name.
cuda_link_stubs() {
    local dir="$1" root cudarc spec module name soname
    root="$(dirname "$(dirname "${NVCC:-$(command -v nvcc)}")")"
    cudarc="$(cd examples/candle-op && cargo metadata --locked --format-version 1 | python3 -c \
        'import json, sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "cudarc"))')" \
        || return 1
    cudarc="$(dirname "$cudarc")/src"
    rm -rf "$dir" && mkdir -p "$dir" || return 1
    for spec in driver:cuda:libcuda.so.1 nvrtc:nvrtc:libnvrtc.so.13 cublas:cublas:libcublas.so.13 \
        cublaslt:cublasLt:libcublasLt.so.13 curand:curand:libcurand.so.10; do
        IFS=: read -r module name soname <<<"$spec"
        sed -n 's/.*load::<_F>("\([A-Za-z0-9_]*\)").*/void \1(void) {}/p' "$cudarc/$module/sys/mod.rs" \
            | sort -u >"$dir/$name.c"
        [[ -s "$dir/$name.c" ]] || return 1
        cc -shared -fPIC -Wl,-soname,"$soname" -o "$dir/lib$name.so" "$dir/$name.c" || return 1
    done
    local runtime
    runtime="$(find "$root/lib" "$root/lib64" -maxdepth 1 -name 'libcudart.so*' 2>/dev/null | head -n 1)"
    [[ -n "$runtime" ]] && ln -s "$runtime" "$dir/libcudart.so"
}

# Copies each test executable of cargo's JSON messages in file $1 into folder $2 as
# <package>--<lib | bin-NAME | test NAME>, less the excluded ones.
copy_tests() {
    python3 - "$1" "$2" "${EXCLUDED[@]}" <<'PY'
import json, shutil, sys

json_path, dest, excluded = sys.argv[1], sys.argv[2], set(sys.argv[3:])
copied = []
for line in open(json_path):
    message = json.loads(line)
    if message.get("reason") != "compiler-artifact" or not message.get("executable"):
        continue
    if not message["profile"]["test"]:
        continue
    # package_id: "path+file:///…/dir#name@version", or "…/name#version" when the two agree.
    location, _, version = message["package_id"].partition("#")
    package = version.split("@")[0] if "@" in version else location.rstrip("/").split("/")[-1]
    target = message["target"]
    kind = target["kind"][0]
    # A package's unit tests are "lib" (library) or "bin-NAME"; an integration test is its name.
    what = {"lib": "lib", "proc-macro": "lib", "bin": f"bin-{target['name']}"}.get(kind, target["name"])
    name = f"{package}--{what}"
    if name in excluded:
        print(f"  left out {name}")
        continue
    shutil.copy2(message["executable"], f"{dest}/{name}")
    copied.append(name)
if not copied:
    sys.exit("no test executable in cargo's output")
for name in sorted(copied):
    print(f"  copied {name}")
PY
}

run() {
    cd "$ROOT"
    if [[ ! -x "$BIN/kda-block" ]] || ! compgen -G "$BIN/tests/*" >/dev/null; then
        echo "error: no binaries in $BIN: run scripts/gpu-check.sh --build first (where Rust and nvcc" \
            "are), then bring gpu-check/ along" >&2
        exit 2
    fi
    local out="${OUT:-gpu-check}"
    LIMIT="${GPU_CHECK_STEP_TIMEOUT:-600}"
    mkdir -p "$out"
    # Errors of the kda-block binary print without a backtrace (panics still follow RUST_BACKTRACE).
    export RUST_LIB_BACKTRACE="${RUST_LIB_BACKTRACE:-0}"
    LOG="$out/gpu-check.log"
    : >"$LOG"
    FAILED=()
    local started=$SECONDS

    note "gpu-check: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), $(nproc) CPUs, in $ROOT"
    if command -v nvidia-smi >/dev/null; then
        step nvidia-smi nvidia-smi
    else
        note "nvidia-smi: not on this machine"
    fi
    nccl_on_library_path
    # What needs the GPU first (device time is short): the parity suite, the main job, the bench;
    # then the rest of the suite, which CI also runs without a GPU.
    local gpu_tests="$BIN/tests/kda--gpu"
    [[ -x "$gpu_tests" ]] && step "test kda--gpu" "$gpu_tests" --include-ignored --test-threads=1 --nocapture
    step "kda-block (default preset)" "$BIN/kda-block" --backend cuda
    step "kda-block (glm5-flash)" "$BIN/kda-block" --backend cuda --preset glm5-flash
    # Batched decode: the time of one step of 64 sequences against one step of one.
    for batch in 1 64; do
        step "kda-block (glm5-flash, batch $batch)" "$BIN/kda-block" --backend cuda --preset glm5-flash --prompt 16 --batch "$batch"
    done
    step "kda-block bench" "$BIN/kda-block" bench --backend cuda
    # The engine examples: kda's launches on an engine's context, stream and memory.
    step "cudarc-interop example" "$BIN/cudarc-interop" --require-gpu
    if compgen -G "$BIN/candle/*.xz" >/dev/null; then
        local unpacked packed test libraries path="${LD_LIBRARY_PATH:-}"
        unpacked="$(mktemp -d)"
        libraries="$(cuda_wheel_libraries)"
        if [[ -n "$libraries" ]]; then
            path="$libraries${path:+:$path}"
            note "candle-op example: CUDA libraries of the nvidia wheels in $libraries"
        fi
        for packed in "$BIN"/candle/*.xz; do
            test="$unpacked/$(basename "$packed" .xz)"
            if unpack "$packed" "$test"; then
                # A library the loader cannot find is named before the test fails to start.
                LD_LIBRARY_PATH="$path" ldd "$test" 2>/dev/null | grep 'not found' \
                    | sed "s|^|$(basename "$test") needs|" | tee -a "$LOG"
                LD_LIBRARY_PATH="$path" step "test $(basename "$test")" "$test" --include-ignored \
                    --test-threads=1 --nocapture
            else
                note "$packed: does not unpack here (neither xz nor python3's lzma)"
                FAILED+=("unpack $(basename "$packed")")
            fi
        done
        rm -rf "$unpacked"
    else
        note "candle-op example: its tests were not built (see --build)"
    fi
    # A public chunked KDA at the same layer, beside the chunk pair's times in the bench above.
    if compgen -G "$WHEELS/*.whl" >/dev/null; then
        local site
        site="$(mktemp -d)"
        if PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$WHEELS"/*.whl; then
            PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" STEP_LIMIT=180 step "fla baseline" \
                python3 -u scripts/fla_kda_baseline.py
        else
            note "fla baseline: the wheel does not install here"
        fi
    else
        note "fla baseline: no wheel in $WHEELS (see --build)"
    fi
    # Why each launch takes its time: Nsight Compute on every kda launch of one bench run.
    local ncu
    if ncu="$(tool ncu)"; then
        STEP_LIMIT=150 step "ncu (kda-block bench)" "$ncu" --clock-control none --section SpeedOfLight \
            --section Occupancy --kernel-name "regex:^(kda_|dense_|causal_)" --csv --page details \
            --log-file "$out/ncu-details.csv" "$BIN/kda-block" bench --backend cuda --iterations 1
    else
        note "ncu: not on this machine"
    fi
    # The device's own checkers on the code paths the emulator stands in for (inline PTX, the
    # tensor cores, asynchronous copies, dynamic shared memory), over the small parity cases.
    local sanitizer
    if [[ -x "$gpu_tests" ]] && sanitizer="$(tool compute-sanitizer)"; then
        for check in memcheck racecheck; do
            STEP_LIMIT=90 step "compute-sanitizer $check" "$sanitizer" --tool "$check" --error-exitcode 1 \
                "$gpu_tests" --include-ignored --test-threads=1 every_kernel_matches_the_reference_at_small_geometries
        done
    else
        note "compute-sanitizer: not on this machine"
    fi
    for test in "$BIN"/tests/*; do
        [[ "$test" == "$gpu_tests" ]] && continue
        step "test $(basename "$test")" "$test" --include-ignored --test-threads=1 --nocapture
    done

    note ""
    note "gpu-check: $((SECONDS - started)) s; log in $LOG"
    if ((${#FAILED[@]})); then
        note "gpu-check: FAILED: ${#FAILED[@]} step(s):"
        for failed in "${FAILED[@]}"; do note "  $failed"; done
        exit 1
    fi
    note "gpu-check: every step passed"
}

note() {
    echo "$*" | tee -a "$LOG"
}

# cudarc opens NCCL as `libnccl.so` (or `.so.<CUDA major>`); a pip-installed NCCL (PyTorch's
# nvidia-nccl wheel) has only `libnccl.so.2`. Where the loader finds no `libnccl.so` and that wheel
# is there, a link to it goes first on LD_LIBRARY_PATH, for tests/gpu.rs's one-rank all-reduce.
nccl_on_library_path() {
    ldconfig -p 2>/dev/null | grep -q 'libnccl\.so ' && return 0
    local wheel
    wheel="$(python3 -c 'import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)"
    if [[ -f "$wheel" ]]; then
        local dir
        dir="$(mktemp -d)"
        ln -s "$wheel" "$dir/libnccl.so"
        export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        note "nccl: $wheel, linked as $dir/libnccl.so"
    else
        note "nccl: no libnccl.so on the loader's path and no nvidia-nccl wheel: the all-reduce test will say so"
    fi
}

# The folders of the CUDA libraries in the GPU machine's nvidia wheels (PyTorch's: cuBLAS, NVRTC,
# cuRAND, the runtime), joined by ':', for the candle example's tests, which link them by soname.
cuda_wheel_libraries() {
    python3 - 2>/dev/null <<'PY'
import glob, os
import nvidia
names = ("libcublas.so.", "libcublasLt.so.", "libnvrtc.so.", "libcurand.so.", "libcudart.so.")
folders = set()
for root in nvidia.__path__:
    for library in glob.glob(os.path.join(root, "**", "lib*.so.*"), recursive=True):
        if os.path.basename(library).startswith(names):
            folders.add(os.path.dirname(library))
print(":".join(sorted(folders)))
PY
}

# Unpacks the xz file $1 into the executable $2: with xz, else with python3's lzma.
unpack() {
    if command -v xz >/dev/null; then
        xz -dc "$1" >"$2" || return 1
    else
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            "$1" "$2" 2>/dev/null || return 1
    fi
    chmod +x "$2"
}

# The path of the CUDA tool `name`: on PATH, else where the toolkit or Nsight Compute installs it.
tool() {
    local found
    for found in "$(command -v "$1")" /usr/local/cuda/bin/"$1" /opt/nvidia/nsight-compute/*/"$1"; do
        [[ -n "$found" && -x "$found" ]] && echo "$found" && return 0
    done
    return 1
}

# Runs one step, its output teed into the log; a failure is recorded and the run goes on. Its time
# limit is STEP_LIMIT where the caller sets it, else LIMIT.
step() {
    local name="$1"
    shift
    local limit="${STEP_LIMIT:-$LIMIT}"
    note ""
    note "==> $name: $*"
    local begun=$SECONDS
    if command -v timeout >/dev/null; then
        timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$LOG"
    else
        "$@" 2>&1 | tee -a "$LOG"
    fi
    local status=${PIPESTATUS[0]}
    if ((status == 0)); then
        note "<== $name: ok ($((SECONDS - begun)) s)"
    else
        local why="exit $status"
        ((status == 124 || status == 137)) && why="timed out after $limit s, or killed"
        note "<== $name: FAILED ($why, $((SECONDS - begun)) s)"
        FAILED+=("$name ($why)")
    fi
}

case "${1:-}" in
    --build) build ;;
    "") run ;;
    -h | --help) usage ;;
    *)
        usage >&2
        exit 2
        ;;
esac
