//! One module's compile: its generated unit, the cache check, the nvcc run, its kernels'
//! resources, and the problems nvcc's messages map back to the manifest.

use std::path::{Path, PathBuf};

use super::cache::{Fingerprint, Record, parse_dependencies};
use super::nvcc::Outputs;
use super::problem::{Problem, listed_at};
use super::resources::{EntryResources, parse_resource_usage};
use super::target::{Arch, Plan};
use super::{BuildError, Nvcc, prove, read, write};
use crate::{Entry, Manifest};

/// What every module's compile shares.
pub(super) struct Compiler<'a> {
    pub nvcc: &'a Nvcc,
    pub manifest: &'a Manifest,
    pub manifest_name: &'a str,
    pub out_dir: &'a Path,
    /// nvcc's flags, the `-gencode`s included: everything but the files.
    pub args: &'a [String],
    pub plan: &'a Plan,
}

/// A module as one build left it.
pub(super) enum Compiled {
    /// Its fatbin, the PTX text the checks read, the SASS per target, and what ptxas reported.
    Image {
        fatbin: PathBuf,
        ptx: String,
        cubins: Vec<(Arch, PathBuf)>,
        resources: Vec<EntryResources>,
        /// Whether nvcc ran (`false`: the cache had it).
        recompiled: bool,
    },
    /// nvcc rejected it.
    Rejected(Vec<Problem>),
}

impl Compiler<'_> {
    /// Compiles `module` (`source`, absolute) unless its cache record is current.
    pub fn compile(&self, module: &str, source: &Path) -> Result<Compiled, BuildError> {
        let unit_text = prove::translation_unit(self.manifest, self.manifest_name, module, source);
        let unit = self.out_dir.join(format!("{module}.kda.cu"));
        write(&unit, &unit_text)?;
        let outputs = Outputs {
            fatbin: self.out_dir.join(format!("{module}.fatbin")),
            ptx: self.out_dir.join(format!("{module}.ptx")),
            dependencies: self.out_dir.join(format!("{module}.d")),
            cubins: self
                .plan
                .sass
                .iter()
                .map(|arch| (*arch, self.out_dir.join(format!("{module}.{arch}.cubin"))))
                .collect(),
        };
        let record_path = self.out_dir.join(format!("{module}.kda-cache"));
        let nvcc_path = self.nvcc.path().display().to_string();
        let nvcc_version = format!("{:?}", self.nvcc.version());
        let command: Vec<&str> = [nvcc_path.as_str(), &nvcc_version, &unit_text]
            .into_iter()
            .chain(self.args.iter().map(String::as_str))
            .collect();
        let command = Fingerprint::of_command(&command);
        let cached = Record::read(&record_path).filter(|record| {
            record.is_current(command)
                && outputs.fatbin.is_file()
                && outputs.ptx.is_file()
                && outputs.cubins.iter().all(|(_, cubin)| cubin.is_file())
        });
        if let Some(record) = cached {
            return Ok(Compiled::Image {
                ptx: read(&outputs.ptx)?,
                fatbin: outputs.fatbin,
                cubins: outputs.cubins,
                resources: record.resources,
                recompiled: false,
            });
        }
        // A failed compile leaves no record: the next build tries again.
        let _ = std::fs::remove_file(&record_path);
        let report = match self.nvcc.compile(&unit, &outputs, self.args, self.plan.checked_ptx())? {
            Ok(report) => report,
            Err(diagnostics) => return Ok(Compiled::Rejected(self.problems(module, source, diagnostics))),
        };
        let resources = parse_resource_usage(&report);
        let files = parse_dependencies(&read(&outputs.dependencies)?);
        // A file nvcc read that is already gone again: no record, compile next time.
        if let Some(fingerprint) = command.with_files(&files) {
            let record = Record { fingerprint, files, resources: resources.clone() };
            record.write(&record_path).map_err(|source| BuildError::Io { path: record_path, source })?;
        }
        Ok(Compiled::Image {
            ptx: read(&outputs.ptx)?,
            fatbin: outputs.fatbin,
            cubins: outputs.cubins,
            resources,
            recompiled: true,
        })
    }

    /// nvcc's `diagnostics` for `module` as problems: the failed parameter checks, each at its
    /// entry, or else the whole message at the module's first entry.
    fn problems(&self, module: &str, source: &Path, diagnostics: String) -> Vec<Problem> {
        match prove::problems_from_nvcc(&diagnostics, self.manifest, self.manifest_name, module) {
            Some(problems) => problems.into_iter().map(Problem::Signature).collect(),
            None => vec![Problem::Compile {
                listed_at: first_entry(self.manifest, module).map_or_else(
                    || self.manifest_name.to_owned(),
                    |entry| listed_at(self.manifest_name, entry),
                ),
                path: source.to_owned(),
                diagnostics,
            }],
        }
    }
}

/// The first entry of `module` in `manifest`, which module-wide problems are located at.
pub(super) fn first_entry<'m>(manifest: &'m Manifest, module: &str) -> Option<&'m Entry> {
    manifest.tables.iter().flat_map(|table| &table.entries).find(|entry| entry.module == module)
}
