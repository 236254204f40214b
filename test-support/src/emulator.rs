//! Fixture kernels on the emulator (feature `emulator`): a fixture manifest built as C++ only,
//! at test time, into the test's temporary directory, and the set an emulation backend carries;
//! with a deterministic bit stream for the fixtures' inputs. Used by kda-emu's own tests and by
//! the model's tests of its device helpers.

use std::path::Path;

use kda_build::cuda::emulation::{EmulatedLibrary, Emulation};
use kda_build::cuda::{BuildOutput, KernelBuild};
use kda_runtime::{EmulatedSet, KernelEntry};

/// Builds the manifest `dir/kernels.toml` for the emulator only (no nvcc), into `out_dir`.
pub fn build(dir: &Path, out_dir: &Path, emulation: Emulation) -> BuildOutput {
    KernelBuild::new(dir.join("kernels.toml"), dir, out_dir)
        .without_nvcc()
        .emulation(emulation)
        .run()
        .unwrap_or_else(|error| panic!("the emulated build of {} failed: {error}", dir.display()))
}

/// Panics with every problem of a build that had any.
pub fn assert_built(output: &BuildOutput, what: &str) {
    let problems: Vec<String> = output.problems.iter().map(ToString::to_string).collect();
    assert!(problems.is_empty(), "{what} do not build:\n{}", problems.join("\n"));
    assert!(output.manifest_error.is_none(), "{:?}", output.manifest_error);
}

/// The runtime's view of what the build made: one module per source, one library per entry,
/// proving the signatures of `proved`, built with the libraries' sanitizer, and the driver where
/// the build made one.
#[allow(unsafe_code)]
pub fn emulated_set(
    namespace: &'static str,
    built: &[EmulatedLibrary],
    proved: &[KernelEntry],
    driver: Option<&Path>,
) -> &'static EmulatedSet {
    let sanitizer = built.first().and_then(|library| library.sanitizer);
    assert!(built.iter().all(|library| library.sanitizer == sanitizer), "the libraries of several builds");
    let paths: Vec<&str> =
        built.iter().map(|library| library.path.to_str().expect("a UTF-8 library path")).collect();
    let libraries = built.iter().zip(paths).map(|(library, path)| (&*library.module, &*library.entry, path));
    let driver = driver.map(|driver| driver.to_str().expect("a UTF-8 driver path"));
    // SAFETY: the libraries and the driver are what the emulated build just wrote from the
    // fixtures' sources, with the sanitizer each library records; the emulator compares each
    // library's C parameter types with the signature of the entry it is looked up for.
    unsafe { EmulatedSet::leak(namespace, libraries, proved, sanitizer, driver) }
}

/// A deterministic stream of bits (splitmix64), for fixture inputs that are the same every run.
#[derive(Clone, Debug)]
pub struct Bits(pub u64);

impl Bits {
    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// An f32 of either sign, magnitude in [2^-4, 2^4), any significand (so tf32 rounding shows).
    pub fn f32_any(&mut self) -> f32 {
        let r = self.next_u64();
        let (sign, exponent, significand) = (r & 1, 123 + (r >> 1) % 8, (r >> 8) & 0x7f_ffff);
        f32::from_bits(u32::try_from(sign << 31 | exponent << 23 | significand).expect("32 bits"))
    }
}
