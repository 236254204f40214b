//! One manifest line, as the generated code describes it at run time.

/// A kernel entry of a table: which struct field it fills, where the kernel lives, and where the
/// manifest lists it. The derive emits one per manifest line, in manifest order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelEntry {
    /// The field of the generated handles struct.
    pub field: &'static str,
    /// The kernel module (`kernels/<module>.cu`).
    pub module: &'static str,
    /// The entry point's exact, unmangled name.
    pub entry: &'static str,
    /// Whether every target must carry it; optional entries become `Option<KernelHandle>`.
    pub required: bool,
    /// The entry's line in the manifest.
    pub line: u32,
}

impl std::fmt::Display for KernelEntry {
    /// `field (module::entry)`, the form error messages use.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` ({}::{})", self.field, self.module, self.entry)
    }
}
