//! The compiler's errors from the checks of `unit`, mapped back to the manifest: nvcc's for a
//! module, the emulator's C++ compiler's for the entries its unit of a module registers.

use super::unit::checked_entries;
use super::{SignatureMismatch, SignatureProblem, c_type};
use crate::cuda::problem::{is_error, listed_at};
use crate::{Entry, Manifest};

const PARAM_CHECK: &str = "kda_param_mismatch<";
const COUNT_CHECK: &str = "kda_count_mismatch<";
const PRESENCE_CHECK: &str = "kda_entry_missing<";

/// The problems of `module`'s entries that nvcc's `stderr` reports, one per failed check; `None`
/// when some error in it is not one of the checks (a real compile error, which the caller shows
/// as nvcc wrote it) or names no entry of the manifest.
pub(in crate::cuda) fn problems_from_nvcc(
    stderr: &str,
    manifest: &Manifest,
    manifest_name: &str,
    module: &str,
) -> Option<Vec<SignatureProblem>> {
    let mut problems = Vec::new();
    for line in stderr.lines().filter(|line| is_error(line)) {
        problems.push(problem(line, manifest, manifest_name, module)?);
    }
    (!problems.is_empty()).then_some(problems)
}

/// What the checks of a module's emulated unit ([`entry_checks`](super::unit::entry_checks))
/// found in the C++ compiler's output, each failure with the position of its listing among the
/// checked ones.
#[derive(Debug, Default, PartialEq, Eq)]
pub(in crate::cuda) struct EntryChecks {
    /// The listings of entries the unit declares no function of.
    pub undeclared: Vec<usize>,
    /// The listings' parameters the kernels contradict.
    pub signature: Vec<(usize, SignatureProblem)>,
}

/// The failed checks in the compiler's `stderr` for an emulated unit, which checks `listings`:
/// every listing in the manifest of each entry it registers. Its other errors are left out: a
/// kernel the unit lacks also fails the emulator's registration of it.
pub(in crate::cuda) fn entry_check_failures(
    stderr: &str,
    manifest_name: &str,
    listings: &[&Entry],
) -> EntryChecks {
    let mut checks = EntryChecks::default();
    // Checks are numbered by the listing's position (variants share a manifest line).
    let listed_on = |args: &[String]| {
        let ordinal: usize = args.first()?.parse().ok()?;
        Some((ordinal, *listings.get(ordinal)?))
    };
    for line in stderr.lines().filter(|line| is_error(line)) {
        if let Some((ordinal, _)) = template_args(line, PRESENCE_CHECK).and_then(|args| listed_on(&args)) {
            checks.undeclared.push(ordinal);
        } else if let Some((args, check)) = check_args(line)
            && let Some((ordinal, entry)) = listed_on(&args)
            && let Some(mismatch) = mismatch_of(check, &args, entry)
        {
            let problem = SignatureProblem {
                listed_at: listed_at(manifest_name, entry),
                symbol: format!("{}::{}", entry.module, entry.entry),
                mismatch,
            };
            checks.signature.push((ordinal, problem));
        }
    }
    checks.undeclared.dedup();
    checks.signature.dedup();
    checks
}

/// Which check failed on an error line: a parameter's type or the count.
#[derive(Clone, Copy)]
enum Check {
    Param,
    Count,
}

/// The failed check of an error line and its template arguments, the entry's position first.
fn check_args(line: &str) -> Option<(Vec<String>, Check)> {
    match (template_args(line, PARAM_CHECK), template_args(line, COUNT_CHECK)) {
        (Some(args), None) => Some((args, Check::Param)),
        (None, Some(args)) => Some((args, Check::Count)),
        _ => None,
    }
}

/// The problem one error line of a check reports.
fn problem(line: &str, manifest: &Manifest, manifest_name: &str, module: &str) -> Option<SignatureProblem> {
    let (args, check) = check_args(line)?;
    let ordinal: usize = args.first()?.parse().ok()?;
    let entry = *checked_entries(manifest, module).get(ordinal)?;
    Some(SignatureProblem {
        listed_at: listed_at(manifest_name, entry),
        symbol: format!("{}::{}", entry.module, entry.entry),
        mismatch: mismatch_of(check, &args, entry)?,
    })
}

/// What a failed `check` of `entry` with template arguments `args` says, in manifest terms.
fn mismatch_of(check: Check, args: &[String], entry: &Entry) -> Option<SignatureMismatch> {
    let params = entry.params.as_ref()?;
    match (check, args) {
        (Check::Count, [_, declared, found]) => {
            Some(SignatureMismatch::Count { declared: declared.parse().ok()?, found: found.parse().ok()? })
        }
        (Check::Param, [_, index, _, found]) => {
            let index: usize = index.parse().ok()?;
            let param = params.get(index)?;
            Some(SignatureMismatch::Type {
                index,
                name: param.name.clone(),
                // From the manifest rather than the compiler's text: the message uses one spelling.
                declared: c_type(&param.ty).manifest_spelling().to_string(),
                found: spelling(found),
            })
        }
        _ => None,
    }
}

/// The arguments of the last `template<...>` in `line`: the `aka` form, where nvcc prints one,
/// has the helpers' aliases resolved, which the form before it does not.
fn template_args(line: &str, template: &str) -> Option<Vec<String>> {
    let start = line.rfind(template)? + template.len();
    let mut args = Vec::new();
    let (mut depth, mut current) = (0usize, String::new());
    for c in line[start..].chars() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' if depth == 0 => {
                args.push(current.trim().to_owned());
                return Some(args);
            }
            '>' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                args.push(std::mem::take(&mut current).trim().to_owned());
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    None
}

/// A C type as nvcc prints it, in manifest spelling where `unit`'s tags name it
/// (`const kda_manifest::t_bf16 *` → `const bf16*`), else as C with the pointer's space dropped
/// (`double *` → `double*`).
fn spelling(c_type: &str) -> String {
    c_type.replace("kda_manifest::t_", "").replace(" *", "*").replace("* ", "*")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_args_nest_and_stop_at_the_closing_bracket() {
        let line = r#"x.cu(3): error: incomplete type "a::kda_param_mismatch<12, 1, kda_check::kda_spell<float *>::type, X>" (aka "a::kda_param_mismatch<12, 1, f<int, (*)(int)>, const kda_manifest::t_bf16 *>") is not allowed"#;
        assert_eq!(
            template_args(line, PARAM_CHECK).unwrap(),
            ["12", "1", "f<int, (*)(int)>", "const kda_manifest::t_bf16 *"]
        );
        assert_eq!(template_args("kda_param_mismatch<1, 2", PARAM_CHECK), None);
    }

    #[test]
    fn types_are_spelled_as_the_manifest_does_where_it_can() {
        assert_eq!(spelling("const kda_manifest::t_bf16 *"), "const bf16*");
        assert_eq!(spelling("kda_manifest::t_u64"), "u64");
        assert_eq!(spelling("kda_manifest::t_bool"), "bool");
        assert_eq!(spelling("kda_manifest::t_f32 *const *"), "f32*const*");
        assert_eq!(spelling("unsigned long"), "unsigned long");
        assert_eq!(spelling("const __half *"), "const __half*");
    }
}
