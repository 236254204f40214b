//! Times a crate's three clean emulated builds (plain, AddressSanitizer + UBSan, ThreadSanitizer)
//! with no nvcc, each into a new output directory, and what each compiled.
//!
//! ```text
//! cargo run --release -p kda-build --example emulated_build_timing -- kernels.toml kernels
//! ```
//!
//! The jobs are the cores. Comparing two versions of the build means running this of each side by
//! side, on the same machine, in one sitting.

use std::path::Path;
use std::time::{Duration, Instant};

use kda_build::cuda::KernelBuild;
use kda_build::cuda::emulation::{Emulation, Sanitizer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [manifest, kernels] = args.as_slice() else {
        return Err("usage: emulated_build_timing MANIFEST KERNELS_DIR".into());
    };
    let scratch = std::env::temp_dir().join(format!("kda-emulated-timing-{}", std::process::id()));
    let mut total = Duration::ZERO;
    for sanitizer in [None, Some(Sanitizer::Address), Some(Sanitizer::Thread)] {
        let label = sanitizer.map_or("plain", Sanitizer::name);
        let out = scratch.join(label);
        std::fs::create_dir_all(&out)?;
        let build = KernelBuild::new(manifest, Path::new(kernels), &out)
            .without_nvcc()
            .emulation(Emulation { sanitizer, ..Emulation::default() });
        let start = Instant::now();
        let output = build.run()?;
        let took = start.elapsed();
        if !output.problems.is_empty() {
            return Err(format!("the kernels have problems: {:?}", output.problems).into());
        }
        total += took;
        println!(
            "{label:<8} {:>8.1} s   {} libraries, {} compiled",
            took.as_secs_f64(),
            output.emulated.len(),
            output.emulated_recompiled.len()
        );
    }
    println!("{:<8} {:>8.1} s", "total", total.as_secs_f64());
    std::fs::remove_dir_all(&scratch)?;
    Ok(())
}
