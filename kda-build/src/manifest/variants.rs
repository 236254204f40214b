//! One entry for a kernel's instantiations: `variants = { T = ["f32", "bf16"] }` on an entry
//! whose `entry` names each instantiation expands, as it is read, into one entry per combination
//! of the axes' values, field `affine_f32`, `affine_bf16`, each with its own handle, lookup and
//! launcher. The entry point names them as a library's macros do (`affine_{T}`: `affine_f32`) or
//! as a C++ template's arguments (`affine<T>`: `affine<float>`, which the build instantiates). In
//! the entry's `params` and `requires`, a type axis stands for its type and an integer axis for
//! its value. `optional = { T = ["bf16"] }` makes the variants with those values optional, for
//! targets that lack them; the others stay required.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use toml::Spanned;

use super::ident::is_c_identifier;
use super::parse::RawEntry;
use super::{DType, Diagnostic, LineIndex, ScalarKind};

/// The most entries one `variants` may expand into: a library instantiates a handful per kernel,
/// and the bound keeps a typo (an axis of 1,000 values times another) from building a huge table.
const MAX_VARIANTS: usize = 256;

/// A value of a variant axis, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawAxisValue {
    /// An element type's name.
    Type(String),
    /// An integer (a head dimension, a block size).
    Int(u32),
}

/// The axes as written: name to values, in the axes' alphabetical order.
pub(super) type RawVariants = BTreeMap<Spanned<String>, Spanned<Vec<Spanned<RawAxisValue>>>>;

/// `optional` as written: every variant (`true`), none (`false`, the default), or the variants
/// with one of the listed values of an axis (`{ T = ["bf16"] }`: a target may lack the bf16 one).
#[derive(Clone, Debug)]
pub(super) enum RawOptional {
    All(bool),
    Variants(RawVariants),
}

impl Default for RawOptional {
    fn default() -> Self {
        RawOptional::All(false)
    }
}

impl<'de> Deserialize<'de> for RawOptional {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawOptional;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a boolean, or the optional variants by axis as in `{ T = [\"bf16\"] }`")
            }
            fn visit_bool<E: serde::de::Error>(self, all: bool) -> Result<RawOptional, E> {
                Ok(RawOptional::All(all))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawOptional, A::Error> {
                let deserializer = serde::de::value::MapAccessDeserializer::new(map);
                RawVariants::deserialize(deserializer).map(RawOptional::Variants)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl RawOptional {
    /// Whether the entry, or its instantiation `variant`, is optional.
    pub fn covers(&self, variant: Option<&Variant>) -> bool {
        match (self, variant) {
            (RawOptional::All(all), _) => *all,
            (RawOptional::Variants(_), None) => false,
            (RawOptional::Variants(axes), Some(variant)) => axes.iter().any(|(axis, values)| {
                variant.axes.iter().any(|(name, value)| {
                    name == axis.get_ref()
                        && values.get_ref().iter().any(|listed| read_value(listed.get_ref()) == Some(*value))
                })
            }),
        }
    }
}

/// A value of a variant axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AxisValue {
    /// An element type: the axis is a type in `params`.
    Type(DType),
    /// An integer: the axis is a constant in extents and requirements.
    Int(u32),
}

impl fmt::Display for AxisValue {
    /// As it appears in the entry point and the field: `f32`, `128`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisValue::Type(dtype) => f.write_str(dtype.name()),
            AxisValue::Int(value) => write!(f, "{value}"),
        }
    }
}

/// Which instantiation of a kernel an entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    /// The key the entry is written under, which names the kernel (`affine`).
    pub group: String,
    /// Its position among the group's variants, in expansion order.
    pub index: usize,
    /// Each axis's name and this variant's value of it, in the axes' alphabetical order.
    pub axes: Vec<(String, AxisValue)>,
}

impl Variant {
    /// The value of the type axis `name`, if this variant has one of that name.
    pub fn type_of(&self, name: &str) -> Option<DType> {
        self.axes.iter().find_map(|(axis, value)| match value {
            AxisValue::Type(dtype) if axis == name => Some(*dtype),
            _ => None,
        })
    }

    /// The integer axes, as the constants extents and requirements may use.
    pub fn constants(&self) -> impl Iterator<Item = (&str, u32)> {
        self.axes.iter().filter_map(|(axis, value)| match value {
            AxisValue::Int(value) => Some((axis.as_str(), *value)),
            AxisValue::Type(_) => None,
        })
    }
}

/// The entries `raw` stands for: itself, or one per combination of its `variants`, each with its
/// field and entry point named for its values. Problems go to `diagnostics` and expand to nothing.
pub(super) fn expand(
    source: &LineIndex<'_>,
    field: Spanned<String>,
    mut raw: RawEntry,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<(Spanned<String>, RawEntry)> {
    let before = diagnostics.len();
    let mut problem = |span: std::ops::Range<usize>, message: String| {
        let message = format!("entry `{}`: {message}", field.get_ref());
        diagnostics.push(Diagnostic::new(source, span, message));
    };
    // Taken: each expanded entry is one variant, not the axes again.
    let Some(variants) = raw.variants.take() else {
        if let RawOptional::Variants(optional) = &raw.optional
            && let Some((axis, _)) = optional.iter().next()
        {
            problem(axis.span(), "`optional` lists variants, but the entry has no `variants`".to_owned());
            return Vec::new();
        }
        return vec![(field, raw)];
    };
    let mut axes: Vec<(String, Vec<AxisValue>)> = Vec::new();
    for (name, values) in variants.get_ref() {
        let axis = name.get_ref();
        if !is_c_identifier(axis) || DType::from_name(axis).is_some() || ScalarKind::from_name(axis).is_some()
        {
            problem(
                name.span(),
                format!(
                    "variant axis `{axis}` must be a C identifier that is not a type name, such as `T` or `D`"
                ),
            );
            continue;
        }
        let missing = match template_args(raw.entry.get_ref()) {
            Some((template, args)) => (!args.contains(&axis.as_str())).then(|| {
                format!("write `{axis}` among the template's arguments, as in `{template}<{axis}>`")
            }),
            None => (!raw.entry.get_ref().contains(&format!("{{{axis}}}"))).then(|| {
                format!("write `{{{axis}}}` where its value goes, as in `{}_{{{axis}}}`", raw.entry.get_ref())
            }),
        };
        if let Some(how) = missing {
            problem(raw.entry.span(), format!("`entry` must name each variant: {how}"));
        }
        if values.get_ref().is_empty() {
            problem(values.span(), format!("variant axis `{axis}` lists no value"));
        }
        let read: Vec<Option<AxisValue>> = values
            .get_ref()
            .iter()
            .map(|value| {
                let read = read_value(value.get_ref());
                if let (None, RawAxisValue::Type(name)) = (read, value.get_ref()) {
                    let all: Vec<&str> =
                        DType::ALL.iter().filter(|d| **d != DType::Void).map(|d| d.name()).collect();
                    let message = format!(
                        "variant `{name}` of axis `{axis}` is no element type: expected {} or an integer",
                        all.join(", ")
                    );
                    problem(value.span(), message);
                }
                read
            })
            .collect();
        let read: Vec<AxisValue> = read.into_iter().flatten().collect();
        if read.iter().any(|v| matches!(v, AxisValue::Int(_)))
            && read.iter().any(|v| matches!(v, AxisValue::Type(_)))
        {
            problem(
                values.span(),
                format!("variant axis `{axis}` mixes types and integers: an axis is one or the other"),
            );
        }
        for (i, value) in read.iter().enumerate() {
            if read[..i].contains(value) {
                problem(values.span(), format!("variant axis `{axis}` lists `{value}` twice"));
            }
        }
        axes.push((axis.clone(), read));
    }
    // Every `{NAME}` of the entry point is an axis.
    for placeholder in placeholders(raw.entry.get_ref()) {
        if !variants.get_ref().keys().any(|axis| axis.get_ref() == placeholder) {
            problem(
                raw.entry.span(),
                format!("`{{{placeholder}}}` in `entry` is not a variant axis of this entry"),
            );
        }
    }
    if let RawOptional::Variants(optional) = &raw.optional {
        for (axis, values) in optional {
            let Some((_, declared)) = axes.iter().find(|(name, _)| name == axis.get_ref()) else {
                let message = format!(
                    "`optional` names `{}`, which is not a variant axis of this entry",
                    axis.get_ref()
                );
                problem(axis.span(), message);
                continue;
            };
            for value in values.get_ref() {
                if !read_value(value.get_ref()).is_some_and(|read| declared.contains(&read)) {
                    let listed = match value.get_ref() {
                        RawAxisValue::Type(name) => name.clone(),
                        RawAxisValue::Int(int) => int.to_string(),
                    };
                    let message = format!(
                        "`optional` lists `{listed}`, which is not a variant of axis `{}`",
                        axis.get_ref()
                    );
                    problem(value.span(), message);
                }
            }
        }
    }
    let count = axes.iter().try_fold(1usize, |count, (_, values)| count.checked_mul(values.len()));
    if count.is_none_or(|count| count > MAX_VARIANTS) {
        problem(variants.span(), format!("`variants` expands to more than {MAX_VARIANTS} entries"));
    }
    if diagnostics.len() > before {
        return Vec::new();
    }
    combinations(&axes)
        .into_iter()
        .enumerate()
        .map(|(index, combination)| {
            let (mut name, mut entry) = (field.get_ref().clone(), raw.entry.get_ref().clone());
            for (axis, value) in &combination {
                name = format!("{name}_{value}");
                entry = entry.replace(&format!("{{{axis}}}"), &value.to_string());
            }
            if let Some((template, args)) = template_args(&entry) {
                let args: Vec<String> = args
                    .iter()
                    .map(|arg| match combination.iter().find(|(axis, _)| axis == arg) {
                        Some((_, AxisValue::Type(dtype))) => dtype.c_type().to_owned(),
                        Some((_, AxisValue::Int(value))) => value.to_string(),
                        None => (*arg).to_owned(),
                    })
                    .collect();
                entry = format!("{template}<{}>", args.join(", "));
            }
            let variant = Variant { group: field.get_ref().clone(), index, axes: combination };
            let raw = RawEntry {
                entry: Spanned::new(raw.entry.span(), entry),
                variant: Some(variant),
                ..raw.clone()
            };
            (Spanned::new(field.span(), name), raw)
        })
        .collect()
}

/// The value an axis's `value` stands for; `None` for a name that is no element type a buffer can
/// hold.
fn read_value(value: &RawAxisValue) -> Option<AxisValue> {
    match value {
        RawAxisValue::Int(int) => Some(AxisValue::Int(*int)),
        RawAxisValue::Type(name) => {
            DType::from_name(name).filter(|dtype| *dtype != DType::Void).map(AxisValue::Type)
        }
    }
}

/// A template instantiation's name and its arguments as written, trimmed (`softmax<T, 256>`);
/// `None` for an entry point without `<`.
fn template_args(entry: &str) -> Option<(&str, Vec<&str>)> {
    let (name, rest) = entry.split_once('<')?;
    let inside = rest.trim_end().strip_suffix('>').unwrap_or(rest);
    Some((name.trim(), inside.split(',').map(str::trim).collect()))
}

/// The `{NAME}`s of an entry point.
fn placeholders(entry: &str) -> Vec<&str> {
    entry.split('{').skip(1).filter_map(|rest| rest.split_once('}').map(|(name, _)| name)).collect()
}

/// Every combination of one value per axis, the last axis varying fastest.
fn combinations(axes: &[(String, Vec<AxisValue>)]) -> Vec<Vec<(String, AxisValue)>> {
    axes.iter().fold(vec![Vec::new()], |partial, (axis, values)| {
        partial
            .iter()
            .flat_map(|prefix| {
                values.iter().map(move |value| {
                    let mut combination = prefix.clone();
                    combination.push((axis.clone(), *value));
                    combination
                })
            })
            .collect()
    })
}
