use kda_runtime::KernelTable;
use kda_runtime::record::RecordingBackend;

#[derive(KernelTable)]
#[kernel_table(manifest = "syntax.toml")]
pub struct Syntax;

fn main() {
    // The table is still emitted, so a broken manifest causes no error here.
    let _ = SyntaxKernels::resolve(&RecordingBackend::new());
    let _ = SyntaxKernels::ENTRY_POINTS;
}
