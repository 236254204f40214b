//! Kernel sets vouch for what the build wrote: safe code makes none of its own.

use kda_runtime::{EmulatedSet, ImageSet};

fn main() {
    // The constructors are `unsafe`: the caller vouches for the images and libraries.
    let _ = ImageSet::from_build("mine@0:kernels.toml", &[], None);
    let _ = EmulatedSet::leak("mine@0:kernels.toml", [("m", "e", "/tmp/any.so")], &[], None, None);
}
