//! nvcc's errors from the checks of `unit`, mapped back to the manifest.

use super::unit::checked_entries;
use super::{SignatureMismatch, SignatureProblem, manifest_spelling};
use crate::Manifest;
use crate::cuda::problem::listed_at;

const PARAM_CHECK: &str = "kda_param_mismatch<";
const COUNT_CHECK: &str = "kda_count_mismatch<";

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

/// An error line of nvcc or of a tool it runs (`file(12): error: ...`, `fatal error: ...`).
fn is_error(line: &str) -> bool {
    line.contains(" error:") || line.starts_with("error")
}

/// The problem one error line of a check reports.
fn problem(line: &str, manifest: &Manifest, manifest_name: &str, module: &str) -> Option<SignatureProblem> {
    let (is_count, args) = match (template_args(line, PARAM_CHECK), template_args(line, COUNT_CHECK)) {
        (Some(args), None) => (false, args),
        (None, Some(args)) => (true, args),
        _ => return None,
    };
    let ordinal: usize = args.first()?.parse().ok()?;
    let (entry, params) = *checked_entries(manifest, module).get(ordinal)?;
    let mismatch = match (is_count, args.as_slice()) {
        (true, [_, declared, found]) => {
            SignatureMismatch::Count { declared: declared.parse().ok()?, found: found.parse().ok()? }
        }
        (false, [_, index, _, found]) => {
            let index: usize = index.parse().ok()?;
            let param = params.get(index)?;
            SignatureMismatch::Type {
                index,
                name: param.name.clone(),
                // From the manifest rather than nvcc's text: the message uses one spelling.
                declared: manifest_spelling(&param.ty),
                found: spelling(found),
            }
        }
        _ => return None,
    };
    Some(SignatureProblem {
        listed_at: listed_at(manifest_name, entry),
        symbol: format!("{}::{}", entry.module, entry.entry),
        mismatch,
    })
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
