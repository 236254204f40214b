#!/usr/bin/env python3
"""Times a public chunked KDA forward, `chunk_kda` of flash-linear-attention (the `fla-core`
package, Triton kernels), at one `glm5-flash` layer's prefill: the baseline that kda's chunk pair
(`chunk_prepare` + `chunk_scan`, timed by `kda-block bench` in the same GPU check) is held against.

The work is the same: per-channel log-decay gates (bounded, as `glm5-flash`'s gate law gives
them), a state carried in and out, q and k already L2-normalised. Each configuration is called
twice to compile and autotune, then timed with CUDA events; the median is printed with the bytes
its inputs, outputs and states take and the rate that gives. Where it cannot run (no PyTorch, no
fla, no device) it says why and exits 0: the baseline is not part of what the check checks.

Needs PyTorch and Triton (the GPU machine's image has both) and `fla-core` on PYTHONPATH
(`scripts/gpu-check.sh` installs the wheel its `--build` fetched). Usage:
    fla_kda_baseline.py [--tokens T] [--heads H] [--head-dim D] [--iterations N]
"""

import argparse
import statistics
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--lower-bound", type=float, default=-5.0, help="the bounded gate's floor (log space)")
    args = parser.parse_args()

    try:
        import torch
        from fla.ops.kda import chunk_kda
    except ImportError as error:
        print(f"fla baseline: not run: {error}")
        return 0
    if not torch.cuda.is_available():
        print("fla baseline: not run: no CUDA device for PyTorch")
        return 0
    import fla

    t, h, d = args.tokens, args.heads, args.head_dim
    print(f"fla baseline: fla-core {fla.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"chunk_kda forward, B = 1, T = {t}, H = {h}, K = V = {d}, state in and out (f32), bounded gates")
    generator = torch.Generator(device="cuda").manual_seed(0)

    def normal(*shape, dtype):
        return torch.randn(*shape, device="cuda", dtype=torch.float32, generator=generator).to(dtype)

    for dtype, safe_gate in [(torch.bfloat16, True), (torch.bfloat16, False), (torch.float32, True)]:
        q = torch.nn.functional.normalize(normal(1, t, h, d, dtype=torch.float32), dim=-1).to(dtype)
        k = torch.nn.functional.normalize(normal(1, t, h, d, dtype=torch.float32), dim=-1).to(dtype)
        v = normal(1, t, h, d, dtype=dtype)
        # The bounded law's range [lower_bound, 0): lower_bound * sigmoid(x).
        g = args.lower_bound * torch.sigmoid(normal(1, t, h, d, dtype=torch.float32))
        beta = torch.sigmoid(normal(1, t, h, dtype=torch.float32)).to(dtype)
        h0 = normal(1, h, d, d, dtype=torch.float32)

        def call():
            return chunk_kda(
                q, k, v, g, beta,
                scale=d ** -0.5,
                initial_state=h0,
                output_final_state=True,
                safe_gate=safe_gate,
                lower_bound=args.lower_bound if safe_gate else None,
            )

        name = f"{str(dtype).removeprefix('torch.')} q/k/v, safe_gate={safe_gate}"
        try:
            with torch.inference_mode():
                for _ in range(2):
                    call()
                torch.cuda.synchronize()
                times = []
                for _ in range(args.iterations):
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    call()
                    stop.record()
                    stop.synchronize()
                    times.append(start.elapsed_time(stop) * 1000.0)
        except Exception as error:  # a configuration this fla or device does not support
            print(f"  {name}: failed: {type(error).__name__}: {error}")
            continue
        size = q.element_size()
        # q, k, v read and o written in the input type; gates f32, beta; states f32 in and out.
        moved = 4 * t * h * d * size + t * h * d * 4 + t * h * beta.element_size() + 2 * h * d * d * 4
        median = statistics.median(times)
        print(
            f"  {name}: median {median:,.1f} µs of {len(times)} (min {min(times):,.1f}), "
            f"{moved / 1e6:,.1f} MB of inputs, outputs and states: {moved / median / 1e3:,.0f} GB/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
