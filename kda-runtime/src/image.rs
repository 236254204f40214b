//! Compiled kernel modules embedded in a binary.

/// One module's compiled image: a CUDA fatbin (SASS per architecture, plus PTX), as the build
/// embeds it.
#[derive(Clone, Copy, Debug)]
pub struct KernelImage {
    /// The module, `kernels/<module>.cu`.
    pub module: &'static str,
    /// The fatbin's bytes.
    pub fatbin: &'static [u8],
}
