//! What each kernel costs the GPU, as ptxas reports it while it compiles the module's SASS:
//! registers per thread, spilled bytes, stack frame, static shared and constant memory.
//!
//! The build asks for the report in the nvcc run that compiles the module (`--resource-usage`,
//! which is `-Xptxas -v`), so it costs nothing extra; `parse_resource_usage` reads it, the
//! module's cache record keeps it (a module taken from the cache reports the same numbers),
//! [`BuiltImage`] carries it and the generated file lists it as `resources::ENTRIES`. A listed
//! kernel that spills registers on any target is a build error ([`SpillProblem`]).
//!
//! [`BuiltImage`]: super::BuiltImage

mod ptxas;
mod spill;

pub(crate) use ptxas::parse_resource_usage;
pub(super) use ptxas::without_resource_usage;
pub use spill::SpillProblem;
pub(super) use spill::check_spills;

use super::Arch;

/// What ptxas reported for one kernel on one SASS target, every size in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResourceUsage {
    /// Registers per thread (`Used 115 registers`): with the block size, what bounds occupancy.
    pub registers: u32,
    /// Bytes of registers stored to local memory because they did not fit (`spill stores`).
    pub spill_stores: u32,
    /// Bytes of spilled registers loaded back (`spill loads`).
    pub spill_loads: u32,
    /// The per-thread stack frame in local memory (`stack frame`): local arrays indexed at run
    /// time, calls, and spills.
    pub stack_frame: u32,
    /// Static shared memory per block (`smem`); the dynamic shared memory of a launch comes on top.
    pub shared: u32,
    /// Constant memory listed on the kernel's own line, every bank summed (`cmem[0]` is the
    /// parameters'). ptxas 13.0 lists none for sm_90, which leaves 0.
    pub constant: u32,
    /// Named barriers (`used 1 barriers`).
    pub barriers: u32,
}

impl ResourceUsage {
    /// Whether any register was spilled to local memory.
    pub fn spills(&self) -> bool {
        self.spill_stores > 0 || self.spill_loads > 0
    }
}

/// One kernel's [`ResourceUsage`] on one SASS target.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EntryResources {
    /// The kernel's exported name (`dense_gemm_bf16`; C++-mangled when it is not `extern "C"`).
    pub entry: String,
    /// The SASS target ptxas compiled it for.
    pub arch: Arch,
    /// What it uses.
    pub usage: ResourceUsage,
}

/// The fields of a record line, in order, with their names.
const FIELDS: [&str; 7] =
    ["registers", "spill_stores", "spill_loads", "stack_frame", "shared", "constant", "barriers"];

impl EntryResources {
    /// One line of a cache record: `sm_90 dense_gemm_bf16 registers=115 spill_stores=0 ...`.
    pub(super) fn record_line(&self) -> String {
        let mut line = format!("{} {}", self.arch, self.entry);
        for (name, value) in FIELDS.iter().zip(self.values()) {
            line.push_str(&format!(" {name}={value}"));
        }
        line
    }

    /// The resources a [`record_line`](Self::record_line) wrote; `None` for any other line.
    pub(super) fn from_record_line(line: &str) -> Option<Self> {
        let mut words = line.split(' ');
        let arch = words.next()?.strip_prefix("sm_").and_then(Arch::parse)?;
        let entry = words.next().filter(|entry| !entry.is_empty())?.to_owned();
        let mut values = [0u32; FIELDS.len()];
        for (name, value) in FIELDS.iter().zip(&mut values) {
            let (key, number) = words.next()?.split_once('=')?;
            if key != *name {
                return None;
            }
            *value = number.parse().ok()?;
        }
        if words.next().is_some() {
            return None;
        }
        let [registers, spill_stores, spill_loads, stack_frame, shared, constant, barriers] = values;
        let usage =
            ResourceUsage { registers, spill_stores, spill_loads, stack_frame, shared, constant, barriers };
        Some(Self { entry, arch, usage })
    }

    /// The numbers, in [`FIELDS`] order.
    fn values(&self) -> [u32; FIELDS.len()] {
        let ResourceUsage { registers, spill_stores, spill_loads, stack_frame, shared, constant, barriers } =
            self.usage;
        [registers, spill_stores, spill_loads, stack_frame, shared, constant, barriers]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_line_reads_back_as_written_and_nothing_else_reads() {
        let resources = EntryResources {
            entry: "spill_live_values".to_owned(),
            arch: Arch { major: 9, minor: 0, specific: true },
            usage: ResourceUsage {
                registers: 64,
                spill_stores: 1044,
                spill_loads: 1040,
                stack_frame: 632,
                shared: 0,
                constant: 372,
                barriers: 1,
            },
        };
        let line = resources.record_line();
        assert_eq!(
            line,
            "sm_90a spill_live_values registers=64 spill_stores=1044 spill_loads=1040 stack_frame=632 \
             shared=0 constant=372 barriers=1"
        );
        assert_eq!(EntryResources::from_record_line(&line), Some(resources));
        for bad in [
            "",
            "/src/kernels/gemm.cu",
            "sm_90 gemm registers=1",
            "compute_90 gemm registers=1 spill_stores=0 spill_loads=0 stack_frame=0 shared=0 constant=0 barriers=0",
            "sm_90 gemm registers=x spill_stores=0 spill_loads=0 stack_frame=0 shared=0 constant=0 barriers=0",
            "sm_90 gemm spill_stores=0 registers=1 spill_loads=0 stack_frame=0 shared=0 constant=0 barriers=0",
            "sm_90 gemm registers=1 spill_stores=0 spill_loads=0 stack_frame=0 shared=0 constant=0 barriers=0 x=1",
        ] {
            assert_eq!(EntryResources::from_record_line(bad), None, "{bad:?}");
        }
    }
}
