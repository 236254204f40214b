//! Compiled kernel modules embedded in a binary, grouped by the crate whose build compiled them.
//!
//! A crate's build step (`kda_build::cuda`) writes one [`ImageSet`], `KERNEL_IMAGES`, into
//! `OUT_DIR/kda_kernels.rs`, which the crate includes with [`include_kernels!`](crate::include_kernels).
//! A backend carries several crates' sets at once: each resolves in its own namespace, so two
//! crates' `gemm` modules never collide.

mod coverage;
mod emulated;

pub use coverage::{CudaArch, ImageCoverage, Incompatibility, PtxImage};
pub use emulated::{EmulatedLibrary, EmulatedModule, EmulatedSet};

/// One crate's kernel images, as its build embedded them: the generated `KERNEL_IMAGES`.
#[derive(Clone, Copy, Debug)]
pub struct ImageSet {
    /// `<crate>@<version>:<manifest path>`, the namespace its tables resolve in.
    pub namespace: &'static str,
    /// One image per module, in manifest order; empty when nvcc was absent.
    pub images: &'static [KernelImage],
    /// Why `images` is empty, when nvcc was absent at build time.
    pub missing: Option<&'static str>,
}

impl ImageSet {
    /// The image of `module`, if the set carries one.
    pub fn image(&self, module: &str) -> Option<&'static KernelImage> {
        self.images.iter().find(|image| image.module == module)
    }
}

/// One module's compiled image: a CUDA fatbin, as the build embeds it, and what code it carries.
#[derive(Clone, Copy, Debug)]
pub struct KernelImage {
    /// The module, `kernels/<module>.cu`.
    pub module: &'static str,
    /// The fatbin's bytes.
    pub fatbin: &'static [u8],
    /// The architectures its code runs on, as the build compiled it.
    pub coverage: ImageCoverage,
}

/// Includes the Rust a crate's build step generated: `OUT_DIR/kda_kernels.rs` (the `defines`
/// module and the [`ImageSet`] `KERNEL_IMAGES`), or another file of `OUT_DIR` by name.
///
/// ```text
/// mod compiled {
///     kda_runtime::include_kernels!();
/// }
/// pub use compiled::{KERNEL_IMAGES, defines};
/// ```
#[macro_export]
macro_rules! include_kernels {
    () => {
        $crate::include_kernels!("kda_kernels.rs");
    };
    ($file:literal) => {
        ::core::include!(::core::concat!(::core::env!("OUT_DIR"), "/", $file));
    };
}
