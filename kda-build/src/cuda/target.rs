//! What a build compiles for: GPU architectures as SASS, or as PTX for the driver to compile.
//!
//! `CUDA_COMPUTE_CAP` (or [`KernelBuild::targets`](super::KernelBuild::targets)) lists them:
//!
//! | written                 | embeds                                                        |
//! |-------------------------|---------------------------------------------------------------|
//! | `90`, `sm_90`           | SASS for compute capability 9.0 (runs on 9.x)                 |
//! | `90a`, `sm_90a`         | architecture-specific SASS (wgmma and friends; runs on 9.0 only) |
//! | `compute_90`            | PTX only, compiled by the driver on any device of 9.0 or newer |
//!
//! Without a `compute_` target the PTX of the newest SASS target is embedded too, so the image
//! still loads on newer GPUs than the list names.

use std::fmt;

/// A compute capability, optionally architecture-specific (`sm_90a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    /// `9` of 9.0.
    pub major: u32,
    /// `0` of 9.0.
    pub minor: u32,
    /// The `a` suffix: code for exactly this capability, with its architecture-specific features.
    pub specific: bool,
}

impl Arch {
    /// `90`, `90a`, `100`: the digits of the capability, the last one the minor version.
    pub(super) fn parse(digits: &str) -> Option<Self> {
        let (digits, specific) = match digits.strip_suffix('a') {
            Some(digits) => (digits, true),
            None => (digits, false),
        };
        if digits.len() < 2 || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
            return None;
        }
        let (major, minor) = digits.split_at(digits.len() - 1);
        let arch = Self { major: major.parse().ok()?, minor: minor.parse().ok()?, specific };
        // nvcc 13 compiles for Turing (7.5) and newer.
        (arch.major * 10 + arch.minor >= 75).then_some(arch)
    }

    /// `90a`: how nvcc's `sm_`/`compute_` names spell it.
    fn digits(self) -> String {
        format!("{}{}{}", self.major, self.minor, if self.specific { "a" } else { "" })
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}", self.digits())
    }
}

/// One thing a build compiles each module for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// Machine code for this architecture.
    Sass(Arch),
    /// PTX for this virtual architecture, compiled by the driver at load.
    Ptx(Arch),
}

impl Target {
    /// The architecture.
    pub fn arch(self) -> Arch {
        match self {
            Target::Sass(arch) | Target::Ptx(arch) => arch,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Sass(arch) => arch.fmt(f),
            Target::Ptx(arch) => write!(f, "compute_{}", arch.digits()),
        }
    }
}

/// Parses a list such as `90`, `80,90`, `sm_90a compute_90`: separated by commas, spaces or
/// semicolons. `None` when an item is not a target or the list is empty.
pub fn parse_targets(list: &str) -> Option<Vec<Target>> {
    let targets: Vec<Target> = list
        .split([',', ' ', ';'])
        .filter(|item| !item.is_empty())
        .map(|item| match item.strip_prefix("compute_") {
            Some(digits) => Arch::parse(digits).map(Target::Ptx),
            None => Arch::parse(item.strip_prefix("sm_").unwrap_or(item)).map(Target::Sass),
        })
        .collect::<Option<_>>()?;
    (!targets.is_empty()).then_some(targets)
}

/// What a module compiled for `targets` embeds: the SASS architectures, and the virtual
/// architectures of its PTX (the listed `compute_` targets, else the newest SASS target's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// SASS, in the order listed, without repeats.
    pub sass: Vec<Arch>,
    /// PTX, in the order listed (or the one implied), without repeats.
    pub ptx: Vec<Arch>,
}

impl Plan {
    /// The plan for `targets`.
    pub fn new(targets: &[Target]) -> Self {
        let mut plan = Plan { sass: Vec::new(), ptx: Vec::new() };
        for target in targets {
            let list = match target {
                Target::Sass(_) => &mut plan.sass,
                Target::Ptx(_) => &mut plan.ptx,
            };
            if !list.contains(&target.arch()) {
                list.push(target.arch());
            }
        }
        if plan.ptx.is_empty() {
            plan.ptx.extend(plan.sass.iter().copied().max());
        }
        plan
    }

    /// nvcc's `-gencode` flags for the plan: each SASS from its own virtual architecture, and
    /// the PTX kept as such.
    pub fn gencode_flags(&self) -> Vec<String> {
        let sass =
            self.sass.iter().map(|arch| format!("-gencode=arch=compute_{0},code=sm_{0}", arch.digits()));
        let ptx =
            self.ptx.iter().map(|arch| format!("-gencode=arch=compute_{0},code=compute_{0}", arch.digits()));
        sass.chain(ptx).collect()
    }

    /// The virtual architecture whose PTX the entry and parameter checks read: the newest one
    /// compiled, whose PTX nvcc keeps under its `compute_<digits>` name.
    pub fn checked_ptx(&self) -> Arch {
        let compiled = self.sass.iter().chain(&self.ptx);
        compiled.copied().max().unwrap_or(Arch { major: 9, minor: 0, specific: false })
    }

    /// The PTX that decides which devices can compile the image: the oldest embedded.
    pub fn widest_ptx(&self) -> Option<Arch> {
        self.ptx.iter().copied().min()
    }

    /// `compute_90` for the file names nvcc keeps.
    pub(super) fn virtual_name(arch: Arch) -> String {
        format!("compute_{}", arch.digits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn arch(major: u32, minor: u32, specific: bool) -> Arch {
        Arch { major, minor, specific }
    }

    #[test]
    fn targets_are_capabilities_with_suffixes_or_ptx_only() {
        use Target::{Ptx, Sass};
        assert_eq!(parse_targets("90"), Some(vec![Sass(arch(9, 0, false))]));
        assert_eq!(parse_targets("sm_90a"), Some(vec![Sass(arch(9, 0, true))]));
        assert_eq!(
            parse_targets("80, 90a;compute_80 sm_100"),
            Some(vec![
                Sass(arch(8, 0, false)),
                Sass(arch(9, 0, true)),
                Ptx(arch(8, 0, false)),
                Sass(arch(10, 0, false)),
            ])
        );
        assert_eq!(parse_targets("120").unwrap()[0].to_string(), "sm_120");
        assert_eq!(parse_targets("compute_90a").unwrap()[0].to_string(), "compute_90a");
        for bad in ["", " , ", "ninety", "35", "9", "90b", "sm_", "compute_", "sm_9a0"] {
            assert_eq!(parse_targets(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn without_a_ptx_target_the_newest_sass_architecture_is_also_embedded_as_ptx() {
        let plan = Plan::new(&parse_targets("80,90").unwrap());
        assert_eq!(
            plan.gencode_flags(),
            [
                "-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_90,code=compute_90",
            ]
        );
        assert_eq!(plan.widest_ptx(), Some(arch(9, 0, false)));
        assert_eq!(plan.checked_ptx(), arch(9, 0, false));
    }

    #[test]
    fn a_ptx_only_target_embeds_no_sass_and_listed_ptx_replaces_the_implied_one() {
        let plan = Plan::new(&parse_targets("compute_90").unwrap());
        assert_eq!(plan.gencode_flags(), ["-gencode=arch=compute_90,code=compute_90"]);
        assert!(plan.sass.is_empty());

        let plan = Plan::new(&parse_targets("90a,compute_80,90a").unwrap());
        assert_eq!(
            plan.gencode_flags(),
            ["-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_80,code=compute_80"]
        );
        assert_eq!(plan.widest_ptx(), Some(arch(8, 0, false)));
        // The checks read the newest PTX nvcc compiled, here the one behind the sm_90a SASS.
        assert_eq!(Plan::virtual_name(plan.checked_ptx()), "compute_90a");
    }
}
