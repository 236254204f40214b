//! What the kernels compile to, read from their SASS: the GEMM runs on the bf16 tensor cores
//! (`HMMA.16816.F32.BF16`, fed by `LDSM`, ldmatrix), the chunk kernels on the tf32 ones
//! (`HMMA.1688.F32.TF32`), and no other module does, so the check tells them apart and one that
//! fell back to scalar FMAs fails it; and the build lets nvcc contract products into FMAs. No GPU is needed, only nvcc and nvdisasm, which scripts/install-cuda.sh installs; CI runs
//! it with `cargo test -p kda --test sass -- --ignored`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kda_build::cuda::{Arch, BuildOutput, KernelBuild, Target};

const SM_90: Arch = Arch { major: 9, minor: 0, specific: false };

/// Where scripts/install-cuda.sh installs the toolkit: `KDA_CUDA_PREFIX`, else its default, as
/// build.rs looks for nvcc.
fn install_prefix() -> PathBuf {
    std::env::var_os("KDA_CUDA_PREFIX").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
        home.join(".cache/kda/cuda-13.0.88")
    })
}

/// nvdisasm: `KDA_NVDISASM`, else the one scripts/install-cuda.sh installs beside nvcc.
fn nvdisasm() -> PathBuf {
    std::env::var_os("KDA_NVDISASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| install_prefix().join("cuda/bin/nvdisasm"))
}

/// [`build_for_sm_90`] once for all the tests of this file, which run in parallel over one folder.
fn sm_90_build() -> &'static BuildOutput {
    static BUILD: OnceLock<BuildOutput> = OnceLock::new();
    BUILD.get_or_init(build_for_sm_90)
}

/// Every module of kernels.toml built by the crate's own build step (build.rs: the same units,
/// `[defines]`, default flags and nvcc), for sm_90 whatever `CUDA_COMPUTE_CAP` says, in a folder kept
/// between runs so a second run takes the modules from the build's cache.
fn build_for_sm_90() -> BuildOutput {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sass");
    std::fs::create_dir_all(&out).unwrap();
    let output = KernelBuild::new(root.join("kernels.toml"), root.join("kernels"), &out)
        .nvcc_candidate(install_prefix().join("cuda/bin/nvcc"))
        .targets(vec![Target::Sass(SM_90)])
        .require_nvcc(true)
        .run()
        .unwrap_or_else(|error| panic!("{error}: run scripts/install-cuda.sh or set NVCC"));
    let problems: Vec<String> = output.problems.iter().map(ToString::to_string).collect();
    assert!(problems.is_empty(), "the kernels do not build:\n{}", problems.join("\n"));
    output
}

/// The instructions `cubin`'s code uses, with their modifiers: `HMMA.16816.F32.BF16`.
fn instructions(cubin: &Path) -> BTreeSet<String> {
    let nvdisasm = nvdisasm();
    let output = Command::new(&nvdisasm).arg("--print-code").arg(cubin).output().unwrap_or_else(|error| {
        panic!("cannot run {}: {error}; run scripts/install-cuda.sh or set KDA_NVDISASM", nvdisasm.display())
    });
    let sass = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{} {}: {}",
        nvdisasm.display(),
        cubin.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    // `        /*0120*/              @!P0 LDC R0, c[0x0][0x218] ;`: after the offset, an optional
    // predicate, then the instruction.
    let instructions: BTreeSet<String> = sass
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("/*")?.split_once("*/"))
        .filter_map(|(_, instruction)| {
            let mut words = instruction.split_whitespace().skip_while(|word| word.starts_with('@'));
            Some(words.next()?.trim_end_matches(';').to_owned())
        })
        .collect();
    assert!(instructions.contains("EXIT"), "no code read from {}:\n{sass}", cubin.display());
    instructions
}

/// Whether `instructions` has one of opcode `opcode`, whatever its modifiers.
fn uses(instructions: &BTreeSet<String>, opcode: &str) -> bool {
    instructions.iter().any(|instruction| instruction.split('.').next() == Some(opcode))
}

#[test]
#[ignore = "needs nvcc and nvdisasm: .ci/run installs them (scripts/install-cuda.sh) and runs this with --ignored"]
fn the_gemm_and_the_chunk_kernels_use_the_tensor_cores_and_no_other_module_does() {
    let output = sm_90_build();
    let mut modules = Vec::new();
    for image in &output.images {
        let [(arch, cubin)] = image.cubins.as_slice() else { panic!("{}: {:?}", image.module, image.cubins) };
        assert_eq!(*arch, SM_90);
        let instructions = instructions(cubin);
        let expected: &[&str] = match image.module.as_str() {
            "gemm" => &["HMMA.16816.F32.BF16", "LDSM.16.M88.4"],
            "kda_chunk" => &["HMMA.1688.F32.TF32"],
            _ => {
                assert!(
                    !uses(&instructions, "HMMA"),
                    "{} uses the tensor cores: {instructions:?}",
                    image.module
                );
                &[]
            }
        };
        for instruction in expected {
            assert!(
                instructions.contains(*instruction),
                "{}'s sm_90 SASS has no {instruction}: {instructions:?}",
                image.module
            );
        }
        modules.push(image.module.as_str());
    }
    for module in ["gemm", "kda_chunk", "gemv"] {
        assert!(modules.contains(&module), "modules built: {modules:?}");
    }
}

#[test]
#[ignore = "needs nvcc and nvdisasm: .ci/run installs them (scripts/install-cuda.sh) and runs this with --ignored"]
fn the_build_lets_nvcc_fuse_products_outside_the_bit_identical_pairs() {
    // No `--fmad=false`: the GEMM's scalar path `acc + a·b`, its module's only floating-point
    // multiply-add (no expf, sqrt or division, whose library code fuses on its own), is one FFMA
    // only if nvcc contracts it.
    let output = sm_90_build();
    let gemm = output.images.iter().find(|image| image.module == "gemm").expect("the gemm module");
    let instructions = instructions(&gemm.cubins[0].1);
    assert!(uses(&instructions, "FFMA"), "the GEMM's scalar path does not fuse: {instructions:?}");
}
