//! The device the emulator stands for, as data: the limits a launch is checked against. The
//! runtime reads them from the generated header (`kda_emu_config.h`, see [`crate::shim`]), so a
//! limit is written here once and nowhere in the C++.

/// The limits of one CUDA device architecture that a launch on it must keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// The architecture, as `__CUDA_ARCH__` spells it (900 for sm_90).
    pub arch: u32,
    /// Threads in one block.
    pub max_threads_per_block: u32,
    /// A block's extent in x, y and z.
    pub max_block: [u32; 3],
    /// A grid's extent in x, y and z.
    pub max_grid: [u32; 3],
    /// Static `__shared__` bytes of one block.
    pub max_static_shared: u32,
    /// Static and dynamic shared bytes of one block, dynamic beyond the static limit by opt-in.
    pub max_shared: u32,
}

impl DeviceLimits {
    /// sm_90 (H100, H200): the architecture this repository's kernels are tuned for.
    pub const SM_90: DeviceLimits = DeviceLimits {
        arch: 900,
        max_threads_per_block: 1024,
        max_block: [1024, 1024, 64],
        max_grid: [(1 << 31) - 1, 65535, 65535],
        max_static_shared: 48 * 1024,
        max_shared: 227 * 1024,
    };

    /// The limits as C preprocessor definitions, `(name, value)`.
    pub fn defines(&self) -> Vec<(&'static str, String)> {
        let [block_x, block_y, block_z] = self.max_block;
        let [grid_x, grid_y, grid_z] = self.max_grid;
        vec![
            ("KDA_EMU_ARCH", self.arch.to_string()),
            ("KDA_EMU_MAX_THREADS_PER_BLOCK", format!("{}u", self.max_threads_per_block)),
            ("KDA_EMU_MAX_BLOCK_X", format!("{block_x}u")),
            ("KDA_EMU_MAX_BLOCK_Y", format!("{block_y}u")),
            ("KDA_EMU_MAX_BLOCK_Z", format!("{block_z}u")),
            ("KDA_EMU_MAX_GRID_X", format!("{grid_x}u")),
            ("KDA_EMU_MAX_GRID_Y", format!("{grid_y}u")),
            ("KDA_EMU_MAX_GRID_Z", format!("{grid_z}u")),
            ("KDA_EMU_MAX_STATIC_SHARED", format!("{}u", self.max_static_shared)),
            ("KDA_EMU_MAX_SHARED", format!("{}u", self.max_shared)),
        ]
    }
}
