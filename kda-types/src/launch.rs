//! Dimensions of the launch geometry that requirements test.

use core::fmt;

/// A dimension of the launch geometry a requirement can test, or its dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LaunchDim {
    /// `grid.x`: blocks in x.
    GridX,
    /// `grid.y`: blocks in y.
    GridY,
    /// `grid.z`: blocks in z.
    GridZ,
    /// `block.x`: threads per block in x.
    BlockX,
    /// `block.y`: threads per block in y.
    BlockY,
    /// `block.z`: threads per block in z.
    BlockZ,
    /// `shared.bytes`: the bytes of dynamic shared memory a block gets.
    SharedBytes,
}

impl LaunchDim {
    /// Every dimension, in the order of the table.
    pub const ALL: [LaunchDim; 7] = [
        LaunchDim::GridX,
        LaunchDim::GridY,
        LaunchDim::GridZ,
        LaunchDim::BlockX,
        LaunchDim::BlockY,
        LaunchDim::BlockZ,
        LaunchDim::SharedBytes,
    ];

    /// The manifest spelling: `block.x`.
    pub const fn name(self) -> &'static str {
        match self {
            LaunchDim::GridX => "grid.x",
            LaunchDim::GridY => "grid.y",
            LaunchDim::GridZ => "grid.z",
            LaunchDim::BlockX => "block.x",
            LaunchDim::BlockY => "block.y",
            LaunchDim::BlockZ => "block.z",
            LaunchDim::SharedBytes => "shared.bytes",
        }
    }

    /// The dimension the manifest spells `name`.
    pub fn from_name(name: &str) -> Option<LaunchDim> {
        LaunchDim::ALL.into_iter().find(|dim| dim.name() == name)
    }
}

impl fmt::Display for LaunchDim {
    /// The manifest spelling.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
