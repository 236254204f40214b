use kda_runtime::KernelTable;

#[derive(KernelTable)]
#[kernel_table(manifest = "missing_table.toml", table = "glm5_next_kda")]
pub struct Named;

// Defaulted: the snake_case of the type's name.
#[derive(KernelTable)]
#[kernel_table(manifest = "missing_table.toml")]
pub struct Glm5Next;

fn main() {}
