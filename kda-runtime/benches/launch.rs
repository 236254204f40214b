//! The typed launcher against the raw launch of the same trivial kernel (`fill` of one element),
//! in interleaved rounds, on the CPU backend and on the recording backend. The launcher checks the
//! same contract the raw checked launch does, so the goal is typed / raw ≤ 1.05; the unchecked
//! launch is measured too, to show what the check itself costs. The trusted launch
//! (`launch_trusting`, what the launcher of an entry with `safety` conditions calls) is measured
//! against the raw checked launch: it checks the same, and also looks the entry up again to prove
//! the handle is the entry's.
//!
//! `cargo bench -p kda-runtime --bench launch`. The raw positional argument lists below exist only to measure
//! against; model code launches through the generated launchers.

#[path = "support/interleave.rs"]
mod interleave;

use kda_runtime::cpu::CpuBackend;
use kda_runtime::record::RecordingBackend;
use kda_runtime::{DType, GpuBackend, KernelArg, KernelTable, LaunchGeometry, launch_trusting};

#[derive(KernelTable)]
#[kernel_table(manifest = "benches/kernels.toml")]
struct Model;

use model as table;

const ROUNDS: usize = 200;
const CALLS: usize = 2_000;

fn main() {
    // `fill` as the CPU reference computes it; the table's other entries, which the launches
    // never reach, do nothing.
    let cpu =
        ModelKernels::ENTRIES.iter().fold(CpuBackend::new(), |gpu, entry| gpu.with_kernel(entry, |_| Ok(())));
    let cpu = cpu.with_kernel(table::fill::ENTRY, |mut args| {
        let (n, value) = (args.u32(1)? as usize, args.f32(2)?);
        args.mut_f32(0)?[..n].fill(value);
        Ok(())
    });
    bench("CPU backend", &cpu);
    // The recording backend records every launch; both sides pay for the record alike.
    let recording = RecordingBackend::new().with_table::<Model>();
    bench("recording backend", &recording);
}

fn bench(backend: &str, gpu: &dyn GpuBackend) {
    let kernels = ModelKernels::resolve(gpu).unwrap();
    let geometry = LaunchGeometry::linear(1, 256);
    let mut typed_dst = gpu.alloc(DType::F32, 1).unwrap();
    let mut raw_dst = gpu.alloc(DType::F32, 1).unwrap();
    let mut unchecked_dst = gpu.alloc(DType::F32, 1).unwrap();
    let mut trusted_dst = gpu.alloc(DType::F32, 1).unwrap();
    let mut typed = || {
        let args = table::fill { dst: typed_dst.view_mut().into(), n: 1, value: 1.0 };
        kernels.launch_fill(gpu, geometry, args).unwrap()
    };
    let mut raw = || {
        let args =
            &mut [KernelArg::Write(raw_dst.view_mut()), KernelArg::from(1u32), KernelArg::from(1.0f32)];
        gpu.launch(kernels.fill, geometry, args).unwrap()
    };
    interleave::compare(ROUNDS, CALLS, &mut typed, &mut raw).report(
        &format!("fill of one element, {backend}"),
        "typed launcher",
        "raw checked launch",
    );
    let mut unchecked = || {
        let args =
            &mut [KernelArg::Write(unchecked_dst.view_mut()), KernelArg::from(1u32), KernelArg::from(1.0f32)];
        // SAFETY: these are `fill`'s parameters in order (`f32 dst[n], u32 n, f32 value`), the
        // view holds n = 1 element, and the host backends run nothing natively.
        unsafe { gpu.launch_unchecked(kernels.fill, geometry, args) }.unwrap()
    };
    interleave::compare(ROUNDS, CALLS, &mut typed, &mut unchecked).report(
        &format!("fill of one element, {backend}"),
        "typed launcher",
        "unchecked launch",
    );
    let mut trusted = || {
        let args =
            &mut [KernelArg::Write(trusted_dst.view_mut()), KernelArg::from(1u32), KernelArg::from(1.0f32)];
        // SAFETY: `fill` has no `safety` conditions, so there is nothing for the caller to
        // guarantee.
        unsafe { launch_trusting(gpu, table::fill::ENTRY, kernels.fill, geometry, args) }.unwrap()
    };
    interleave::compare(ROUNDS, CALLS, &mut trusted, &mut raw).report(
        &format!("fill of one element, {backend}"),
        "trusted launch",
        "raw checked launch",
    );
}
