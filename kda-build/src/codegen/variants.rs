//! A variant group's generic launcher: for an entry whose `variants` have one type axis
//! (`affine` over `T = ["f32", "f16", "bf16"]`), `launch_affine::<T>` launches the variant of
//! element type `T`, through an argument struct `affine` whose fields of type `T` are `T`. A
//! sealed trait `affine_type` is implemented for the declared types only, so `launch_affine::<i8>`
//! does not compile where i8 is not declared. Each variant keeps its own handle and launcher.

use std::collections::HashMap;

use super::launcher::{
    Launcher, borrows, buffer_type, element_type, scalar_type, write_field, write_launcher,
};
use super::tokens::{Code, LOCAL_PREFIX};
use crate::manifest::{AxisValue, DType, Param, ParamType, Table};

/// One group: its key, its type axis, each variant's entry index and type, and its parameters.
struct Group<'a> {
    name: &'a str,
    axis: &'a str,
    variants: Vec<(usize, DType)>,
    params: &'a [Param],
}

/// Writes the items of every eligible group (traits, impls and argument structs) to `items`, the
/// arguments module `module`, and their launcher methods to `methods`, the handles struct's `impl`.
pub(super) fn write_generic_launchers(items: &mut Code, methods: &mut Code, module: &str, table: &Table) {
    let groups = groups(table);
    if groups.is_empty() {
        return;
    }
    items.push(
        "/// What seals each variant group's element-type trait: only the declared types have it.
        mod sealed {",
    );
    for group in &groups {
        // The variant's position in the table, which the group's trait reads its items from.
        write!(items, " pub trait {} {{ const {LOCAL_PREFIX}INDEX: usize; }}", group.name);
    }
    items.push(" }\n");
    for group in &groups {
        write_items(items, group, &table.name);
        write_method(methods, group, module);
    }
}

/// The groups with one type axis whose variants all have `params`, in the order of their first
/// variant.
fn groups(table: &Table) -> Vec<Group<'_>> {
    // Each group's place among them, in the order of its first variant; `None` once broken.
    let mut groups: Vec<Option<Group<'_>>> = Vec::new();
    let mut places: HashMap<&str, usize> = HashMap::new();
    for (index, entry) in table.entries.iter().enumerate() {
        let Some(variant) = &entry.variant else { continue };
        let group = variant.group.as_str();
        let eligible = match (&variant.axes[..], &entry.params) {
            ([(axis, AxisValue::Type(dtype))], Some(params)) => Some((axis.as_str(), *dtype, params)),
            _ => None,
        };
        let place = *places.entry(group).or_insert_with(|| {
            let (axis, params) = eligible.map_or(("", &[][..]), |(axis, _, params)| (axis, &params[..]));
            groups.push(Some(Group { name: group, axis, variants: Vec::new(), params }));
            groups.len() - 1
        });
        match (eligible, &mut groups[place]) {
            (Some((_, dtype, _)), Some(found)) => found.variants.push((index, dtype)),
            (None, slot) => *slot = None,
            (Some(_), None) => {}
        }
    }
    groups.into_iter().flatten().collect()
}

/// Whether a parameter is a scalar of the group's type axis: a field of type `T`.
fn generic_scalar(param: &Param, axis: &str) -> bool {
    matches!(param.ty, ParamType::Scalar(_)) && param.type_axis.as_deref() == Some(axis)
}

/// Whether a parameter is of the group's type axis: a scalar of type `T`, or a buffer of `T`
/// elements (a field `In<'a, T>` or `Out<'a, T>`).
fn generic(param: &Param, axis: &str) -> bool {
    param.type_axis.as_deref() == Some(axis)
}

/// The group's trait, its impls for the declared types and its argument struct.
fn write_items(code: &mut Code, group: &Group<'_>, table: &str) {
    let (name, p) = (group.name, LOCAL_PREFIX);
    let types: Vec<&str> = group.variants.iter().map(|(_, dtype)| dtype.name()).collect();
    let takes_scalar = group.params.iter().any(|param| generic_scalar(param, group.axis));
    // A scalar of type `T` is passed by value: `T` must be a scalar kind.
    let scalar_bound = if takes_scalar { "+ ::kda_runtime::ScalarValue" } else { "" };
    write!(code, "{p}args! {{ trait {name} {name}_type ");
    code.doc_literal([format!(
        " The element types `[{table}].{name}` is instantiated for ({}): `launch_{name}::<T>` takes any of \
         them, and no other.",
        types.join(", "),
    )]);
    // The trait's impls are written out, where a missing impl's error lists them; the sealed
    // trait's, with each variant's position, come from the macro.
    write!(code, " [{scalar_bound}] }}\n{p}args! {{ sealed {name}");
    for (index, dtype) in &group.variants {
        write!(code, " ({}) {index}", element_type(*dtype));
    }
    code.push(" }\n");
    for (_, dtype) in &group.variants {
        writeln!(code, "impl {name}_type for {} {{}}", element_type(*dtype));
    }
    write!(code, "{p}args! {{ group ");
    code.doc_literal([format!(
        " The arguments of any variant of `[{table}].{name}`, in the kernel's order, for `launch_{name}`."
    )]);
    writeln!(code, " {name} [{}]", struct_generics(group, "'a"));
    for param in group.params {
        let generic = generic(param, group.axis);
        let ty = match &param.ty {
            ParamType::Scalar(_) if generic => "T".to_owned(),
            ParamType::Scalar(kind) => scalar_type(*kind),
            ParamType::Buffer { element, writable, nullable, .. } => {
                let element = if generic { "T".to_owned() } else { element_type(*element) };
                buffer_type(*writable, *nullable, &element)
            }
        };
        write_field(code, param, &format!("({ty})"));
    }
    code.push("}\n");
}

/// The argument struct's generics without their angle brackets, its lifetime spelled `lifetime`:
/// the lifetime where it borrows, `T` where a scalar is of type `T`.
fn struct_generics(group: &Group<'_>, lifetime: &str) -> String {
    let lifetime = borrows(group.params).then_some(lifetime);
    let ty = group.params.iter().any(|param| generic(param, group.axis)).then_some("T");
    let parts: Vec<&str> = lifetime.into_iter().chain(ty).collect();
    parts.join(", ")
}

/// The group's generic launcher: through the launch macro, or written out where a parameter has
/// `safety` conditions (an `unsafe fn` whose `# Safety` lists them).
fn write_method(code: &mut Code, group: &Group<'_>, module: &str) {
    let name = group.name;
    let trait_name = format!("{module}::{name}_type");
    let generics = struct_generics(group, "'_");
    if group.params.iter().all(|param| param.safety.is_none()) {
        write!(
            code,
            "{LOCAL_PREFIX}launch! {{ generic launch_{name} {name} {name}_type [T: {trait_name}] [{generics}]"
        );
        for param in group.params {
            write!(code, " {}", param.name);
        }
        code.push(" }\n");
        return;
    }
    write_launcher(
        code,
        Launcher {
            doc: format!(
                " Launches the variant of `{name}` for the element type `T` ([`{trait_name}`]) with \
                 [`{module}::{name}`], checked."
            ),
            name: format!("launch_{name}"),
            generics: format!("<T: {trait_name}>"),
            args: format!("{module}::{name}<{generics}>"),
            pattern: format!("{module}::{name}"),
            params: group.params,
            handle: format!("<T as {trait_name}>::handle(self)?"),
            entry: format!("<T as {trait_name}>::ENTRY"),
        },
    );
}
