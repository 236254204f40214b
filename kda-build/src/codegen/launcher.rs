//! Typed launchers: for each entry with `params`, a struct of its named arguments (in a module
//! named after the marker type) and a `launch_<field>` method on the handles struct that turns
//! them into the checked launch.
//!
//! ```text
//! kernels.launch_gemm(gpu, geometry, my_model::gemm { a: x.view().into(), b: w.view().into(), c: y.view_mut().into(), m, n, k })?;
//! ```
//!
//! Each buffer field is a typed argument over the parameter's element type (`In<'a, f32>` for a
//! `const float*`, `Out<'a, bf16>` for a `__nv_bfloat16*`), made with `.into()` from a kda view or
//! an engine's cudarc memory. A wrong count of arguments, a scalar for a buffer, a shared borrow
//! where the kernel writes, or cudarc memory of another element type is a type error at the call
//! site; a kda view's element type, every extent and the requirements are checked at launch.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

use super::tokens::{Code, LOCAL_PREFIX, Str};
use super::variants;

use crate::manifest::{DType, Entry, Param, ParamType, ScalarKind, Table};

/// The doc of the arguments module of `table`.
pub(super) fn module_doc(table: &Table, manifest: &str) -> String {
    format!(
        " The arguments of the kernels of `[{}]` in `{manifest}`, one struct per entry with `params`, \
         named after its field. The handles struct launches each with `launch_<field>`, which checks \
         every view's element type and extent and the entry's requirements before anything reaches \
         the device: an `Err` names the parameter and nothing runs, as it does for an optional entry \
         the target lacks.",
        table.name
    )
}

/// The macros the entries' argument structs and launchers are written with, for the table's
/// arguments module `module` and handles struct `kernels`: defined once, before both, so each
/// entry's code is its data (its names, docs and the kind of each field, see [`field_kind`]).
/// Launchers with `safety` conditions are written out (see [`write_launcher`]); a variant group's
/// trait, impls, argument struct and generic launcher come from the same macros.
pub(super) fn macros(
    module: &Ident,
    kernels: &Ident,
    entry_enum: &Ident,
    table: &Table,
    manifest: &str,
) -> Result<TokenStream, String> {
    let (args_macro, launch_macro) =
        (format_ident!("{LOCAL_PREFIX}args"), format_ident!("{LOCAL_PREFIX}launch"));
    // One rule per kind of buffer field the table has, so that each field is one token.
    let mut kinds: Vec<(bool, bool, DType)> = Vec::new();
    for param in table.entries.iter().filter_map(|entry| entry.params.as_deref()).flatten() {
        if let ParamType::Buffer { writable, nullable, element, .. } = param.ty
            && !kinds.contains(&(writable, nullable, element))
        {
            kinds.push((writable, nullable, element));
        }
    }
    let mut buffer_rules = TokenStream::new();
    for (writable, nullable, element) in kinds {
        let mut ty_code = Code::default();
        ty_code.push(&buffer_type(writable, nullable, &element_type(element)));
        let kind = Ident::new(&buffer_kind(writable, nullable, element), Span::call_site());
        let ty = ty_code.parse("a buffer's type")?;
        buffer_rules.extend(quote!((@ty #kind) => { #ty };));
    }
    // Tokens, not text: the launcher's parameters and locals are mixed-site, so no constant of the
    // deriving module (`const geometry`) is read as their pattern, and the docs show their names.
    let (gpu, geometry, args, handle) = (
        Ident::new("gpu", Span::mixed_site()),
        Ident::new("geometry", Span::mixed_site()),
        Ident::new("args", Span::mixed_site()),
        Ident::new("handle", Span::mixed_site()),
    );
    let module_name = module.to_string();
    // What every argument struct's doc says of its table and manifest.
    let (table_prefix, manifest_prefix) = (format!("{}.", table.name), format!("{manifest}:"));
    let index = format_ident!("{LOCAL_PREFIX}INDEX");
    let result = quote!(::core::result::Result<(), ::kda_runtime::BackendError>);
    // `launch_` and a field the manifest may spell in any case: `#[allow(non_snake_case)]`. The
    // launchers pass each argument by its field (`args.n`), so no manifest name binds a local.
    Ok(quote! {
        #[allow(unused_macros)]
        macro_rules! #args_macro {
            // A field's type, from its kind: a buffer's typed argument over its element type, read or
            // written, maybe nullable (its lifetime is the struct's `'a`), a primitive, or the type
            // written out.
            #buffer_rules
            (@ty $ty:ident) => { $ty };
            (@ty ($($ty:tt)*)) => { $($ty)* };
            // A variant group's element-type trait: its items are provided, from the variant's
            // position the sealed trait holds.
            (trait $group:ident $trait:ident $doc:literal [$($bound:tt)*]) => {
                #[doc = $doc]
                pub trait $trait: sealed::$group $($bound)* {
                    /// The entry of this type's variant.
                    const ENTRY: &'static ::kda_runtime::KernelEntry =
                        &super::#kernels::ENTRIES[<Self as sealed::$group>::#index];
                    /// This type's variant in a resolved table; an `Err` where the target lacks it.
                    fn handle(
                        kernels: &super::#kernels,
                    ) -> ::core::result::Result<::kda_runtime::KernelHandle, ::kda_runtime::BackendError> {
                        let #handle = kernels.handle(super::#entry_enum::ALL[<Self as sealed::$group>::#index]);
                        ::kda_runtime::FieldHandle::launch_handle(#handle, || *Self::ENTRY)
                    }
                }
            };
            // The sealed trait's impls: each declared type, with its variant's position.
            (sealed $group:ident $(($ty:ty) $index:literal)*) => {
                $(impl sealed::$group for $ty { const #index: usize = $index; })*
            };
            // A variant group's argument struct, generic over `T` where a scalar is of its type:
            // its types written out, as a derive on a generic struct reads them before expansion.
            (group $doc:literal $name:ident [$($generics:tt)*] $($field_doc:literal $field:ident ($($ty:tt)*))*) => {
                #[doc = $doc]
                #[derive(Debug)]
                pub struct $name<$($generics)*> {
                    $(#[doc = $field_doc] pub $field: $($ty)*,)*
                }
            };
            // The entries' argument structs: each one's symbol, line and requirements (the rest of its
            // doc is this one's), name, lifetime and position, then each field's doc, name and kind.
            ($($symbol:literal $line:literal $requires:literal $name:ident [$($lifetime:lifetime)?] $index:literal
             { $($field_doc:literal $field:ident $kind:tt)* })*) => {
                $(
                    // A table's API: a crate uses what its model launches (the lint would otherwise
                    // reach into the derive's output, which `macro_rules!` items are part of).
                    #[doc = ::core::concat!(
                        " The arguments of `", #table_prefix, ::core::stringify!($name), "` (`", $symbol, "`, ",
                        #manifest_prefix, $line, "), in the kernel's order.", $requires
                    )]
                    #[derive(Debug)]
                    #[allow(dead_code)]
                    pub struct $name<$($lifetime)?> {
                        $(#[doc = $field_doc] pub $field: #args_macro!(@ty $kind),)*
                    }

                    #[allow(dead_code)]
                    impl<$($lifetime)?> $name<$($lifetime)?> {
                        /// The entry these arguments launch, with its signature.
                        pub const ENTRY: &'static ::kda_runtime::KernelEntry = &super::#kernels::ENTRIES[$index];
                    }
                )*
            };
        }
        #[allow(unused_macros)]
        macro_rules! #launch_macro {
            // A variant group's: the variant of element type `T`, through the group's trait. Its
            // bound is the derive's own tokens, which a missing impl's error points at.
            (generic $name:ident $group:ident $trait:ident [$($bound:tt)*] [$($generics:tt)*] $($param:ident)*) => {
                #[doc = ::core::concat!(
                    " Launches the variant of `", ::core::stringify!($group),
                    "` for the element type `T` ([`", #module_name, "::", ::core::stringify!($trait),
                    "`]) with [`", #module_name, "::", ::core::stringify!($group), "`], checked."
                )]
                #[allow(non_snake_case)]
                pub fn $name<$($bound)*>(
                    &self,
                    #gpu: &dyn ::kda_runtime::GpuBackend,
                    #geometry: ::kda_runtime::LaunchGeometry,
                    #args: #module::$group<$($generics)*>,
                ) -> #result {
                    let #handle = <T as #module::$trait>::handle(self)?;
                    #gpu.launch(#handle, #geometry, &mut [$(#args.$param.into()),*])
                }
            };
            // The entries' launchers: each one's name, field, lifetime, position and parameters.
            ($($name:ident $field:ident [$($lifetime:lifetime)?] $index:literal { $($param:ident)* })*) => {
                $(
                    // The checks a launch runs are documented once, on the module; this names the
                    // entry.
                    #[doc = ::core::concat!(
                        " Launches `", ::core::stringify!($field), "` with [`", #module_name, "::",
                        ::core::stringify!($field), "`], checked."
                    )]
                    #[allow(non_snake_case, dead_code)]
                    pub fn $name(
                        &self,
                        #gpu: &dyn ::kda_runtime::GpuBackend,
                        #geometry: ::kda_runtime::LaunchGeometry,
                        #args: #module::$field<$($lifetime)?>,
                    ) -> #result {
                        let #handle = ::kda_runtime::FieldHandle::launch_handle(self.$field, || Self::ENTRIES[$index])?;
                        #gpu.launch(#handle, #geometry, &mut [$(#args.$param.into()),*])
                    }
                )*
            };
        }
    })
}

/// The items of the arguments module `module` (the argument structs of `table`'s entries with
/// params, and the variant groups' items); their launcher methods go to `methods`, the handles
/// struct's `impl`.
pub(super) fn write_launchers(methods: &mut Code, module: &str, table: &Table) -> Code {
    // One invocation of each macro for consecutive entries: a written-out launcher ends the
    // launch macro's, so the methods stay in manifest order.
    let mut items = Code::default();
    write!(items, "{LOCAL_PREFIX}args! {{");
    let mut launching = false;
    for (index, entry) in table.entries.iter().enumerate() {
        let Some(params) = &entry.params else { continue };
        write_args_struct(&mut items, index, entry, params);
        write_method(methods, &mut launching, module, index, entry, params);
    }
    items.push("}\n");
    if launching {
        methods.push("}\n");
    }
    variants::write_generic_launchers(&mut items, methods, module, table);
    items
}

/// The Rust type of a scalar parameter: the primitive of its name, or the `half` type kda-runtime
/// re-exports (`f16` is no stable primitive).
pub(super) fn scalar_type(kind: ScalarKind) -> String {
    match kind {
        ScalarKind::F16 | ScalarKind::Bf16 => format!("::kda_runtime::{}", kind.name()),
        ScalarKind::U32
        | ScalarKind::I32
        | ScalarKind::U64
        | ScalarKind::F32
        | ScalarKind::F64
        | ScalarKind::I8
        | ScalarKind::U8
        | ScalarKind::I16
        | ScalarKind::U16
        | ScalarKind::I64
        | ScalarKind::Bool => kind.name().to_owned(),
    }
}

/// What stands for a buffer's element type in [`buffer`]'s types.
const ELEMENT: &str = "ELEMENT";

/// A buffer's field: its Rust type, of element type [`ELEMENT`].
fn buffer(writable: bool, nullable: bool) -> &'static str {
    match (writable, nullable) {
        (false, false) => "::kda_runtime::In<'a, ELEMENT>",
        (true, false) => "::kda_runtime::Out<'a, ELEMENT>",
        // `None` is the null pointer.
        (false, true) => "::core::option::Option<::kda_runtime::In<'a, ELEMENT>>",
        (true, true) => "::core::option::Option<::kda_runtime::Out<'a, ELEMENT>>",
    }
}

/// A buffer field's kind, as the arguments macro names it (see [`macros`]): `read_f32`,
/// `nullable_write_bf16`.
fn buffer_kind(writable: bool, nullable: bool, element: DType) -> String {
    let access = if writable { "write" } else { "read" };
    let nullable = if nullable { "nullable_" } else { "" };
    format!("{nullable}{access}_{}", element.name())
}

/// The Rust type a typed argument takes for an element type: what kda-runtime names it
/// ([`Untyped`](::kda_runtime::Untyped) for `void`).
pub(super) fn element_type(dtype: DType) -> String {
    match dtype {
        DType::Bf16 | DType::F16 => format!("::kda_runtime::{}", dtype.name()),
        DType::Fp8E4M3 => "::kda_runtime::Fp8E4M3".to_owned(),
        DType::Fp8E5M2 => "::kda_runtime::Fp8E5M2".to_owned(),
        DType::Void => "::kda_runtime::Untyped".to_owned(),
        _ => dtype.name().to_owned(),
    }
}

/// The Rust type of a buffer's field, of element type `element` (a Rust type).
pub(super) fn buffer_type(writable: bool, nullable: bool, element: &str) -> String {
    buffer(writable, nullable).replace(ELEMENT, element)
}

/// The kind of an argument struct's field for `param`, as the arguments macro reads it: a
/// buffer's (see [`buffer_kind`]), a primitive's name, or a path type in parentheses.
fn field_kind(param: &Param) -> String {
    match &param.ty {
        ParamType::Buffer { writable, nullable, element, .. } => buffer_kind(*writable, *nullable, *element),
        ParamType::Scalar(scalar) => match scalar_type(*scalar) {
            ty if ty.contains("::") => format!("({ty})"),
            ty => ty,
        },
    }
}

/// The doc of an argument struct's field for `param`: its manifest declaration.
pub(super) fn field_doc(param: &Param) -> String {
    format!(" `{} {}`", param.ty, param.name)
}

/// An argument struct's field for `param`, of kind `kind` (a view's, or a type in parentheses),
/// with its doc, as the arguments macro reads it.
pub(super) fn write_field(code: &mut Code, param: &Param, kind: &str) {
    writeln!(code, "{} {} {kind}", Str(&field_doc(param)), param.name);
}

/// Whether the entry takes a buffer, so its argument struct borrows.
pub(super) fn borrows(params: &[Param]) -> bool {
    params.iter().any(|param| matches!(param.ty, ParamType::Buffer { .. }))
}

/// An entry's argument struct: its symbol, line and requirements (the rest of its doc is the
/// macro's), its name, lifetime and position, then each field.
fn write_args_struct(code: &mut Code, index: usize, entry: &Entry, params: &[Param]) {
    let mut requires = String::new();
    if !entry.requires.is_empty() {
        requires.push_str("\n\n A launch must also satisfy:");
        for requirement in &entry.requires {
            requires.push_str(&format!("\n - `{}`", requirement.text));
        }
    }
    let symbol = format!("{}::{}", entry.module, entry.entry);
    let lifetime = if borrows(params) { "'a" } else { "" };
    writeln!(
        code,
        "{} {} {} {} [{lifetime}] {index} {{",
        Str(&symbol),
        entry.location.line,
        Str(&requires),
        entry.field
    );
    for param in params {
        write_field(code, param, &field_kind(param));
    }
    code.push("}\n");
}

/// An entry's launcher: its data in the launch macro's invocation (which `launching` says is
/// open), or written out where a parameter has `safety` conditions.
fn write_method(
    code: &mut Code,
    launching: &mut bool,
    module: &str,
    index: usize,
    entry: &Entry,
    params: &[Param],
) {
    let (field, p) = (&entry.field, LOCAL_PREFIX);
    let lifetime = if borrows(params) { "'_" } else { "" };
    if params.iter().all(|param| param.safety.is_none()) {
        if !std::mem::replace(launching, true) {
            write!(code, "{p}launch! {{");
        }
        write!(code, "\nlaunch_{field} {field} [{lifetime}] {index} {{");
        for param in params {
            write!(code, " {}", param.name);
        }
        code.push(" }");
        return;
    }
    if std::mem::replace(launching, false) {
        code.push("}\n");
    }
    // The checks a launch runs are documented once, on the module; this names the entry.
    let doc = format!(" Launches `{field}` with [`{module}::{field}`], checked.");
    let handle = if entry.optional {
        format!(
            "match self.{field} {{
                ::core::option::Option::Some({p}handle) => {p}handle,
                ::core::option::Option::None => {{
                    return ::core::result::Result::Err(::kda_runtime::BackendError::Absent {{
                        entry: ::std::boxed::Box::new(Self::ENTRIES[{index}]),
                    }});
                }}
            }}"
        )
    } else {
        format!("self.{field}")
    };
    write_launcher(
        code,
        Launcher {
            doc,
            name: format!("launch_{field}"),
            generics: String::new(),
            args: format!("{module}::{field}<{lifetime}>"),
            pattern: format!("{module}::{field}"),
            params,
            handle,
            entry: format!("&Self::ENTRIES[{index}]"),
        },
    );
}

/// A launcher method of the handles struct: what varies between an entry's own and a variant
/// group's generic one.
pub(super) struct Launcher<'a> {
    /// Its doc comment's first line.
    pub doc: String,
    /// `launch_<field>`.
    pub name: String,
    /// Its generic parameters, with their angle brackets (or nothing).
    pub generics: String,
    /// The type of its argument struct.
    pub args: String,
    /// The path its argument struct is destructured by.
    pub pattern: String,
    /// The entry's parameters (a variant group's: any variant's).
    pub params: &'a [Param],
    /// An expression for the handle to launch (it may `return` an `Err`).
    pub handle: String,
    /// An expression for the `&'static KernelEntry` launched.
    pub entry: String,
}

/// The method: safe over `GpuBackend::launch`, or, where a parameter has `safety` conditions, an
/// `unsafe fn` over `launch_trusting` whose `# Safety` lists them.
pub(super) fn write_launcher(code: &mut Code, launcher: Launcher<'_>) {
    let Launcher { doc, name, generics, args, pattern, params, handle, entry } = launcher;
    let trusted: Vec<String> = params
        .iter()
        .filter_map(|param| {
            param.safety.as_ref().map(|condition| format!(" - `{}`: {condition}", param.name))
        })
        .collect();
    let unsafety = if trusted.is_empty() {
        code.doc([doc]);
        ""
    } else {
        let safety = [
            String::new(),
            " # Safety".to_owned(),
            String::new(),
            " What the kernel touches through these buffers depends on data kda cannot check before \
             the launch; the caller guarantees, for these arguments and this geometry:"
                .to_owned(),
        ];
        code.doc([doc].into_iter().chain(safety).chain(trusted));
        "unsafe "
    };
    // The parameters are named as `resolve`'s `gpu` is, for the docs; the locals have the
    // reserved prefix, so no manifest name (a field of the pattern) can capture them.
    let p = LOCAL_PREFIX;
    // `launch_` and a field the manifest may spell in any case: `#[allow(non_snake_case)]`.
    write!(
        code,
        "
        #[allow(non_snake_case)]
        pub {unsafety}fn {name}{generics}(
            &self,
            gpu: &dyn ::kda_runtime::GpuBackend,
            geometry: ::kda_runtime::LaunchGeometry,
            args: {args},
        ) -> ::core::result::Result<(), ::kda_runtime::BackendError> {{
            let {pattern} {{"
    );
    for (index, param) in params.iter().enumerate() {
        write!(code, " {}: {p}{index},", param.name);
    }
    write!(code, " }} = args;\nlet {p}handle = {handle};\n");
    let mut arguments = String::from("&mut [");
    for index in 0..params.len() {
        arguments.push_str(&format!("{p}{index}.into(),"));
    }
    arguments.push(']');
    if unsafety.is_empty() {
        write!(code, "gpu.launch({p}handle, geometry, {arguments})\n}}\n");
    } else {
        write!(
            code,
            "// SAFETY: the caller guarantees the entry's conditions; `launch_trusting` refuses a
            // handle that is not the backend's for this entry.
            unsafe {{
                ::kda_runtime::launch_trusting(gpu, {entry}, {p}handle, geometry, {arguments})
            }}
            }}\n"
        );
    }
}
