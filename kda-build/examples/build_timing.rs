//! Times the kernel build step alone on a copy of a crate's kernels: a full build, a rebuild
//! with nothing changed, after editing one module, and after editing a shared header, each as
//! a ratio of the full build measured in the same run.
//!
//! ```text
//! cargo run --release -p kda-build --example build_timing -- kernels.toml kernels norm.cu kda_common.cuh [nvcc flags...]
//! ```
//!
//! nvcc is found as a build script finds it (`NVCC`, `CUDA_HOME`, ...); the jobs are the cores.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kda_build::cuda::{KernelBuild, Nvcc};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [manifest, kernels, module, header, flags @ ..] = args.as_slice() else {
        return Err("usage: build_timing MANIFEST KERNELS_DIR MODULE_FILE HEADER_FILE [NVCC_FLAGS...]".into());
    };
    let scratch = std::env::temp_dir().join(format!("kda-build-timing-{}", std::process::id()));
    let copy = scratch.join("kernels");
    copy_dir(Path::new(kernels), &copy)?;
    let build = KernelBuild::new(manifest, &copy, scratch.join("out"))
        .nvcc(Nvcc::find(&[])?)
        .nvcc_flags(flags.iter().cloned());
    std::fs::create_dir_all(scratch.join("out"))?;

    let run = |label: &str, edit: Option<&str>| -> Result<Duration, Box<dyn std::error::Error>> {
        if let Some(file) = edit {
            // A comment at the end: new bytes, the same kernels.
            let path = copy.join(file);
            let text = std::fs::read_to_string(&path)?;
            std::fs::write(&path, format!("{text}\n// edited\n"))?;
        }
        let start = Instant::now();
        let output = build.run()?;
        let took = start.elapsed();
        if !output.problems.is_empty() {
            return Err(format!("the kernels have problems: {:?}", output.problems).into());
        }
        println!("{label:<28} {:>8.2} s   recompiled: {}", took.as_secs_f64(), output.recompiled.join(", "));
        Ok(took)
    };
    let full = run("full build", None)?;
    let unchanged = run("nothing changed", None)?;
    let one_module = run(&format!("after editing {module}"), Some(module))?;
    let shared = run(&format!("after editing {header}"), Some(header))?;
    println!();
    for (label, took) in
        [("nothing changed", unchanged), (module.as_str(), one_module), (header.as_str(), shared)]
    {
        println!("{label:<28} {:>7.1} % of the full build", 100.0 * took.as_secs_f64() / full.as_secs_f64());
    }
    std::fs::remove_dir_all(&scratch)?;
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let path: PathBuf = entry?.path();
        if path.is_file() {
            std::fs::copy(&path, to.join(path.file_name().unwrap_or_default()))?;
        }
    }
    Ok(())
}
