//! The launch contract: evaluating extent and requirement programs, checking a launch's
//! arguments against a signature, and the parameter layout a CUDA kernel must have.

use super::*;
use crate::fixtures::{read, signed, write};
use crate::host::HostMemory;
use crate::{BackendId, DeviceBuffer};

/// `cdiv(t,c)*c*h*d`: `t` tokens padded to whole chunks of `c`, times heads and head size.
const PADDED: &[Op] = &[
    Op::Scalar(0),
    Op::Scalar(1),
    Op::Cdiv,
    Op::Scalar(1),
    Op::Mul,
    Op::Scalar(2),
    Op::Mul,
    Op::Scalar(3),
    Op::Mul,
];

/// A chunked kernel: scalars first, so `PADDED` reads `t, c, h, d` at positions 0 to 3.
const CHUNK_SIGNATURE: Signature = Signature {
    params: &[
        KernelParam::scalar("t", ScalarKind::U32),
        KernelParam::scalar("c", ScalarKind::U32),
        KernelParam::scalar("h", ScalarKind::U32),
        KernelParam::scalar("d", ScalarKind::U32),
        KernelParam::scalar("scale", ScalarKind::F32),
        read("q", DType::Bf16, "cdiv(t,c)*c*h*d", PADDED),
        write("out", DType::F32, "t*h", &[Op::Scalar(0), Op::Scalar(2), Op::Mul]),
    ],
    requires: &[
        Requirement::new(
            "c == 32 || c == 64",
            &[Op::Scalar(1), Op::Literal(32), Op::Eq, Op::Scalar(1), Op::Literal(64), Op::Eq, Op::Or],
        ),
        Requirement::new("block.x == 128", &[Op::Launch(LaunchDim::BlockX), Op::Literal(128), Op::Eq]),
        Requirement::new("grid.y >= h", &[Op::Launch(LaunchDim::GridY), Op::Scalar(2), Op::Ge]),
    ],
};

const CHUNK: KernelEntry = signed("kda", "chunk", &CHUNK_SIGNATURE);

/// Positions of `CHUNK`'s parameters.
const T: usize = 0;
const C: usize = 1;
const H: usize = 2;
const Q: usize = 5;
const OUT: usize = 6;

/// A geometry `CHUNK` accepts: 128 threads per block, two blocks in y for two heads.
const GEOMETRY: LaunchGeometry = LaunchGeometry { grid: (4, 2, 1), block: (128, 1, 1), shared_mem_bytes: 0 };

/// `len` zeroed elements of `dtype` in host memory.
fn buffer(dtype: DType, len: usize) -> DeviceBuffer {
    HostMemory::new(BackendId::fresh()).alloc(dtype, len).unwrap()
}

/// Buffers for a launch of `CHUNK` at `t = 100, c = 32, h = 2, d = 4`: `q` of exactly its
/// extent (1024), `out` of exactly `t*h` (200).
struct Chunk {
    q: DeviceBuffer,
    out: DeviceBuffer,
}

impl Chunk {
    fn new() -> Self {
        Self { q: buffer(DType::Bf16, 1024), out: buffer(DType::F32, 200) }
    }

    /// Arguments `CHUNK` accepts.
    fn args(&mut self) -> Vec<KernelArg<'_>> {
        let (q, out) = (self.q.view().into(), self.out.view_mut().into());
        vec![100u32.into(), 32u32.into(), 2u32.into(), 4u32.into(), 0.5f32.into(), q, out]
    }
}

/// What `check` says of a launch of `CHUNK` with `args` at `GEOMETRY`.
fn check_chunk(args: &[KernelArg<'_>]) -> Result<(), BackendError> {
    check(&CHUNK, &GEOMETRY, args)
}

/// Asserts that `check` refuses `args` for `CHUNK` with an `Argument` error naming `param`, what
/// it expected and what it found.
#[track_caller]
fn assert_refused(args: &[KernelArg<'_>], param: &str, expected: &str, found: &str) {
    match check_chunk(args) {
        Err(BackendError::Argument { entry, param: named, expected: wanted, found: got }) => {
            assert_eq!(*entry, CHUNK);
            assert_eq!((named, wanted.as_str(), got.as_str()), (param, expected, found));
        }
        other => panic!("expected an argument error, got {other:?}"),
    }
}

/// The requirement and detail of the `Requirement` error `check` gives for `args` at `geometry`.
fn refused_requirement(
    entry: &KernelEntry,
    geometry: &LaunchGeometry,
    args: &[KernelArg<'_>],
) -> (&'static str, String) {
    match check(entry, geometry, args) {
        Err(BackendError::Requirement { entry: refused, requirement, detail }) => {
            assert_eq!(*refused, *entry);
            (requirement, detail)
        }
        other => panic!("expected a requirement error, got {other:?}"),
    }
}

/// `program` evaluated over `u32` scalars at `GEOMETRY`.
fn eval(program: &[Op], scalars: &[u32]) -> Result<u64, EvalError> {
    let args = scalars.iter().map(|&value| KernelArg::from(value)).collect::<Vec<_>>();
    evaluate(program, &args, &GEOMETRY)
}

#[test]
fn extents_evaluate_in_u64() {
    assert_eq!(eval(PADDED, &[100, 32, 2, 4]), Ok(1024));
    assert_eq!(eval(PADDED, &[96, 32, 2, 4]), Ok(768));
    assert_eq!(eval(PADDED, &[97, 32, 2, 4]), Ok(1024));
    assert_eq!(eval(PADDED, &[0, 32, 2, 4]), Ok(0));
    // Past u32, as a u32 product would wrap.
    let max = u64::from(u32::MAX);
    assert_eq!(eval(PADDED, &[u32::MAX, 1, u32::MAX, 1]), Ok(max * max));
    // `cdiv` does not overflow where `(a + b - 1) / b` would.
    assert_eq!(evaluate(&[Op::Literal(u64::MAX), Op::Literal(2), Op::Cdiv], &[], &GEOMETRY), Ok(1 << 63));
    let wide = [KernelArg::from(1u64 << 40), KernelArg::from(3i32)];
    assert_eq!(evaluate(&[Op::Scalar(0), Op::Scalar(1), Op::Mul], &wide, &GEOMETRY), Ok(3 << 40));
    let launch = [LaunchDim::GridX, LaunchDim::GridY, LaunchDim::GridZ, LaunchDim::BlockX].map(Op::Launch);
    let geometry = LaunchGeometry { grid: (2, 3, 5), block: (7, 11, 13), shared_mem_bytes: 0 };
    let product = [launch[0], launch[1], Op::Mul, launch[2], Op::Mul, launch[3], Op::Mul];
    assert_eq!(evaluate(&product, &[], &geometry), Ok(2 * 3 * 5 * 7));
    let block = [LaunchDim::BlockY, LaunchDim::BlockZ].map(Op::Launch);
    assert_eq!(evaluate(&[block[0], block[1], Op::Sub], &[], &geometry), Err(EvalError::BelowZero));
}

#[test]
fn arithmetic_that_has_no_u64_result_is_an_error() {
    let literals = |a, b, op| eval(&[Op::Literal(a), Op::Literal(b), op], &[]);
    assert_eq!(literals(u64::MAX, 1, Op::Add), Err(EvalError::Overflow));
    assert_eq!(literals(1 << 32, 1 << 32, Op::Mul), Err(EvalError::Overflow));
    assert_eq!(literals(1, 2, Op::Sub), Err(EvalError::BelowZero));
    assert_eq!(literals(2, 2, Op::Sub), Ok(0));
    assert_eq!(literals(7, 0, Op::Cdiv), Err(EvalError::DivisionByZero));
    assert_eq!(literals(7, 0, Op::Rem), Err(EvalError::DivisionByZero));
    assert_eq!(literals(7, 4, Op::Rem), Ok(3));
    assert_eq!(eval(PADDED, &[100, 0, 2, 4]), Err(EvalError::DivisionByZero));
    let negative = [KernelArg::from(-1i32)];
    assert_eq!(evaluate(&[Op::Scalar(0)], &negative, &GEOMETRY), Err(EvalError::NegativeScalar));
}

#[test]
fn division_min_max_and_a_conditional_evaluate_like_integers_do() {
    let literals = |a, b, op| eval(&[Op::Literal(a), Op::Literal(b), op], &[]);
    assert_eq!(literals(7, 2, Op::Div), Ok(3));
    assert_eq!(literals(7, 0, Op::Div), Err(EvalError::DivisionByZero));
    assert_eq!((literals(7, 2, Op::Min), literals(7, 2, Op::Max)), (Ok(2), Ok(7)));
    // `n == c ? 0 : 12 / n`, over a condition on `c`.
    let select_unless = |c| {
        [
            Op::Scalar(0),
            Op::Literal(c),
            Op::Eq,
            Op::Literal(0),
            Op::Literal(12),
            Op::Scalar(0),
            Op::Div,
            Op::Select,
        ]
    };
    // `n == 0 ? 0 : 12 / n`: the branch not taken cannot fail the program.
    let guarded = select_unless(0);
    assert_eq!(eval(&guarded, &[0]), Ok(0));
    assert_eq!(eval(&guarded, &[5]), Ok(2));
    // The branch taken can, and so can the condition.
    assert_eq!(eval(&select_unless(1), &[0]), Err(EvalError::DivisionByZero));
    let failing_condition =
        [Op::Literal(1), Op::Literal(0), Op::Rem, Op::Literal(1), Op::Literal(2), Op::Select];
    assert_eq!(eval(&failing_condition, &[]), Err(EvalError::DivisionByZero));
    // A failed operand fails whatever uses it, even where the result would not depend on it.
    assert_eq!(
        eval(&[Op::Literal(1), Op::Literal(0), Op::Div, Op::Literal(0), Op::Min], &[]),
        Err(EvalError::DivisionByZero)
    );
    assert_eq!(eval(&[Op::Literal(1), Op::Literal(2), Op::Select], &[]), Err(EvalError::Malformed));
    // Launch dimensions size buffers too: rows from the grid.
    let rows = [Op::Launch(LaunchDim::GridX), Op::Scalar(0), Op::Mul];
    let geometry = LaunchGeometry { grid: (6, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };
    assert_eq!(evaluate(&rows, &[KernelArg::from(10u32)], &geometry), Ok(60));
}

#[test]
fn a_malformed_program_is_an_error_not_a_panic() {
    let view = buffer(DType::F32, 4);
    let args = [KernelArg::from(1u32), KernelArg::from(1.0f32), view.view().into()];
    let malformed: [&[Op]; 8] = [
        &[],
        &[Op::Add],
        &[Op::Literal(1), Op::Mul],
        &[Op::Literal(1), Op::Literal(2)],
        // No such argument, an `f32` scalar, a buffer.
        &[Op::Scalar(9)],
        &[Op::Scalar(1)],
        &[Op::Scalar(2)],
        // Deeper than the evaluator's stack.
        &[Op::Literal(1); STACK_DEPTH + 1],
    ];
    for program in malformed {
        assert_eq!(evaluate(program, &args, &GEOMETRY), Err(EvalError::Malformed), "{program:?}");
    }
    // As deep as the stack goes is fine.
    let deepest = [[Op::Literal(1); STACK_DEPTH].as_slice(), &[Op::Add; STACK_DEPTH - 1]].concat();
    assert_eq!(evaluate(&deepest, &args, &GEOMETRY), Ok(STACK_DEPTH as u64));
}

#[test]
fn comparisons_and_or_give_one_or_zero() {
    let compare = |a, op, b| eval(&[Op::Literal(a), Op::Literal(b), op], &[]).unwrap();
    let table = [
        (Op::Eq, [0, 1, 0]),
        (Op::Ne, [1, 0, 1]),
        (Op::Lt, [1, 0, 0]),
        (Op::Le, [1, 1, 0]),
        (Op::Gt, [0, 0, 1]),
        (Op::Ge, [0, 1, 1]),
    ];
    for (op, [less, equal, greater]) in table {
        assert_eq!(
            [compare(3, op, 4), compare(4, op, 4), compare(5, op, 4)],
            [less, equal, greater],
            "{op:?}"
        );
    }
    let or = |a, b| compare(a, Op::Or, b);
    assert_eq!([or(0, 0), or(0, 5), or(3, 0), or(2, 9)], [0, 1, 1, 1]);
}

#[test]
fn accepted_launches() {
    let mut chunk = Chunk::new();
    check_chunk(&chunk.args()).unwrap();
    // `c = 64` meets the requirement too, and pads 100 tokens to the same 1024 elements.
    let mut args = chunk.args();
    args[C] = 64u32.into();
    check_chunk(&args).unwrap();
    // Longer views than the extents, and a mutable view for the read-only `q`.
    let mut q = buffer(DType::Bf16, 2000);
    let mut out = buffer(DType::F32, 201);
    let mut args = chunk.args();
    args[Q] = q.slice_mut(10..1034).into();
    args[OUT] = out.view_mut().into();
    check_chunk(&args).unwrap();
}

#[test]
fn a_wrong_count_lists_the_expected_parameters() {
    let mut chunk = Chunk::new();
    let expected = "7 (u32 t, u32 c, u32 h, u32 d, f32 scale, const bf16[cdiv(t,c)*c*h*d] q, f32[t*h] out)";
    let mut args = chunk.args();
    args.pop();
    let error = check_chunk(&args).unwrap_err();
    assert!(
        matches!(&error, BackendError::ArgumentCount { entry, expected: listed, found: 6 } if **entry == CHUNK && listed == expected),
        "{error:?}"
    );
    assert_eq!(error.to_string(), format!("`test.chunk`: expected {expected} arguments, found 6"));
    let mut args = chunk.args();
    args.push(1u32.into());
    assert!(matches!(check_chunk(&args), Err(BackendError::ArgumentCount { found: 8, .. })));
}

#[test]
fn a_scalar_of_the_wrong_kind_is_named_before_any_extent_reads_it() {
    let mut chunk = Chunk::new();
    let mut args = chunk.args();
    args[T] = 100u64.into();
    assert_refused(&args, "t", "u32", "a `u64` scalar");
    // `q`'s extent reads `t`: the scalar is still what is named, not a malformed extent.
    let mut args = chunk.args();
    args[T] = 100f32.into();
    assert_refused(&args, "t", "u32", "a `f32` scalar");
    let mut args = chunk.args();
    args[4] = 1u32.into();
    assert_refused(&args, "scale", "f32", "a `u32` scalar");
}

#[test]
fn buffers_and_scalars_do_not_fill_each_other() {
    let mut chunk = Chunk::new();
    let view = buffer(DType::F32, 4);
    let mut args = chunk.args();
    args[H] = view.view().into();
    assert_refused(&args, "h", "u32", "a read-only view `const f32[4]`");
    let mut args = chunk.args();
    args[Q] = 0u32.into();
    assert_refused(&args, "q", "const bf16[cdiv(t,c)*c*h*d]", "a `u32` scalar");
}

#[test]
fn a_written_parameter_needs_a_mutable_view_of_its_element_type() {
    let mut chunk = Chunk::new();
    let out = buffer(DType::F32, 200);
    let mut args = chunk.args();
    args[OUT] = out.view().into();
    assert_refused(&args, "out", "a mutable view (f32[t*h])", "a read-only view `const f32[200]`");
    let q = buffer(DType::F32, 1024);
    let mut args = chunk.args();
    args[Q] = q.view().into();
    assert_refused(&args, "q", "bf16 elements", "f32 elements");
    let mut out = buffer(DType::U32, 200);
    let mut args = chunk.args();
    args[OUT] = out.view_mut().into();
    assert_refused(&args, "out", "f32 elements", "u32 elements");
}

#[test]
fn a_view_shorter_than_its_extent_is_refused() {
    let mut chunk = Chunk::new();
    let q = buffer(DType::Bf16, 1024);
    let mut args = chunk.args();
    args[Q] = q.slice(1..1024).into();
    assert_refused(&args, "q", "at least 1024 elements (`cdiv(t,c)*c*h*d`)", "a view of 1023 elements");
    // One more token needs a whole chunk more of `q` (and one more row of `out`).
    let mut args = chunk.args();
    args[T] = 129u32.into();
    assert_refused(&args, "q", "at least 1280 elements (`cdiv(t,c)*c*h*d`)", "a view of 1024 elements");
    let mut args = chunk.args();
    args[T] = 101u32.into();
    assert_refused(&args, "out", "at least 202 elements (`t*h`)", "a view of 200 elements");
}

#[test]
fn an_extent_that_cannot_be_evaluated_names_its_parameter() {
    let mut chunk = Chunk::new();
    let mut args = chunk.args();
    for index in [T, 3] {
        args[index] = u32::MAX.into();
    }
    assert_refused(&args, "q", "an extent `cdiv(t,c)*c*h*d` that can be evaluated", "it overflows u64");
    // Without a requirement that guards it, a division by zero in an extent is the extent's error.
    const SPLIT_SIGNATURE: Signature = Signature {
        params: &[
            KernelParam::scalar("n", ScalarKind::U32),
            KernelParam::scalar("parts", ScalarKind::U32),
            write("part", DType::F32, "cdiv(n,parts)", &[Op::Scalar(0), Op::Scalar(1), Op::Cdiv]),
        ],
        requires: &[],
    };
    const SPLIT: KernelEntry = signed("ops", "split", &SPLIT_SIGNATURE);
    let mut part = buffer(DType::F32, 8);
    let args: [KernelArg<'_>; 3] = [8u32.into(), 0u32.into(), part.view_mut().into()];
    match check(&SPLIT, &GEOMETRY, &args) {
        Err(BackendError::Argument { param: "part", expected, found, .. }) => {
            assert_eq!(expected, "an extent `cdiv(n,parts)` that can be evaluated");
            assert_eq!(found, "it divides by zero");
        }
        other => panic!("expected an argument error, got {other:?}"),
    }
}

#[test]
fn the_requirements_are_checked_before_the_extents_they_guard() {
    // c = 0 would divide by zero in q's extent: `c == 32 || c == 64` refuses the launch first.
    let mut chunk = Chunk::new();
    let mut args = chunk.args();
    args[C] = 0u32.into();
    match check(&CHUNK, &GEOMETRY, &args) {
        Err(BackendError::Requirement { requirement, .. }) => assert_eq!(requirement, "c == 32 || c == 64"),
        other => panic!("expected a requirement error, got {other:?}"),
    }
}

#[test]
fn negative_scalars_subtractions_below_zero_and_malformed_extents_are_refused() {
    const COUNTED_SIGNATURE: Signature = Signature {
        params: &[
            KernelParam::scalar("count", ScalarKind::I32),
            write("rest", DType::U32, "8-count", &[Op::Literal(8), Op::Scalar(0), Op::Sub]),
            write("data", DType::U32, "count", &[Op::Scalar(0)]),
            read("bad", DType::U32, "count+", &[Op::Scalar(0), Op::Add]),
        ],
        requires: &[],
    };
    const COUNTED: KernelEntry = signed("ops", "counted", &COUNTED_SIGNATURE);
    let (mut rest, mut data, bad) = (buffer(DType::U32, 8), buffer(DType::U32, 8), buffer(DType::U32, 8));
    let mut refused = |count: i32| {
        let args: [KernelArg<'_>; 4] =
            [count.into(), rest.view_mut().into(), data.view_mut().into(), bad.view().into()];
        match check(&COUNTED, &GEOMETRY, &args) {
            Err(BackendError::Argument { param, found, .. }) => (param, found),
            other => panic!("expected an argument error, got {other:?}"),
        }
    };
    assert_eq!(refused(-1), ("rest", "a negative scalar cannot size anything".to_owned()));
    assert_eq!(refused(9), ("rest", "a subtraction goes below zero".to_owned()));
    // `rest` and `data` fit: the malformed program is the one refused.
    assert_eq!(refused(3), ("bad", "the program is malformed".to_owned()));
}

#[test]
fn requirements_describe_the_refused_launch() {
    let mut chunk = Chunk::new();
    let mut args = chunk.args();
    args[C] = 16u32.into();
    let (requirement, detail) = refused_requirement(&CHUNK, &GEOMETRY, &args);
    assert_eq!(requirement, "c == 32 || c == 64");
    // The integer scalars and the launch; not the `f32` scale.
    assert_eq!(
        detail,
        "t = 100, c = 16, h = 2, d = 4, grid = (4, 2, 1), block = (128, 1, 1), shared = 0 bytes"
    );

    let args = chunk.args();
    let narrow = LaunchGeometry { block: (64, 2, 1), ..GEOMETRY };
    let (requirement, detail) = refused_requirement(&CHUNK, &narrow, &args);
    assert_eq!(requirement, "block.x == 128");
    assert!(detail.ends_with("grid = (4, 2, 1), block = (64, 2, 1), shared = 0 bytes"), "{detail}");
    let flat = LaunchGeometry { grid: (4, 1, 1), ..GEOMETRY };
    let (requirement, detail) = refused_requirement(&CHUNK, &flat, &args);
    assert_eq!(requirement, "grid.y >= h");
    assert!(detail.contains("h = 2") && detail.contains("grid = (4, 1, 1)"), "{detail}");
    let error = check(&CHUNK, &flat, &args).unwrap_err().to_string();
    assert!(error.starts_with("`test.chunk`: the launch does not meet `grid.y >= h` (t = 100"), "{error}");
    check(&CHUNK, &LaunchGeometry { grid: (1, 3, 1), ..GEOMETRY }, &args).unwrap();
}

#[test]
fn a_requirement_that_cannot_be_evaluated_is_refused() {
    const DIVIDES_SIGNATURE: Signature = Signature {
        params: &[KernelParam::scalar("n", ScalarKind::U64), KernelParam::scalar("m", ScalarKind::U64)],
        requires: &[Requirement::new(
            "n % m == 0",
            &[Op::Scalar(0), Op::Scalar(1), Op::Rem, Op::Literal(0), Op::Eq],
        )],
    };
    const DIVIDES: KernelEntry = signed("ops", "divides", &DIVIDES_SIGNATURE);
    let requirement = |n: u64, m: u64| refused_requirement(&DIVIDES, &GEOMETRY, &[n.into(), m.into()]);
    assert_eq!(requirement(6, 0), ("n % m == 0", "cannot be evaluated: it divides by zero".into()));
    assert_eq!(requirement(7, 2).1, "n = 7, m = 2, grid = (4, 2, 1), block = (128, 1, 1), shared = 0 bytes");
    check(&DIVIDES, &GEOMETRY, &[6u64.into(), 3u64.into()]).unwrap();
}

#[test]
fn a_requirement_on_shared_bytes_reads_the_launchs_dynamic_shared_memory() {
    const STAGED_SIGNATURE: Signature = Signature {
        params: &[KernelParam::scalar("stages", ScalarKind::U32)],
        requires: &[Requirement::new(
            "shared.bytes >= stages * 16384",
            &[Op::Launch(LaunchDim::SharedBytes), Op::Scalar(0), Op::Literal(16384), Op::Mul, Op::Ge],
        )],
    };
    const STAGED: KernelEntry = signed("gemm", "staged", &STAGED_SIGNATURE);
    let with_bytes = |bytes| LaunchGeometry { shared_mem_bytes: bytes, ..GEOMETRY };
    let (requirement, detail) = refused_requirement(&STAGED, &with_bytes(65_535), &[4u32.into()]);
    assert_eq!(requirement, "shared.bytes >= stages * 16384");
    assert_eq!(detail, "stages = 4, grid = (4, 2, 1), block = (128, 1, 1), shared = 65535 bytes");
    check(&STAGED, &with_bytes(65_536), &[4u32.into()]).unwrap();
    check(&STAGED, &with_bytes(0), &[0u32.into()]).unwrap();
}

#[test]
fn an_entry_without_a_signature_cannot_be_checked() {
    let entry = KernelEntry::named("ops", "legacy");
    let error = check(&entry, &GEOMETRY, &[]).unwrap_err();
    assert!(matches!(error, BackendError::NoSignature { entry: ref refused } if **refused == entry));
    assert!(error.to_string().contains("launch it with `launch_unchecked`"), "{error}");
}

#[test]
fn arguments_describe_themselves() {
    let mut data = buffer(DType::Bf16, 6);
    let write: KernelArg<'_> = data.slice_mut(1..4).into();
    assert_eq!(write.describe(), "a mutable view `bf16[3]`");
    assert_eq!(write.view(), Some((DType::Bf16, 3, true)));
    assert_eq!(write.scalar_kind(), None);
    let scalars =
        [KernelArg::from(1u32), KernelArg::from(-2i32), KernelArg::from(3u64), KernelArg::from(0.5f32)];
    let described = scalars.iter().map(|arg| (arg.scalar_kind().unwrap().name(), arg.describe_value()));
    let expected = [("u32", "1"), ("i32", "-2"), ("u64", "3"), ("f32", "0.5")];
    assert!(described.eq(expected.map(|(kind, value)| (kind, value.to_owned()))));
}

/// A signature of `kinds`, named `p0`, `p1`, ….
fn layout_signature(kinds: &[ParamKind]) -> Signature {
    const NAMES: [&str; 4] = ["p0", "p1", "p2", "p3"];
    let params = kinds.iter().zip(NAMES).map(|(&kind, name)| KernelParam { name, kind }).collect::<Vec<_>>();
    Signature { params: params.leak(), requires: &[] }
}

const U32: ParamKind = ParamKind::Scalar(ScalarKind::U32);
const U64: ParamKind = ParamKind::Scalar(ScalarKind::U64);
const F32: ParamKind = ParamKind::Scalar(ScalarKind::F32);
const BF16_PTR: ParamKind = ParamKind::Buffer {
    dtype: DType::Bf16,
    access: Access::Read,
    extent: Extent { text: "n", program: &[], trust: None },
    nullable: false,
};

fn slots(slots: &[(usize, usize)]) -> Vec<ParamSlot> {
    slots.iter().map(|&(offset, size)| ParamSlot { offset, size }).collect()
}

#[test]
fn the_expected_layout_aligns_each_parameter_to_its_size() {
    let layout = |kinds: &[ParamKind]| expected_layout(layout_signature(kinds).params);
    assert_eq!(layout(&[U32, BF16_PTR]), slots(&[(0, 4), (8, 8)]));
    assert_eq!(layout(&[U32, U32, U64]), slots(&[(0, 4), (4, 4), (8, 8)]));
    assert_eq!(layout(&[U32, U64, F32]), slots(&[(0, 4), (8, 8), (16, 4)]));
    assert_eq!(layout(&[BF16_PTR, U32, F32, BF16_PTR]), slots(&[(0, 8), (8, 4), (12, 4), (16, 8)]));
    assert!(layout(&[]).is_empty());
}

#[test]
fn a_layout_that_differs_is_named_by_parameter() {
    let signature = layout_signature(&[U32, BF16_PTR]);
    compare_layout(&signature, &slots(&[(0, 4), (8, 8)])).unwrap();
    let count = compare_layout(&signature, &slots(&[(0, 4), (8, 8), (16, 4)])).unwrap_err();
    assert_eq!(
        count,
        "the manifest declares 2 parameters (u32 p0, const bf16[n] p1), the loaded kernel takes 3"
    );
    let size = compare_layout(&signature, &slots(&[(0, 4), (4, 4)])).unwrap_err();
    let expected = "parameter `p1` (`const bf16[n]`) should take 8 bytes at offset 8, the loaded kernel has 4 bytes at offset 4";
    assert_eq!(size, expected);
    let wide = compare_layout(&layout_signature(&[U32, U32]), &slots(&[(0, 8), (8, 4)])).unwrap_err();
    assert!(wide.starts_with("parameter `p0` (`u32`) should take 4 bytes at offset 0"), "{wide}");
}

#[test]
fn strided_reads_a_host_known_layout_of_dims_then_strides() {
    use crate::GpuBackendExt;
    let gpu = crate::cpu::CpuBackend::new();
    // The layout at position 0, its rank at 1.
    let program = [Op::Scalar(1), Op::Strided(0, 1)];
    let reach = |layout: crate::View<'_>, rank: u32| {
        evaluate(&program, &[KernelArg::Read(layout), KernelArg::from(rank)], &GEOMETRY)
    };
    let layout = |values: &[u64]| gpu.upload_const(values).unwrap();
    // A contiguous 2 × 3, its transpose, a broadcast row, a scalar (rank 0).
    assert_eq!(reach(layout(&[2, 3, 3, 1]).view(), 2), Ok(6));
    assert_eq!(reach(layout(&[3, 2, 1, 3]).view(), 2), Ok(6));
    assert_eq!(reach(layout(&[4, 3, 0, 1]).view(), 2), Ok(3));
    assert_eq!(reach(layout(&[]).view(), 0), Ok(1));
    // A dim of 0, which the kernel divides by, in any axis: refused, whatever its stride.
    assert_eq!(reach(layout(&[4, 0, 5, 1]).view(), 2), Err(EvalError::ZeroDim));
    assert_eq!(reach(layout(&[0, 3, 0, 0]).view(), 2), Err(EvalError::ZeroDim));
    // A slice of a layout buffer is the layout it views.
    let padded = layout(&[9, 9, 2, 3, 3, 1]);
    assert_eq!(reach(padded.slice(2..6), 2), Ok(6));
    // Other integer types, read as the host's integers; a negative stride addresses nothing safely.
    let narrow = gpu.upload_const(&[2u32, 3, 3, 1]).unwrap();
    assert_eq!(reach(narrow.view(), 2), Ok(6));
    let negative = gpu.upload_const(&[2i32, 3, -3, 1]).unwrap();
    assert_eq!(reach(negative.view(), 2), Err(EvalError::NegativeLayout));
    let wide = gpu.upload_const(&[2i64, 3, 3, 1]).unwrap();
    assert_eq!(reach(wide.view(), 2), Ok(6));
    // Fewer values than the rank needs, a product past u64, a buffer the host does not know.
    assert_eq!(reach(layout(&[2, 3, 3]).view(), 2), Err(EvalError::ShortLayout));
    assert_eq!(reach(layout(&[u64::MAX, 3]).view(), 1), Err(EvalError::Overflow));
    let plain = gpu.upload(&[2u64, 3, 3, 1]).unwrap();
    assert_eq!(reach(plain.view(), 2), Err(EvalError::NotHostKnown));
    // The second run of strides after the dims (a binary op's right input): 2 × 3 at strides
    // (0, 1), a broadcast row of 3; one run short of it is a short layout.
    let second = |values: &[u64]| {
        evaluate(
            &[Op::Scalar(1), Op::Strided(0, 2)],
            &[KernelArg::Read(layout(values).view()), KernelArg::from(2u32)],
            &GEOMETRY,
        )
    };
    assert_eq!(second(&[2, 3, 3, 1, 0, 1]), Ok(3));
    assert_eq!(second(&[2, 3, 3, 1]), Err(EvalError::ShortLayout));
    // A float buffer is no layout.
    let floats = gpu.upload_const(&[2.0f32, 1.0]).unwrap();
    assert_eq!(reach(floats.view(), 1), Err(EvalError::Malformed));
}

#[test]
fn a_view_shorter_than_its_layouts_reach_is_refused_by_the_launch_check() {
    use crate::GpuBackendExt;
    const STRIDED: Signature = Signature {
        params: &[
            KernelParam::scalar("rank", ScalarKind::U32),
            read("info", DType::U64, "2*rank", &[Op::Literal(2), Op::Scalar(0), Op::Mul]),
            read("x", DType::F32, "strided(info, rank)", &[Op::Scalar(0), Op::Strided(1, 1)]),
        ],
        requires: &[],
    };
    const ENTRY: KernelEntry = signed("ops", "strided", &STRIDED);
    let gpu = crate::cpu::CpuBackend::new();
    let info = gpu.upload_const(&[3u64, 2, 1, 3]).unwrap();
    let (fits, short) = (gpu.zeros::<f32>(6).unwrap(), gpu.zeros::<f32>(5).unwrap());
    let launch = |x: &DeviceBuffer| {
        let args = [KernelArg::from(2u32), KernelArg::Read(info.view()), KernelArg::Read(x.view())];
        check(&ENTRY, &GEOMETRY, &args).map_err(|e| e.to_string())
    };
    assert_eq!(launch(&fits), Ok(()));
    let error = launch(&short).unwrap_err();
    assert!(error.contains("at least 6 elements (`strided(info, rank)`)"), "{error}");
    // The same layout uploaded as a plain buffer: refused, saying how to make it known.
    let plain = gpu.upload(&[3u64, 2, 1, 3]).unwrap();
    let args = [KernelArg::from(2u32), KernelArg::Read(plain.view()), KernelArg::Read(fits.view())];
    let error = check(&ENTRY, &GEOMETRY, &args).unwrap_err().to_string();
    assert!(error.contains("pass a view of a `ConstBuffer` (`upload_const`)"), "{error}");
}

#[test]
fn a_void_parameter_takes_a_view_of_any_element_type_measured_in_bytes() {
    const BLOCKS: Signature = Signature {
        params: &[
            KernelParam::scalar("nbytes", ScalarKind::U32),
            read("blocks", DType::Void, "nbytes", &[Op::Scalar(0)]),
        ],
        requires: &[],
    };
    const ENTRY: KernelEntry = signed("quant", "dequantize", &BLOCKS);
    let launch = |dtype, len, nbytes: u32| {
        let buffer = buffer(dtype, len);
        let args = [KernelArg::from(nbytes), KernelArg::Read(buffer.view())];
        check(&ENTRY, &GEOMETRY, &args).map_err(|error| error.to_string())?;
        extents(&ENTRY, &GEOMETRY, &args).map_err(|error| error.to_string())
    };
    // 18 bytes: 18 u8, or 5 f32 (20 bytes, of which the kernel may touch 5 elements' worth).
    assert_eq!(launch(DType::U8, 18, 18), Ok(vec![None, Some(18)]));
    assert_eq!(launch(DType::F32, 5, 18), Ok(vec![None, Some(5)]));
    let error = launch(DType::F32, 4, 18).unwrap_err();
    assert!(error.ends_with("expected at least 18 bytes (`nbytes`), found a view of 16 bytes"), "{error}");
}

#[test]
fn extents_are_the_ones_the_check_proved_and_a_refused_launch_is_the_checks_err() {
    let mut chunk = Chunk::new();
    let args = chunk.args();
    let accepted = extents(&CHUNK, &GEOMETRY, &args).unwrap();
    assert_eq!(accepted, [None, None, None, None, None, Some(1024), Some(200)]);
    // `t = 101` makes `out`'s extent 202, past its 200 elements.
    let mut args = chunk.args();
    args[T] = 101u32.into();
    let refused = extents(&CHUNK, &GEOMETRY, &args).unwrap_err().to_string();
    assert_eq!(refused, check_chunk(&args).unwrap_err().to_string());
    assert!(refused.contains(".out`: expected at least 202 elements"), "{refused}");
}

#[test]
fn a_null_pointer_has_no_extent_and_an_entry_with_safety_conditions_has_none_either() {
    const BIAS: Signature = Signature {
        params: &[
            KernelParam::scalar("n", ScalarKind::U32),
            read("bias", DType::F32, "n", &[Op::Scalar(0)]).nullable(),
        ],
        requires: &[],
    };
    const ENTRY: KernelEntry = signed("ops", "bias", &BIAS);
    let bias = buffer(DType::F32, 4);
    let present = [KernelArg::from(4u32), KernelArg::Read(bias.view())];
    assert_eq!(extents(&ENTRY, &GEOMETRY, &present).unwrap(), [None, Some(4)]);
    let absent = [KernelArg::from(4u32), KernelArg::Null];
    assert_eq!(extents(&ENTRY, &GEOMETRY, &absent).unwrap(), [None, None]);
    // A safe launch of an entry whose reach the caller must guarantee is refused, so are its extents.
    const GATHER: Signature = Signature {
        params: &[
            KernelParam::scalar("n", ScalarKind::U32),
            read("src", DType::F32, "n", &[Op::Scalar(0)]).trusting("every id is a row of src"),
        ],
        requires: &[],
    };
    let gather = signed("ops", "gather", &GATHER);
    let refused = extents(&gather, &GEOMETRY, &present).unwrap_err();
    assert!(matches!(refused, BackendError::Trusted { param: "src", .. }), "{refused:?}");
}
