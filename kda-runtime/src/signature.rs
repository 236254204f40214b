//! The launch contract of a kernel entry, as the derive emits it from the manifest's `params` and
//! `requires`, and the check every safe launch runs against it before anything reaches a device.
//!
//! Extents and requirements are small postfix programs over the launch's integer scalars, the
//! `[defines]` (folded to literals by the derive) and the launch geometry, evaluated in `u64`:
//! overflow, subtraction below zero and division by zero are errors, never a wrapped size.

use std::fmt;

pub use kda_types::{LaunchDim, Op, ScalarKind};

use crate::{BackendError, DType, KernelArg, KernelEntry, LaunchGeometry};

/// The parameters of a kernel, in order, and what a launch must satisfy beyond their extents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Signature {
    /// The parameters, in the kernel's order.
    pub params: &'static [KernelParam],
    /// Preconditions (supported sizes, the block shape the kernel needs), all of which must hold.
    pub requires: &'static [Requirement],
}

impl Signature {
    /// The first parameter whose reach the caller must guarantee, with the condition.
    pub fn trust(&self) -> Option<(&'static str, &'static str)> {
        self.params.iter().find_map(|param| match param.kind {
            ParamKind::Buffer { extent: Extent { trust: Some(condition), .. }, .. } => {
                Some((param.name, condition))
            }
            _ => None,
        })
    }
}

/// One parameter of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelParam {
    /// Its name in the manifest (and the launcher's field).
    pub name: &'static str,
    /// What it takes.
    pub kind: ParamKind,
}

impl KernelParam {
    /// A buffer parameter `name` of `dtype` elements, at least `extent` of them (`text` as the
    /// manifest writes it, `program` in postfix order).
    pub const fn buffer(
        name: &'static str,
        dtype: DType,
        access: Access,
        text: &'static str,
        program: &'static [Op],
    ) -> Self {
        Self {
            name,
            kind: ParamKind::Buffer {
                dtype,
                access,
                extent: Extent { text, program, trust: None },
                nullable: false,
            },
        }
    }

    /// This buffer parameter, which also takes a null pointer ([`KernelArg::Null`]): the
    /// manifest's `nullable`. A scalar is returned unchanged.
    pub const fn nullable(self) -> Self {
        match self.kind {
            ParamKind::Buffer { dtype, access, extent, .. } => {
                Self { name: self.name, kind: ParamKind::Buffer { dtype, access, extent, nullable: true } }
            }
            ParamKind::Scalar(_) => self,
        }
    }

    /// This buffer parameter, whose reach also depends on what kda cannot check (the contents of
    /// an index buffer, a layout on the device): the caller of a launch guarantees `condition`,
    /// so the entry launches only through [`launch_trusting`](crate::launch_trusting). A scalar
    /// is returned unchanged.
    pub const fn trusting(self, condition: &'static str) -> Self {
        match self.kind {
            ParamKind::Buffer { dtype, access, extent: Extent { text, program, .. }, nullable } => Self {
                name: self.name,
                kind: ParamKind::Buffer {
                    dtype,
                    access,
                    extent: Extent { text, program, trust: Some(condition) },
                    nullable,
                },
            },
            ParamKind::Scalar(_) => self,
        }
    }

    /// A scalar parameter `name`.
    pub const fn scalar(name: &'static str, kind: ScalarKind) -> Self {
        Self { name, kind: ParamKind::Scalar(kind) }
    }
}

/// What a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// Device memory: at least `extent` elements of `dtype`.
    Buffer {
        /// The element type.
        dtype: DType,
        /// Whether the kernel writes it.
        access: Access,
        /// How many elements the kernel may touch.
        extent: Extent,
        /// Whether a null pointer fills it (the manifest's `nullable`).
        nullable: bool,
    },
    /// A value passed by copy.
    Scalar(ScalarKind),
}

/// Whether a kernel writes a buffer parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// `const T*`: read only; a read-only or a mutable view fills it.
    Read,
    /// `T*`: written; only a mutable view fills it.
    Write,
}

/// The alignment, in bytes, of the first byte of a `void` parameter's argument: what the widest
/// loads of CUDA's own vector types (`float4`, `int4`, `double2`) and a 16-byte `cp.async` need.
/// A kernel behind `const void*` reads structs or vectors of its own choosing, which kda cannot
/// see, so it is given the alignment that covers them all.
pub const VOID_ALIGNMENT: u64 = 16;

impl ParamKind {
    /// Bytes the parameter takes in the kernel's parameter buffer: a device pointer is 8.
    pub const fn size(&self) -> usize {
        match self {
            ParamKind::Buffer { .. } => 8,
            ParamKind::Scalar(scalar) => scalar.size(),
        }
    }

    /// The alignment, in bytes, a buffer argument's first element must have: its element type's
    /// size (every element type CUDA has is aligned to its size), or [`VOID_ALIGNMENT`] for
    /// `void`. `None` for a scalar.
    pub const fn alignment(&self) -> Option<u64> {
        match self {
            ParamKind::Buffer { dtype: DType::Void, .. } => Some(VOID_ALIGNMENT),
            ParamKind::Buffer { dtype, .. } => Some(dtype.size() as u64),
            ParamKind::Scalar(_) => None,
        }
    }
}

impl fmt::Display for ParamKind {
    /// The manifest spelling without a name: `const bf16[m*k]`, `f32[n]`, `u32`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamKind::Buffer { dtype, access, extent, nullable } => {
                let nullable = if *nullable { "nullable " } else { "" };
                let constness = if *access == Access::Read { "const " } else { "" };
                write!(f, "{nullable}{constness}{dtype}[{extent}]")
            }
            ParamKind::Scalar(scalar) => f.write_str(scalar.name()),
        }
    }
}

/// The number of elements a buffer parameter may touch, as an expression of the launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Extent {
    /// As the manifest writes it (`m*k`).
    pub text: &'static str,
    /// The expression in postfix order.
    pub program: &'static [Op],
    /// What the caller of a launch guarantees beyond the extent, where the kernel's reach
    /// depends on data (the manifest's `safety`): the extent is then only what kda can check.
    pub trust: Option<&'static str>,
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text)
    }
}

/// A precondition of a launch: a postfix program that must evaluate to true (non-zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// As the manifest writes it (`block.x == GEMM_THREADS`).
    pub text: &'static str,
    /// The condition in postfix order.
    pub program: &'static [Op],
}

impl Requirement {
    /// The requirement `text`, evaluated by `program`.
    pub const fn new(text: &'static str, program: &'static [Op]) -> Self {
        Self { text, program }
    }
}

/// The value of `dim` in `geometry`.
fn dimension(dim: LaunchDim, geometry: &LaunchGeometry) -> u32 {
    match dim {
        LaunchDim::GridX => geometry.grid.0,
        LaunchDim::GridY => geometry.grid.1,
        LaunchDim::GridZ => geometry.grid.2,
        LaunchDim::BlockX => geometry.block.0,
        LaunchDim::BlockY => geometry.block.1,
        LaunchDim::BlockZ => geometry.block.2,
        LaunchDim::SharedBytes => geometry.shared_mem_bytes,
    }
}

/// The deepest program the evaluator holds: the manifest parser bounds what one expression holds
/// at once to 126 values, and a requirement holds at most two more beside it (the value of its
/// comparison's left side, and of the alternatives before it).
const STACK_DEPTH: usize = 128;

/// Why a program could not be evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// A sum or product overflows `u64`.
    Overflow,
    /// A subtraction goes below zero.
    BelowZero,
    /// A `/`, `%` or `cdiv` by zero.
    DivisionByZero,
    /// A negative `i32` scalar where a size is computed.
    NegativeScalar,
    /// The program does not evaluate to one value, or reads an argument that is not an integer
    /// scalar (or, for a layout, an integer buffer).
    Malformed,
    /// A layout it reads is a buffer whose contents the host does not know.
    NotHostKnown,
    /// A layout holds fewer than (1 + part) × rank values.
    ShortLayout,
    /// A layout holds a negative dim or stride.
    NegativeLayout,
    /// A layout holds a dim of 0, which a strided kernel divides by (`i % dims[axis]`).
    ZeroDim,
}

impl std::error::Error for EvalError {}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EvalError::Overflow => "it overflows u64",
            EvalError::BelowZero => "a subtraction goes below zero",
            EvalError::DivisionByZero => "it divides by zero",
            EvalError::NegativeScalar => "a negative scalar cannot size anything",
            EvalError::Malformed => "the program is malformed",
            EvalError::NotHostKnown => {
                "it reads a layout the host does not know: pass a view of a `ConstBuffer` (`upload_const`)"
            }
            EvalError::ShortLayout => {
                "a layout holds fewer values than its dims and the strides it is read for"
            }
            EvalError::NegativeLayout => "a layout holds a negative dim or stride",
            EvalError::ZeroDim => {
                "a layout holds a dim of 0, which a strided kernel divides by (an empty tensor needs no launch)"
            }
        })
    }
}

/// Evaluates `program` (an extent's or a requirement's) over a launch's integer scalars, read
/// from `args` by position (its buffer arguments are not read), and its `geometry`. A tool that
/// makes launches from a signature sizes their buffers with it.
///
/// An arithmetic failure is carried on the stack as a value, so that a `Select` that does not
/// take it discards it; only the program's result, or an operand of an operation that is
/// computed, fails the evaluation.
pub fn evaluate(program: &[Op], args: &[KernelArg<'_>], geometry: &LaunchGeometry) -> Result<u64, EvalError> {
    let mut stack = [Ok(0u64); STACK_DEPTH];
    let mut depth = 0;
    for op in program {
        let value = match *op {
            Op::Literal(value) => Ok(value),
            Op::Scalar(index) => match args.get(usize::from(index)) {
                Some(KernelArg::Scalar(scalar)) => match scalar.as_size() {
                    Some(Ok(value)) => Ok(value),
                    Some(Err(_)) => Err(EvalError::NegativeScalar),
                    None => return Err(EvalError::Malformed),
                },
                _ => return Err(EvalError::Malformed),
            },
            Op::Launch(dim) => Ok(u64::from(dimension(dim, geometry))),
            Op::Strided(index, part) => {
                if depth < 1 {
                    return Err(EvalError::Malformed);
                }
                depth -= 1;
                let layout = match args.get(usize::from(index)) {
                    Some(KernelArg::Read(view)) if view.dtype().is_integer() => {
                        view.host_known().map(|bytes| (view.dtype(), bytes))
                    }
                    Some(KernelArg::Write(view)) if view.dtype().is_integer() => None,
                    _ => return Err(EvalError::Malformed),
                };
                stack[depth].and_then(|rank| {
                    let (dtype, bytes) = layout.ok_or(EvalError::NotHostKnown)?;
                    strided_reach(dtype, bytes, rank, part)
                })
            }
            Op::Select => {
                if depth < 3 {
                    return Err(EvalError::Malformed);
                }
                depth -= 3;
                let [condition, taken, other] = [stack[depth], stack[depth + 1], stack[depth + 2]];
                condition.and_then(|c| if c != 0 { taken } else { other })
            }
            binary => {
                if depth < 2 {
                    return Err(EvalError::Malformed);
                }
                depth -= 2;
                let (a, b) = (stack[depth], stack[depth + 1]);
                a.and_then(|a| b.and_then(|b| apply(binary, a, b)))
            }
        };
        if matches!(value, Err(EvalError::Malformed)) {
            return value;
        }
        *stack.get_mut(depth).ok_or(EvalError::Malformed)? = value;
        depth += 1;
    }
    if depth == 1 { stack[0] } else { Err(EvalError::Malformed) }
}

/// The reach of a strided layout of `rank` dims then runs of `rank` strides (the run `part`, from
/// one, taken), held as `dtype` integers in `bytes`: one past the largest offset it addresses.
///
/// A dim of 0 is refused rather than read as a layout that addresses nothing: a strided kernel
/// takes each axis of a flat index modulo its dim (`i % dims[axis]`), and its element count is a
/// scalar of the launch that nothing ties to the dims, so a zero dim is a division by zero in the
/// kernel whatever the extent.
fn strided_reach(dtype: DType, bytes: &[u8], rank: u64, part: u16) -> Result<u64, EvalError> {
    if part == 0 {
        return Err(EvalError::Malformed);
    }
    let size = dtype.size();
    let rank = usize::try_from(rank).map_err(|_| EvalError::ShortLayout)?;
    let count = rank.checked_mul(usize::from(part) + 1).ok_or(EvalError::ShortLayout)?;
    if bytes.len() / size < count {
        return Err(EvalError::ShortLayout);
    }
    let strides = rank * usize::from(part);
    // The host's own integers (the buffer's contents were cast from them); a signed one below
    // zero addresses nothing a kernel may reach.
    let value = |i: usize| -> Result<u64, EvalError> {
        let field = &bytes[i * size..(i + 1) * size];
        let signed = match *field {
            [a] => i128::from(a),
            [a, b] => i128::from(u16::from_ne_bytes([a, b])),
            [a, b, c, d] => i128::from(u32::from_ne_bytes([a, b, c, d])),
            _ => i128::from(u64::from_ne_bytes(field.try_into().map_err(|_| EvalError::Malformed)?)),
        };
        let bits = 8 * size as u32;
        let signed =
            if dtype.is_signed() && signed >> (bits - 1) == 1 { signed - (1 << bits) } else { signed };
        u64::try_from(signed).map_err(|_| EvalError::NegativeLayout)
    };
    let mut reach = 1u64;
    for axis in 0..rank {
        let (dim, stride) = (value(axis)?, value(strides + axis)?);
        if dim == 0 {
            return Err(EvalError::ZeroDim);
        }
        let span = (dim - 1).checked_mul(stride).ok_or(EvalError::Overflow)?;
        reach = reach.checked_add(span).ok_or(EvalError::Overflow)?;
    }
    Ok(reach)
}

fn apply(op: Op, a: u64, b: u64) -> Result<u64, EvalError> {
    let truth = |holds: bool| Ok(u64::from(holds));
    match op {
        Op::Add => a.checked_add(b).ok_or(EvalError::Overflow),
        Op::Sub => a.checked_sub(b).ok_or(EvalError::BelowZero),
        Op::Mul => a.checked_mul(b).ok_or(EvalError::Overflow),
        Op::Rem => a.checked_rem(b).ok_or(EvalError::DivisionByZero),
        Op::Div => a.checked_div(b).ok_or(EvalError::DivisionByZero),
        Op::Cdiv => {
            if b == 0 {
                Err(EvalError::DivisionByZero)
            } else {
                Ok(a.div_ceil(b))
            }
        }
        Op::Min => Ok(a.min(b)),
        Op::Max => Ok(a.max(b)),
        Op::Eq => truth(a == b),
        Op::Ne => truth(a != b),
        Op::Lt => truth(a < b),
        Op::Le => truth(a <= b),
        Op::Gt => truth(a > b),
        Op::Ge => truth(a >= b),
        Op::Or => truth(a != 0 || b != 0),
        Op::Literal(_) | Op::Scalar(_) | Op::Launch(_) | Op::Strided(..) | Op::Select => {
            Err(EvalError::Malformed)
        }
    }
}

/// The extent of every buffer argument of a launch that [`check`] accepts, in elements of its
/// view (`None` for a scalar and a null pointer): how much of each view the kernel may touch. A
/// `void` parameter's extent, in bytes, is rounded up to whole elements of the view. A launch
/// `check` refuses is the same `Err`.
pub fn extents(
    entry: &KernelEntry,
    geometry: &LaunchGeometry,
    args: &[KernelArg<'_>],
) -> Result<Vec<Option<u64>>, BackendError> {
    refuse_trusted(entry)?;
    let mut extents = vec![None; args.len()];
    checked(entry, geometry, args, |index, extent| extents[index] = Some(extent))?;
    Ok(extents)
}

/// Checks a launch of `entry` with `geometry` and `args` against the entry's signature: the
/// argument count, every scalar's kind, every requirement, then every buffer argument's kind,
/// element type, access and extent. This is what makes a safe launch safe; backends run it before
/// anything reaches the device.
///
/// A buffer argument may be longer than its extent (the kernel touches a prefix); a read-only
/// parameter takes a mutable view too, as C passes `T*` for `const T*`.
///
/// An entry whose reach depends on what the caller guarantees (a parameter the manifest's
/// `safety` names) is refused: it launches only through [`launch_trusting`](crate::launch_trusting).
pub fn check(
    entry: &KernelEntry,
    geometry: &LaunchGeometry,
    args: &[KernelArg<'_>],
) -> Result<(), BackendError> {
    refuse_trusted(entry)?;
    check_trusting(entry, geometry, args)
}

/// The refusal of a safe launch of an entry with `safety` conditions.
fn refuse_trusted(entry: &KernelEntry) -> Result<(), BackendError> {
    match entry.signature.and_then(Signature::trust) {
        Some((param, condition)) => Err(BackendError::Trusted { entry: Box::new(*entry), param, condition }),
        None => Ok(()),
    }
}

/// [`check`], for a launch whose caller guarantees the entry's `safety` conditions: everything
/// kda can check is checked.
pub(crate) fn check_trusting(
    entry: &KernelEntry,
    geometry: &LaunchGeometry,
    args: &[KernelArg<'_>],
) -> Result<(), BackendError> {
    checked(entry, geometry, args, |_, _| {})
}

/// [`check_trusting`], handing `proved` each buffer argument's position and extent (in elements
/// of its view) once it has proved the view holds that extent: the one evaluation of the extents
/// that [`check`] and [`extents`] share. A refused launch may have handed over some of them.
fn checked(
    entry: &KernelEntry,
    geometry: &LaunchGeometry,
    args: &[KernelArg<'_>],
    mut proved: impl FnMut(usize, u64),
) -> Result<(), BackendError> {
    let Some(signature) = entry.signature else {
        return Err(BackendError::NoSignature { entry: Box::new(*entry) });
    };
    let params = signature.params;
    if args.len() != params.len() {
        let expected = format!("{} ({})", params.len(), spell_params(params));
        return Err(BackendError::ArgumentCount { entry: Box::new(*entry), expected, found: args.len() });
    }
    let argument = |param: &KernelParam, expected: String, found: String| BackendError::Argument {
        entry: Box::new(*entry),
        param: param.name,
        expected,
        found,
    };
    // Scalars first: extents read them, and a scalar of the wrong kind must be named as such.
    for (param, arg) in params.iter().zip(args) {
        if let ParamKind::Scalar(kind) = param.kind
            && arg.scalar_kind() != Some(kind)
        {
            return Err(argument(param, kind.name().to_owned(), arg.describe()));
        }
    }
    // Then the requirements (they read only scalars and the geometry): a requirement such as
    // `m >= 1` is what keeps an extent like `(m-1)*lda+k` from going below zero.
    for requirement in signature.requires {
        match evaluate(requirement.program, args, geometry) {
            Ok(0) => {
                return Err(BackendError::Requirement {
                    entry: Box::new(*entry),
                    requirement: requirement.text,
                    detail: describe_launch(params, args, geometry),
                });
            }
            Ok(_) => {}
            Err(error) => {
                return Err(BackendError::Requirement {
                    entry: Box::new(*entry),
                    requirement: requirement.text,
                    detail: format!("cannot be evaluated: {error}"),
                });
            }
        }
    }
    for (index, (param, arg)) in params.iter().zip(args).enumerate() {
        let ParamKind::Buffer { dtype, access, extent, nullable } = param.kind else { continue };
        if matches!(arg, KernelArg::Null) {
            // A null pointer touches nothing: a `nullable` parameter takes it whatever its extent.
            if nullable {
                continue;
            }
            return Err(argument(param, format!("{} (not nullable)", param.kind), arg.describe()));
        }
        let Some((view_dtype, len, writable)) = arg.view() else {
            return Err(argument(param, param.kind.to_string(), arg.describe()));
        };
        if access == Access::Write && !writable {
            return Err(argument(param, format!("a mutable view ({})", param.kind), arg.describe()));
        }
        // A `void` parameter takes any view, measured in bytes.
        let (have, unit) = if dtype == DType::Void {
            (view_dtype.bytes(len).unwrap_or(usize::MAX), "bytes")
        } else if view_dtype == dtype {
            (len, "elements")
        } else {
            return Err(argument(param, format!("{dtype} elements"), format!("{view_dtype} elements")));
        };
        let needed = evaluate(extent.program, args, geometry).map_err(|error| {
            argument(param, format!("an extent `{extent}` that can be evaluated"), format!("{error}"))
        })?;
        if (have as u64) < needed {
            return Err(argument(
                param,
                format!("at least {needed} {unit} (`{extent}`)"),
                format!("a view of {have} {unit}"),
            ));
        }
        if let Some(start) = known_start(arg) {
            check_alignment(entry, param, start)?;
        }
        proved(index, if dtype == DType::Void { needed.div_ceil(view_dtype.size() as u64) } else { needed });
    }
    if let Some((first, second)) = crate::borrowed::overlapping(args) {
        let written = |index: usize| args[index].view().is_some_and(|(_, _, writable)| writable);
        let (written, other) = if written(first) { (first, second) } else { (second, first) };
        return Err(BackendError::Aliased {
            entry: Box::new(*entry),
            written: params[written].name,
            other: params[other].name,
        });
    }
    Ok(())
}

/// Where a buffer argument starts, as far as its alignment goes: a view's byte offset in its
/// buffer, or borrowed memory's device address where it is known. Every backend of this crate
/// starts a buffer at a multiple of [`VOID_ALIGNMENT`] or more (host memory at 16 bytes, CUDA's
/// allocations at 256, the emulator's staged views at their offset modulo 16), so a view's
/// offset aligns its address. `None` where only the launch learns the address (an engine's
/// cudarc slice): the CUDA backend checks it with [`check_alignment`] then.
fn known_start(arg: &KernelArg<'_>) -> Option<u64> {
    let offset =
        |range: std::ops::Range<usize>, dtype: DType| (range.start as u64).checked_mul(dtype.size() as u64);
    match arg {
        KernelArg::Read(view) => offset(view.range(), view.dtype()),
        KernelArg::Write(view) => offset(view.range(), view.dtype()),
        KernelArg::Borrowed(borrowed) => borrowed.address(),
        KernelArg::Scalar(_) | KernelArg::Null => None,
    }
}

/// Refuses an argument of `param` starting at `start` (a byte offset or a device address) that
/// is not aligned as the kernel reads it ([`ParamKind::alignment`]): on a GPU a misaligned load
/// is a fault that leaves the context unusable.
pub(crate) fn check_alignment(
    entry: &KernelEntry,
    param: &KernelParam,
    start: u64,
) -> Result<(), BackendError> {
    match param.kind.alignment() {
        Some(alignment) if !start.is_multiple_of(alignment) => Err(BackendError::Argument {
            entry: Box::new(*entry),
            param: param.name,
            expected: format!("memory starting at a multiple of {alignment} bytes (`{}`)", param.kind),
            found: format!("memory starting at byte {start} ({start} % {alignment} = {})", start % alignment),
        }),
        _ => Ok(()),
    }
}

/// `params` spelled out, for a count that differs: `const f32[n] x, u32 n`.
fn spell_params(params: &[KernelParam]) -> String {
    params.iter().map(|param| format!("{} {}", param.kind, param.name)).collect::<Vec<_>>().join(", ")
}

/// The integer scalars and the geometry of a launch, for a refused requirement.
fn describe_launch(params: &[KernelParam], args: &[KernelArg<'_>], geometry: &LaunchGeometry) -> String {
    let scalars = params
        .iter()
        .zip(args)
        .filter(|(param, _)| matches!(param.kind, ParamKind::Scalar(kind) if kind.is_integer()))
        .map(|(param, arg)| format!("{} = {}", param.name, arg.describe_value()));
    let (grid, block) = (geometry.grid, geometry.block);
    let launch = [
        format!("grid = ({}, {}, {})", grid.0, grid.1, grid.2),
        format!("block = ({}, {}, {})", block.0, block.1, block.2),
        format!("shared = {} bytes", geometry.shared_mem_bytes),
    ];
    scalars.chain(launch).collect::<Vec<_>>().join(", ")
}

/// Where one parameter lies in a kernel's parameter buffer, in bytes: what
/// `cuFuncGetParamInfo` reports for a loaded function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamSlot {
    /// Offset from the start of the parameter buffer.
    pub offset: usize,
    /// Size.
    pub size: usize,
}

/// The parameter buffer a kernel with `params` has: each parameter at the next offset aligned to
/// its size (pointers and scalars are naturally aligned).
pub fn expected_layout(params: &[KernelParam]) -> Vec<ParamSlot> {
    let mut end = 0usize;
    params
        .iter()
        .map(|param| {
            let size = param.kind.size();
            let offset = end.next_multiple_of(size);
            end = offset + size;
            ParamSlot { offset, size }
        })
        .collect()
}

/// Compares the parameter layout of a compiled kernel with the one `signature` implies; the
/// error says what differs, naming the parameter.
pub fn compare_layout(signature: &Signature, found: &[ParamSlot]) -> Result<(), String> {
    let expected = expected_layout(signature.params);
    if expected.len() != found.len() {
        return Err(format!(
            "the manifest declares {} parameters ({}), the loaded kernel takes {}",
            expected.len(),
            spell_params(signature.params),
            found.len()
        ));
    }
    for ((param, expected), found) in signature.params.iter().zip(&expected).zip(found) {
        if expected != found {
            return Err(format!(
                "parameter `{}` (`{}`) should take {} bytes at offset {}, the loaded kernel has {} bytes at offset {}",
                param.name, param.kind, expected.size, expected.offset, found.size, found.offset
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
