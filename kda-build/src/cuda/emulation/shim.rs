//! The emulator's C++ shim, carried in this crate and written next to the emulated build's
//! outputs, so a model crate needs nothing beyond kda-build to emulate its kernels.

use std::path::{Path, PathBuf};

use crate::cuda::{BuildError, write};

/// The shim's files: the device API, `<cuda_bf16.h>`, the runtime, its C ABI and the driver.
pub(crate) const FILES: [(&str, &str); 5] = [
    ("kda_emu.h", include_str!("../../../emu/kda_emu.h")),
    ("cuda_bf16.h", include_str!("../../../emu/cuda_bf16.h")),
    ("kda_abi.h", include_str!("../../../emu/kda_abi.h")),
    ("kda_emu_runtime.cpp", include_str!("../../../emu/kda_emu_runtime.cpp")),
    ("kda_emu_driver.cpp", include_str!("../../../emu/kda_emu_driver.cpp")),
];

/// Writes the shim into `out_dir/shim`; that directory.
pub(crate) fn write_all(out_dir: &Path) -> Result<PathBuf, BuildError> {
    let dir = out_dir.join("shim");
    std::fs::create_dir_all(&dir).map_err(|source| BuildError::Io { path: dir.clone(), source })?;
    for (name, text) in FILES {
        write(&dir.join(name), text)?;
    }
    Ok(dir)
}
