//! An engine on cudarc calling its own CUDA kernels through kda: the engine makes its context, a
//! stream and its memory as it always does, and kda's backend launches on that stream, on those
//! slices, owning none of them. The kernels are listed in `kernels.toml`; the launchers take the
//! engine's `CudaSlice`s and views as typed arguments and check every launch before it reaches the
//! device.
//!
//! `cargo run -p kda-example-cudarc-interop` runs it; where there is no GPU it says why and exits
//! 0, unless `--require-gpu` is given, which makes that an error.

use std::error::Error;
use std::process::ExitCode;

use kda_runtime::cuda::CudaBackend;
use kda_runtime::cudarc::driver::CudaContext;
use kda_runtime::{KernelTable, LaunchGeometry};

use compiled::defines::BLOCK;

/// The engine's kernels (table `[interop]` of `kernels.toml`): the derive generates
/// `InteropKernels`, the argument structs in `interop` and a `launch_<field>` per kernel.
#[derive(KernelTable)]
struct Interop;

mod compiled {
    kda_runtime::include_kernels!();
}

/// Elements in each of the engine's slices.
const N: u32 = 1 << 20;

fn main() -> ExitCode {
    let require_gpu = match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => false,
        [flag] if flag == "--require-gpu" => true,
        _ => {
            eprintln!("usage: kda-example-cudarc-interop [--require-gpu]");
            return ExitCode::from(2);
        }
    };
    // cudarc opens libcuda on its first driver call and panics where it cannot: kda's device count
    // says why first, as an `Err`.
    match CudaBackend::device_count() {
        Ok(count) if count > 0 => {}
        found => {
            let why = match found {
                Err(unavailable) => unavailable.to_string(),
                Ok(_) => "CUDA is unavailable: the driver reports no CUDA device".to_owned(),
            };
            if require_gpu {
                eprintln!("error: {why}");
                return ExitCode::FAILURE;
            }
            println!("not run: {why}");
            return ExitCode::SUCCESS;
        }
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The engine's side, then kda's launches on it, the result checked on the host, and a launch kda
/// refuses.
fn run() -> Result<(), Box<dyn Error>> {
    // The engine: its context, a stream of its own, its memory on that stream.
    let context = CudaContext::new(0)?;
    let stream = context.new_stream()?;
    // Small integers and halves, so that every result below is exact in f32 (with or without a
    // fused multiply-add) and the check can ask for equality.
    let x_host: Vec<f32> = (0..N).map(|i| (i % 1024) as f32 * 0.5).collect();
    let y_host: Vec<f32> = (0..N).map(|i| 1.0 - (i % 512) as f32).collect();
    let x = stream.clone_htod(&x_host)?;
    let mut y = stream.clone_htod(&y_host)?;

    // kda: a backend over the engine's stream (no context of its own), the table resolved once.
    let gpu = CudaBackend::on_stream(stream.clone(), &[&compiled::KERNEL_IMAGES])?;
    let kernels = Interop::resolve(&gpu)?;
    let (major, minor) = gpu.compute_capability();
    println!("resolved the table on device 0 (sm_{major}{minor})");

    // y += 3·x over the whole slices, then the first half of y doubled through a view of it.
    let (a, factor, half) = (3.0, 2.0, N / 2);
    kernels.launch_axpy(
        &gpu,
        LaunchGeometry::linear(N, BLOCK),
        interop::axpy { x: (&x).into(), y: (&mut y).into(), n: N, a },
    )?;
    let mut head = y.slice_mut(..half as usize);
    kernels.launch_scale(
        &gpu,
        LaunchGeometry::linear(half, BLOCK),
        interop::scale { x: (&mut head).into(), n: half, factor },
    )?;

    // The engine reads the result back on its stream, which orders it after kda's launches.
    let result = stream.clone_dtoh(&y)?;
    let expected = (0..N as usize).map(|i| {
        let sum = y_host[i] + a * x_host[i];
        if i < half as usize { sum * factor } else { sum }
    });
    if let Some((i, (found, expected))) =
        result.iter().zip(expected).enumerate().find(|(_, (found, expected))| **found != *expected)
    {
        return Err(format!("y[{i}] is {found}, the host computes {expected}").into());
    }
    println!("axpy then scale on the engine's slices: all {N} elements match the host");

    // A slice one element short of the `n` the launch states: kda refuses before the device sees it.
    let short = stream.alloc_zeros::<f32>(N as usize - 1)?;
    let refusal = kernels.launch_axpy(
        &gpu,
        LaunchGeometry::linear(N, BLOCK),
        interop::axpy { x: (&short).into(), y: (&mut y).into(), n: N, a },
    );
    match refusal {
        Err(refusal) => println!("a slice one element short, refused: {refusal}"),
        Ok(()) => return Err("a launch with `x` one element short was accepted".into()),
    }
    Ok(())
}
