//! A manifest's entries as the runtime's [`KernelEntry`]s, with the signatures the derive would
//! generate for them: the same programs ([`Expr::program`](kda_build::manifest::Expr::program)),
//! made at run time and leaked, as a tool that builds kernels itself needs them once per run.

use kda_build::Manifest;
use kda_build::manifest::{Param, ParamType};
use kda_runtime::signature::{Access, KernelParam, Requirement};
use kda_runtime::{KernelEntry, Signature};

fn leak<T>(items: Vec<T>) -> &'static [T] {
    Box::leak(items.into_boxed_slice())
}

fn leak_str(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

/// Every entry of every table of `manifest`, in file order, in the namespace `namespace`.
pub fn entries(manifest: &Manifest, namespace: &'static str) -> Vec<KernelEntry> {
    manifest
        .tables
        .iter()
        .flat_map(|table| table.entries.iter().map(move |entry| (table, entry)))
        .map(|(table, entry)| KernelEntry {
            namespace,
            table: leak_str(&table.name),
            field: leak_str(&entry.field),
            module: leak_str(&entry.module),
            entry: leak_str(&entry.entry),
            required: !entry.optional,
            line: entry.location.line,
            signature: entry.params.as_ref().map(|params| {
                let requires = entry
                    .requires
                    .iter()
                    .map(|requirement| {
                        Requirement::new(leak_str(&requirement.text), leak(requirement.program()))
                    })
                    .collect();
                &*Box::leak(Box::new(Signature {
                    params: leak(params.iter().map(param).collect()),
                    requires: leak(requires),
                }))
            }),
        })
        .collect()
}

fn param(param: &Param) -> KernelParam {
    let name = leak_str(&param.name);
    match &param.ty {
        ParamType::Buffer { element, writable, extent, extent_text, nullable } => {
            let access = if *writable { Access::Write } else { Access::Read };
            let buffer =
                KernelParam::buffer(name, *element, access, leak_str(extent_text), leak(extent.program()));
            let buffer = match &param.safety {
                Some(condition) => buffer.trusting(leak_str(condition)),
                None => buffer,
            };
            if *nullable { buffer.nullable() } else { buffer }
        }
        ParamType::Scalar(kind) => KernelParam::scalar(name, *kind),
    }
}
