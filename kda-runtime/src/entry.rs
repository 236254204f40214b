//! One manifest line, as the generated code describes it at run time.

use crate::Signature;

/// A kernel entry of a table: which struct field it fills, where the kernel lives, its launch
/// contract, and where the manifest lists it. The derive emits one per manifest line, in manifest
/// order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelEntry {
    /// The namespace of its manifest, `<crate>@<version>:<manifest path>`: the kernel is looked
    /// up by `(namespace, module, entry)`, so two crates' `gemm` modules never collide. The
    /// images a crate's build compiles carry the same namespace
    /// ([`ImageSet::namespace`](crate::ImageSet::namespace)).
    pub namespace: &'static str,
    /// The manifest table it belongs to.
    pub table: &'static str,
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
    /// Its parameters and preconditions (`params`, `requires`); `None` where the manifest gives
    /// no `params`, so launches of it can only be unchecked.
    pub signature: Option<&'static Signature>,
}

impl KernelEntry {
    /// An entry of no table and no namespace (`""`), without a signature, for carrying a kernel
    /// by name (test fakes, ad-hoc lookups).
    pub const fn named(module: &'static str, entry: &'static str) -> Self {
        Self {
            namespace: "",
            table: "",
            field: entry,
            module,
            entry,
            required: true,
            line: 0,
            signature: None,
        }
    }

    /// `table.field`, the name launch errors use.
    pub fn path(&self) -> String {
        if self.table.is_empty() { self.field.to_owned() } else { format!("{}.{}", self.table, self.field) }
    }

    /// What a backend looks it up by: `(namespace, module, entry)`.
    pub(crate) const fn names(&self) -> (&'static str, &'static str, &'static str) {
        (self.namespace, self.module, self.entry)
    }
}

impl std::fmt::Display for KernelEntry {
    /// `field (module::entry)`, the form error messages use.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` ({}::{})", self.field, self.module, self.entry)
    }
}
