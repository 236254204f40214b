//! The parameter layout of a kernel, read from its PTX `.entry`, and the width check against the
//! manifest.

use super::{SignatureMismatch, SignatureProblem, c_type};
use crate::Manifest;
use crate::cuda::problem::listed_at;
use crate::cuda::symbols::{exported_symbol, ptx_entries};

/// One kernel parameter as the PTX lays it out in the parameter buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtxParam {
    /// Bytes it takes (`.u64` 8, `.b8 name[16]` 16).
    pub size: u32,
    /// Its alignment: the `.align` written before its type, else its element's natural one.
    pub align: u32,
    /// Where it starts: the end of the previous parameter, rounded up to `align`.
    pub offset: u32,
}

/// The parameters of the kernel `entry` in `ptx`, in order; `None` when the PTX has no such
/// `.entry` or one of its parameters is not a form this reader knows.
///
/// Reads `.param .u32 name`, `.param .u64 .ptr .align 1 name` (the `.align` after `.ptr` is the
/// pointee's, not the parameter's) and `.param .align 8 .b8 name[16]` (a struct by value).
pub fn ptx_params(ptx: &str, entry: &str) -> Option<Vec<PtxParam>> {
    let list = param_list(ptx, entry)?;
    let mut params = Vec::new();
    let mut end = 0u32;
    for declaration in list.split(',').map(str::trim).filter(|text| !text.is_empty()) {
        let (size, align) = parse_param(declaration)?;
        let offset = end.checked_next_multiple_of(align)?;
        end = offset.checked_add(size)?;
        params.push(PtxParam { size, align, offset });
    }
    Some(params)
}

/// The text between the parentheses of `.entry <entry>( ... )`.
fn param_list<'a>(ptx: &'a str, entry: &str) -> Option<&'a str> {
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + ".entry".len()..];
        rest = after;
        // A directive, not a name that merely contains `.entry`.
        if before.is_some_and(|c| !c.is_whitespace()) || !after.starts_with(char::is_whitespace) {
            continue;
        }
        let Some(tail) = after.trim_start().strip_prefix(entry) else { continue };
        let Some(list) = tail.trim_start().strip_prefix('(') else { continue };
        return list.find(')').map(|close| &list[..close]);
    }
    None
}

/// `(size, align)` of one `.param` declaration.
fn parse_param(declaration: &str) -> Option<(u32, u32)> {
    let mut tokens = declaration.split_whitespace();
    if tokens.next()? != ".param" {
        return None;
    }
    let (mut align, mut element, mut pointer, mut count) = (None, None, false, 1u32);
    while let Some(token) = tokens.next() {
        match token {
            ".align" => {
                let value = tokens.next()?.parse::<u32>().ok().filter(|value| value.is_power_of_two())?;
                if !pointer {
                    align = Some(value);
                }
            }
            ".ptr" => pointer = true,
            ".global" | ".const" | ".local" | ".shared" => {}
            _ if token.starts_with('.') => element = Some(element_size(token)?),
            // The name, with `[N]` per array dimension.
            name => {
                for dimension in name.split('[').skip(1) {
                    count = count.checked_mul(dimension.strip_suffix(']')?.parse().ok()?)?;
                }
            }
        }
    }
    let element = element?;
    Some((element.checked_mul(count)?, align.unwrap_or(element)))
}

/// Bytes of a PTX fundamental type: `.u32` 4, `.b8` 1, `.f16x2` 4.
fn element_size(token: &str) -> Option<u32> {
    let bits = token.strip_prefix('.')?.trim_start_matches(['b', 'u', 's', 'f']);
    let bits: u32 = match bits.split_once('x') {
        Some((bits, lanes)) => bits.parse::<u32>().ok()? * lanes.parse::<u32>().ok()?,
        None => bits.parse().ok()?,
    };
    (bits > 0 && bits.is_multiple_of(8)).then_some(bits / 8)
}

/// The width check: for every entry with `params` that its module's PTX (`(module, ptx)`)
/// exports under its exact name, the count and each parameter's bytes against the manifest.
/// Entries the PTX lacks are the entry check's to report.
pub(in crate::cuda) fn check_ptx_params(
    manifest: &Manifest,
    manifest_name: &str,
    ptx_by_module: &[(String, String)],
) -> Vec<SignatureProblem> {
    let mut problems = Vec::new();
    for entry in manifest.tables.iter().flat_map(|table| &table.entries) {
        let Some(declared) = &entry.params else { continue };
        let Some((_, ptx)) = ptx_by_module.iter().find(|(module, _)| *module == entry.module) else {
            continue;
        };
        let entries = ptx_entries(ptx);
        let Some(symbol) = exported_symbol(&entry.entry, &entries) else { continue };
        let problem = |mismatch| SignatureProblem {
            listed_at: listed_at(manifest_name, entry),
            symbol: format!("{}::{}", entry.module, entry.entry),
            mismatch,
        };
        let Some(found) = ptx_params(ptx, symbol) else {
            problems.push(problem(SignatureMismatch::UnreadablePtx));
            continue;
        };
        if declared.len() != found.len() {
            problems.push(problem(SignatureMismatch::Count { declared: declared.len(), found: found.len() }));
        }
        for (index, (param, found)) in declared.iter().zip(&found).enumerate() {
            if param.ty.size() != found.size {
                problems.push(problem(SignatureMismatch::Width {
                    index,
                    name: param.name.clone(),
                    declared: c_type(&param.ty).manifest_spelling().to_string(),
                    declared_size: param.ty.size(),
                    found_size: found.size,
                }));
            }
        }
    }
    problems
}
