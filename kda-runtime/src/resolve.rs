//! Resolving a whole kernel table on a backend, and the error that names everything missing.

use std::fmt;

use crate::{GpuBackend, KernelEntry, KernelHandle, LookupError, try_kernel};

/// One entry of a table that could not be resolved.
#[derive(Debug)]
pub struct ResolveProblem {
    /// The manifest entry.
    pub entry: KernelEntry,
    /// What the backend answered.
    pub error: LookupError,
}

/// A table that could not be resolved: every required entry the backend lacks, and every lookup
/// that failed (optional entries included), named with their manifest lines.
#[derive(Debug)]
pub struct ResolveError {
    /// The manifest table.
    pub table: &'static str,
    /// The manifest file, as the derive was given it.
    pub manifest: &'static str,
    /// The backend's description.
    pub backend: String,
    /// Every problem, in manifest order.
    pub problems: Vec<ResolveProblem>,
}

impl ResolveError {
    /// The required entries the backend does not carry.
    pub fn missing(&self) -> impl Iterator<Item = &KernelEntry> {
        self.problems.iter().filter(|problem| problem.error.is_not_found()).map(|problem| &problem.entry)
    }

    /// The lookups that failed rather than found nothing.
    pub fn failures(&self) -> impl Iterator<Item = &ResolveProblem> {
        self.problems.iter().filter(|problem| !problem.error.is_not_found())
    }
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let missing = self.missing().count();
        let failed = self.problems.len() - missing;
        write!(f, "kernel table `{}` cannot be resolved on {}:", self.table, self.backend)?;
        if missing > 0 {
            write!(f, " {missing} required entry point{} missing", plural(missing))?;
        }
        if failed > 0 {
            let comma = if missing > 0 { "," } else { "" };
            write!(f, "{comma} {failed} lookup{} failed", plural(failed))?;
        }
        for ResolveProblem { entry, error } in &self.problems {
            let kind = if entry.required { "required" } else { "optional" };
            write!(
                f,
                "\n  - field `{}`: {}::{} ({kind}, {}:{}): {error}",
                entry.field, entry.module, entry.entry, self.manifest, entry.line
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for ResolveError {}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Walks a table's entries on a backend for the generated `resolve`: every entry is looked up
/// once, every problem is collected, and [`Resolver::finish`] reports them all together.
pub struct Resolver<'g> {
    gpu: &'g dyn GpuBackend,
    table: &'static str,
    manifest: &'static str,
    problems: Vec<ResolveProblem>,
}

impl<'g> Resolver<'g> {
    /// Starts resolving `table` (listed in `manifest`) on `gpu`.
    #[inline]
    pub fn new(gpu: &'g dyn GpuBackend, table: &'static str, manifest: &'static str) -> Self {
        Self { gpu, table, manifest, problems: Vec::new() }
    }

    /// Looks up an entry every target must carry; `None` when it cannot, and the problem is kept.
    // Called once per entry by generated code in another crate: worth inlining there.
    #[inline]
    pub fn required(&mut self, entry: &KernelEntry) -> Option<KernelHandle> {
        self.gpu
            .lookup(entry)
            .map_err(|error| self.problems.push(ResolveProblem { entry: *entry, error }))
            .ok()
    }

    /// Looks up an entry a target may lack: `None` when the backend answers "not found"; a failed
    /// lookup is kept as a problem, since a broken image must not pass for an absent kernel.
    #[inline]
    pub fn optional(&mut self, entry: &KernelEntry) -> Option<KernelHandle> {
        try_kernel(self.gpu, entry)
            .map_err(|error| self.problems.push(ResolveProblem { entry: *entry, error }))
            .ok()
            .flatten()
    }

    /// The resolved table when every required entry was found and no lookup failed; otherwise
    /// the error naming every problem.
    #[inline]
    pub fn finish<T>(self, table: Option<T>) -> Result<T, ResolveError> {
        match table {
            Some(table) if self.problems.is_empty() => Ok(table),
            _ => Err(ResolveError {
                table: self.table,
                manifest: self.manifest,
                backend: self.gpu.describe(),
                problems: self.problems,
            }),
        }
    }
}
