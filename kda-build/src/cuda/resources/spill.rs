//! A kernel that spills registers is a build error: every spilled value is a store to local
//! memory and a load back, on the hot path of a kernel written to stay in registers, and it shows
//! up only as a slower benchmark. The build reports it where the manifest lists the entry.

use std::fmt;

use super::ResourceUsage;
use crate::Manifest;
use crate::cuda::problem::listed_at;
use crate::cuda::symbols::exported_symbol;
use crate::cuda::{Arch, BuiltImage};

/// A manifest entry whose kernel ptxas compiled with spilled registers, on one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpillProblem {
    /// `kernels.toml:LINE:COL`, where the entry is listed.
    pub listed_at: String,
    /// `module::entry`.
    pub symbol: String,
    /// The SASS target it spills on.
    pub arch: Arch,
    /// What ptxas reported for it there.
    pub usage: ResourceUsage,
}

impl fmt::Display for SpillProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { listed_at, symbol, arch, usage } = self;
        write!(
            f,
            "{listed_at}: `{symbol}` spills registers on {arch}: {} registers, {} bytes spill stores, \
             {} bytes spill loads (each spilled value goes through local memory: keep fewer values \
             live, or let each thread have more registers through `__launch_bounds__`)",
            usage.registers, usage.spill_stores, usage.spill_loads
        )
    }
}

/// A problem for every listing of an entry of `images` whose kernel spills, in manifest order
/// and then in the order of the targets.
pub(in crate::cuda) fn check_spills(
    manifest: &Manifest,
    manifest_name: &str,
    images: &[BuiltImage],
) -> Vec<SpillProblem> {
    let mut problems = Vec::new();
    for entry in manifest.tables.iter().flat_map(|table| &table.entries) {
        let Some(image) = images.iter().find(|image| image.module == entry.module) else { continue };
        let symbol =
            exported_symbol(&entry.entry, &image.exports).map_or(entry.entry.as_str(), String::as_str);
        for resources in image.resources.iter().filter(|resources| resources.entry == symbol) {
            if resources.usage.spills() {
                problems.push(SpillProblem {
                    listed_at: listed_at(manifest_name, entry),
                    symbol: format!("{}::{}", entry.module, entry.entry),
                    arch: resources.arch,
                    usage: resources.usage,
                });
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::cuda::resources::EntryResources;

    const SM_80: Arch = Arch { major: 8, minor: 0, specific: false };
    const SM_90: Arch = Arch { major: 9, minor: 0, specific: false };

    fn resources(entry: &str, arch: Arch, spilled: u32) -> EntryResources {
        let usage = ResourceUsage {
            registers: 64,
            spill_stores: spilled,
            spill_loads: spilled / 2,
            ..ResourceUsage::default()
        };
        EntryResources { entry: entry.to_owned(), arch, usage }
    }

    #[test]
    fn each_spilling_entry_is_located_at_its_listing_per_target_and_the_others_pass() {
        let manifest = Manifest::parse(
            "kernels.toml",
            "[t]\nfree = { module = \"m\", entry = \"free\" }\nhot = { module = \"m\", entry = \"hot\" }\n\
             gone = { module = \"absent\", entry = \"gone\" }\n",
        )
        .unwrap();
        let image = BuiltImage {
            module: "m".to_owned(),
            fatbin: PathBuf::from("/out/m.fatbin"),
            sass: vec![SM_90, SM_80],
            ptx: None,
            cubins: Vec::new(),
            resources: vec![
                resources("hot", SM_90, 1044),
                resources("free", SM_90, 0),
                resources("hot", SM_80, 8),
                resources("free", SM_80, 0),
                // Listed by no table: the build warns about it as unlisted, not as spilling.
                resources("helper", SM_90, 16),
            ],
            exports: ["hot", "free", "helper"].map(str::to_owned).into(),
        };
        let messages: Vec<String> =
            check_spills(&manifest, "kernels.toml", &[image]).iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(
            messages[0].starts_with(
                "kernels.toml:3:1: `m::hot` spills registers on sm_90: 64 registers, 1044 bytes spill \
                 stores, 522 bytes spill loads ("
            ),
            "{messages:?}"
        );
        assert!(
            messages[1].starts_with("kernels.toml:3:1: `m::hot` spills registers on sm_80: "),
            "{messages:?}"
        );
    }
}
