//! Entry points that are C++ function template instantiations: `softmax<float, 256>`. The build
//! instantiates each one itself and finds the name the module exports it under, so a library's
//! templates need no `extern "C"` wrapper.

use super::DType;
use super::ident::is_c_identifier;

/// A template instantiation as an entry names it: the template and its arguments, each a C type
/// of kda's table or an integer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateId<'a> {
    /// The function template's name.
    pub name: &'a str,
    /// Its arguments, in order.
    pub args: Vec<TemplateArg<'a>>,
}

/// One template argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateArg<'a> {
    /// A type, as C spells it (`float`, `__half`, `unsigned int`).
    Type(&'a str),
    /// An integer constant.
    Int(i64),
}

impl<'a> TemplateId<'a> {
    /// `entry` as a template instantiation, if it is one (`name<...>`); `Err` with what is wrong
    /// where it has angle brackets but is not a well-formed one.
    pub fn parse(entry: &'a str) -> Option<Result<Self, String>> {
        let (name, rest) = entry.split_once('<')?;
        Some(Self::parse_parts(name.trim(), rest))
    }

    fn parse_parts(name: &'a str, rest: &'a str) -> Result<Self, String> {
        if !is_c_identifier(name) {
            // Escaped, as the entry point it came from is: a name may hold line breaks, and a
            // message is one line.
            return Err(format!("the template's name `{}` is not a C identifier", name.escape_debug()));
        }
        let Some(inside) = rest.trim_end().strip_suffix('>') else {
            return Err("a template instantiation ends with `>`, as in `softmax<float>`".to_owned());
        };
        let args = inside
            .split(',')
            .map(|arg| {
                let arg = arg.trim();
                if let Ok(value) = arg.parse::<i64>() {
                    Ok(TemplateArg::Int(value))
                } else if DType::ALL
                    .iter()
                    .any(|dtype| *dtype != DType::Void && dtype.c_types().contains(&arg))
                {
                    Ok(TemplateArg::Type(arg))
                } else {
                    Err(format!(
                        "template argument `{}` is neither an integer nor a C type of an element type \
                         (`float`, `__half`, `__nv_bfloat16`, `unsigned int`, ...)",
                        arg.escape_debug()
                    ))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TemplateId { name, args })
    }
}

impl std::fmt::Display for TemplateId<'_> {
    /// The instantiation as the build and the emulator name it: `softmax<float, 256>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|arg| match arg {
                TemplateArg::Type(ty) => (*ty).to_owned(),
                TemplateArg::Int(value) => value.to_string(),
            })
            .collect();
        write!(f, "{}<{}>", self.name, args.join(", "))
    }
}
