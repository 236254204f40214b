//! The launch contract of an entry as runtime data: its `params` and `requires` become a
//! `::kda_runtime::Signature` whose extents and requirements are postfix programs.
//!
//! The code names the runtime's items by the short names [`PRELUDE`] imports into the block that
//! holds the entries: a large table's signatures are most of its expansion, and every token costs
//! expansion time.

use super::tokens::{Code, Str};

use crate::manifest::{Entry, Op, Param, ParamType, Requirement};

/// The imports the signature code relies on, for the block expression around the entries (no
/// token of the manifest's own reaches that block but string literals).
pub(super) const PRELUDE: &str = "use ::kda_runtime::signature::{\
    Access::{Read, Write}, KernelParam as P, LaunchDim::*, Op::*, Requirement as R, ScalarKind as S, \
    }; use ::kda_runtime::DType as D; use ::kda_runtime::Signature as G; \
    use ::core::option::Option::{None, Some};";

/// Writes `Some(&Signature { .. })` for an entry with `params`, else `None`. An error where a
/// parameter index does not fit the runtime's `u16` scalar references.
pub(super) fn write(code: &mut Code, entry: &Entry) -> Result<(), String> {
    let Some(params) = &entry.params else {
        code.push("None");
        return Ok(());
    };
    if params.len() > usize::from(u16::MAX) {
        return Err(format!(
            "`{}` has {} parameters; a kernel takes at most 65,535",
            entry.field,
            params.len()
        ));
    }
    code.push("Some(&G { params: &[");
    for param in params {
        write_param(code, param);
        code.push(",");
    }
    code.push("], requires: &[");
    for requirement in &entry.requires {
        write_requirement(code, requirement);
        code.push(",");
    }
    code.push("] })");
    Ok(())
}

fn write_param(code: &mut Code, param: &Param) {
    let name = Str(&param.name);
    match &param.ty {
        ParamType::Buffer { element, writable, extent, extent_text, nullable } => {
            let access = if *writable { "Write" } else { "Read" };
            write!(code, "P::buffer({name}, D::{element:?}, {access}, {}, &", Str(extent_text));
            write_program(code, &extent.program());
            code.push(")");
            if let Some(condition) = &param.safety {
                write!(code, ".trusting({})", Str(condition));
            }
            if *nullable {
                code.push(".nullable()");
            }
        }
        ParamType::Scalar(scalar) => write!(code, "P::scalar({name}, S::{scalar:?})"),
    }
}

/// The `&[::kda_runtime::BuiltEntry]` of one module's manifest `entries`, each with the symbol the
/// module exports it under, as the build step embeds it beside the module's image: each entry's
/// name and the signature the derive gives its table,
/// spelled by the same code, so a table's signatures equal the build's exactly. An entry whose
/// signature the derive refuses (it reports why) is embedded without one, so no checked lookup of
/// it resolves.
#[cfg(feature = "cuda")]
pub(crate) fn built_entries<'a>(entries: impl IntoIterator<Item = (&'a Entry, &'a str)>) -> String {
    let mut code = Code::default();
    write!(code, "{{ {PRELUDE} &[");
    for (entry, symbol) in entries {
        write!(
            code,
            "::kda_runtime::BuiltEntry {{ entry: {}, symbol: {}, signature: ",
            Str(&entry.entry),
            Str(symbol)
        );
        // `write` refuses before writing anything.
        if write(&mut code, entry).is_err() {
            code.push("None");
        }
        code.push(" },");
    }
    code.push("] }");
    code.into_string()
}

fn write_requirement(code: &mut Code, requirement: &Requirement) {
    write!(code, "R::new({}, &", Str(&requirement.text));
    write_program(code, &requirement.program());
    code.push(")");
}

/// A program as an array of `Op`s, each by its short name (see [`PRELUDE`]): the `Debug` of an
/// `Op` (`Scalar(2)`, `Launch(BlockX)`, `Mul`) is its spelling under those imports.
fn write_program(code: &mut Code, program: &[Op]) {
    code.push("[");
    for op in program {
        write!(code, "{op:?},");
    }
    code.push("]");
}
