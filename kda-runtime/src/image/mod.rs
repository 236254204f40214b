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

use crate::Signature;

/// One crate's kernel images, as its build embedded them: the generated `KERNEL_IMAGES`.
///
/// The CUDA backend runs the code of these images and trusts the signatures they carry, so only
/// the build step makes one ([`ImageSet::from_build`] is `unsafe`): a set assembled at run time
/// could hand the device any code under any contract.
#[derive(Clone, Copy, Debug)]
pub struct ImageSet {
    namespace: &'static str,
    images: &'static [KernelImage],
    missing: Option<&'static str>,
}

impl ImageSet {
    /// The set the build step wrote: `namespace` (`<crate>@<version>:<manifest path>`), one image
    /// per module in manifest order, and why `images` is empty where nvcc was absent.
    ///
    /// # Safety
    ///
    /// Each image's `fatbin` is what nvcc compiled from the module's sources, and each of its
    /// [`entries`](KernelImage::entries) names a kernel of that fatbin whose C parameters are
    /// exactly its signature's (what `kda_build::cuda` proves before it writes a set). Backends
    /// launch the fatbin's code with arguments checked only against those signatures.
    pub const unsafe fn from_build(
        namespace: &'static str,
        images: &'static [KernelImage],
        missing: Option<&'static str>,
    ) -> Self {
        Self { namespace, images, missing }
    }

    /// `<crate>@<version>:<manifest path>`, the namespace its tables resolve in.
    pub const fn namespace(&self) -> &'static str {
        self.namespace
    }

    /// One image per module, in manifest order; empty when nvcc was absent.
    pub const fn images(&self) -> &'static [KernelImage] {
        self.images
    }

    /// Why [`images`](Self::images) is empty, when nvcc was absent at build time.
    pub const fn missing(&self) -> Option<&'static str> {
        self.missing
    }

    /// The image of `module`, if the set carries one.
    pub fn image(&self, module: &str) -> Option<&'static KernelImage> {
        self.images.iter().find(|image| image.module == module)
    }
}

/// One module's compiled image: a CUDA fatbin, as the build embeds it, what code it carries, and
/// the entries the build proved in it.
#[derive(Clone, Copy, Debug)]
pub struct KernelImage {
    /// The module, `kernels/<module>.cu`.
    pub module: &'static str,
    /// The fatbin's bytes.
    pub fatbin: &'static [u8],
    /// The architectures its code runs on, as the build compiled it.
    pub coverage: ImageCoverage,
    /// The manifest's entries of this module, each with the signature the build proved.
    pub entries: &'static [BuiltEntry],
}

/// An entry point of a module as the build proved it: its name and the signature its C
/// parameters were checked against (`None` where the manifest gives no `params`). A lookup whose
/// entry carries a signature resolves only where the build proved exactly that signature, so a
/// checked launch trusts no signature but the build's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltEntry {
    /// The entry point as the manifest names it (`scale_f32`, or a template instantiation
    /// `scale<float, 128>`).
    pub entry: &'static str,
    /// The name the module exports it under: the entry itself for an `extern "C"` kernel, the
    /// mangled name the build found for a template instantiation.
    pub symbol: &'static str,
    /// The signature it was proved to take.
    pub signature: Option<&'static Signature>,
}

/// The name the module exports `entry` under, as the build found it (the entry's own name where
/// the build did not list it).
pub(crate) fn exported_symbol(built: &[BuiltEntry], entry: &crate::KernelEntry) -> &'static str {
    built.iter().find(|built| built.entry == entry.entry).map_or(entry.entry, |built| built.symbol)
}

/// The signature the build proved for `entry` among a module's `built` entries: `Ok(None)` for an
/// entry without a signature (its launches can only be unchecked), the build's own `&'static`
/// for one whose signature equals a proved one, and the reason otherwise.
pub(crate) fn proved_signature(
    built: &[BuiltEntry],
    entry: &crate::KernelEntry,
) -> Result<Option<&'static Signature>, String> {
    let Some(asked) = entry.signature else { return Ok(None) };
    let mut proved = built.iter().filter(|built| built.entry == entry.entry).peekable();
    if proved.peek().is_none() {
        return Err(
            "the build proved no signature for this entry point (its manifest does not list it)".to_owned()
        );
    }
    proved.find_map(|built| built.signature.filter(|signature| *signature == asked)).map(Some).ok_or_else(
        || "the signature is not the one the build proved for this entry point (a hand-made entry, or a table and images from different manifests)".to_owned(),
    )
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
