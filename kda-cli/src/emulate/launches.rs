//! Launches made from an entry's contract alone: scalars and a geometry drawn from small values
//! and the literals of the entry's own programs (as a fuzzer's dictionary), each requirement a
//! candidate breaks repaired by drawing again one value it reads, and kept when every requirement
//! holds and every extent can be evaluated and is small enough to allocate. A layout a `strided`
//! extent reads (`const u64 info[2 * rank]`, dims then strides) is drawn too, contiguous or not
//! ([`Layout`]), and the buffer it lays out sized at its reach.

use std::fmt;

use kda_emu::DeviceLimits;
use kda_runtime::cpu::CpuBackend;
use kda_runtime::signature::{self, KernelParam, LaunchDim, Op, ParamKind};
use kda_runtime::{
    BackendError, ConstBuffer, DType, GpuBackend, GpuBackendExt, KernelArg, LaunchGeometry, Scalar, Signature,
};

/// Values every scalar and launch dimension is drawn from, besides the entry's literals: the
/// small sizes and the edges of a warp and of common tiles.
const SMALL: [u64; 18] = [0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 100, 128];

/// Block sizes in x, besides the entry's literals: a lone thread and the common multiples of a
/// warp up to the device's most, so a kernel sized for fewer threads than a launch allows meets
/// larger blocks too.
const BLOCK_X: [u32; 9] = [1, 32, 64, 96, 128, 192, 256, 512, 1024];

/// The device a drawn launch must fit: the emulator's.
const DEVICE: DeviceLimits = DeviceLimits::SM_90;

/// The most threads of one launch a drawn launch has (the emulator runs a thread per CUDA
/// thread).
const MAX_LAUNCH_THREADS: u64 = 4096;

/// The most elements a drawn launch gives one buffer: an overrun is found at the edges of a
/// launch, not at its size, and a small launch of a kernel whose work grows faster than its
/// buffers (a scan over `t` tokens of `d × d` states) still runs in seconds under a sanitizer.
pub const MAX_ELEMENTS: u64 = 1 << 16;

/// The dynamic shared memory a drawn launch may ask for (the device's limit less a margin for the
/// kernel's static shared memory).
const MAX_DYNAMIC_SHARED: u64 = 200 * 1024;

/// How many times a candidate that breaks a requirement (or does not fit the device) has one value
/// it reads drawn again before it is given up: a contract of many requirements over a few values
/// each (a block size, a head dim, `ldb >= h`) is met value by value, where a whole new draw keeps
/// them all only by chance.
const REPAIRS: u32 = 64;

/// The dims of a drawn layout: ones (an axis that broadcasts whatever its stride), the small
/// sizes and the edges of a warp.
const DIMS: [u64; 12] = [1, 1, 1, 2, 3, 4, 5, 7, 8, 17, 32, 33];

/// The most elements the dims of a drawn layout address together: a strided kernel goes wrong at
/// an axis's edge, not at a tensor's size.
const MAX_LAYOUT_ELEMENTS: u64 = 1 << 12;

/// Strides past any buffer a launch can have: one past the allocation cap (the launch is not
/// kept, unless its dim is 1), one past `u32`, and ones whose reach overflows `u64` (the check
/// refuses the launch).
const HUGE_STRIDES: [u64; 4] = [MAX_ELEMENTS + 1, 1 << 32, u64::MAX / 2, u64::MAX];

/// One drawn layout in this many holds what the launch check must refuse: a dim of 0, or a
/// negative value where its element type is signed.
const REFUSED_LAYOUT_ONE_IN: u64 = 8;

/// What one parameter of a drawn launch gets.
#[derive(Clone, Debug, PartialEq)]
pub enum Drawn {
    /// A scalar's value.
    Scalar(Scalar),
    /// A buffer: its extent, or none where a drawn layout leaves a `strided` extent without a
    /// value (a dim of 0, a negative value, a reach past `u64`), a launch the check must refuse.
    Buffer {
        /// Its element type (bytes for `void`).
        dtype: DType,
        /// How many.
        elements: u64,
    },
    /// A layout a `strided` extent reads, with its contents.
    Layout(Layout),
}

/// One launch of an entry: what each parameter gets, in parameter order, and its geometry.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    /// Each parameter's argument.
    pub arguments: Vec<Drawn>,
    /// The grid, block and dynamic shared memory.
    pub geometry: LaunchGeometry,
}

/// The contents of a layout buffer, in its element type: `rank` dims, then each run of `rank`
/// strides a `strided(layout, rank, part)` reads, as a library's host code fills its `info`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // One variant per integer element type, holding the layout's values.
pub enum Layout {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
}

/// `$body` over the values of `$layout`, bound to `$values`, whatever their type.
macro_rules! with_values {
    ($layout:expr, $values:ident => $body:expr) => {
        match $layout {
            Layout::U8($values) => $body,
            Layout::I8($values) => $body,
            Layout::U16($values) => $body,
            Layout::I16($values) => $body,
            Layout::U32($values) => $body,
            Layout::I32($values) => $body,
            Layout::U64($values) => $body,
            Layout::I64($values) => $body,
        }
    };
}

impl Layout {
    /// `values` as elements of `dtype`, each saturated to the type's range (a huge stride of a
    /// `u32` layout is `u32::MAX`); `None` for a type no layout is drawn in (`bool`, which a
    /// layout is not uploaded as, and the non-integers).
    fn new(dtype: DType, values: &[i128]) -> Option<Self> {
        macro_rules! saturated {
            ($ty:ty) => {
                values
                    .iter()
                    .map(|&value| value.clamp(i128::from(<$ty>::MIN), i128::from(<$ty>::MAX)) as $ty)
                    .collect()
            };
        }
        Some(match dtype {
            DType::U8 => Layout::U8(saturated!(u8)),
            DType::I8 => Layout::I8(saturated!(i8)),
            DType::U16 => Layout::U16(saturated!(u16)),
            DType::I16 => Layout::I16(saturated!(i16)),
            DType::U32 => Layout::U32(saturated!(u32)),
            DType::I32 => Layout::I32(saturated!(i32)),
            DType::U64 => Layout::U64(saturated!(u64)),
            DType::I64 => Layout::I64(saturated!(i64)),
            _ => return None,
        })
    }

    /// The layout as a buffer of `gpu` whose contents the launch check reads
    /// ([`upload_const`](GpuBackendExt::upload_const)), as a caller passes one.
    pub fn upload(&self, gpu: &dyn GpuBackend) -> Result<ConstBuffer, BackendError> {
        with_values!(self, values => gpu.upload_const(values))
    }
}

impl fmt::Display for Layout {
    /// The values: `[3, 2, 2, 1]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        with_values!(self, values => write!(f, "{values:?}"))
    }
}

/// A small, seeded generator (xorshift64*): the same seed draws the same launches.
#[derive(Clone, Debug)]
pub struct Draw(u64);

impl Draw {
    /// A generator from `seed` (any value): each seed its own stream. The seed is mixed (a
    /// splitmix64 step) rather than made odd, which gave seeds `2k` and `2k + 1` one stream; the
    /// state must not be zero, and the mix sends exactly one seed there, which is moved.
    pub fn new(seed: u64) -> Self {
        let mut mixed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^= mixed >> 31;
        Self(if mixed == 0 { 1 } else { mixed })
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value below `bound` (0 for a bound of 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next().checked_rem(bound).unwrap_or(0)
    }

    /// An index into something `len` long (0 for a length of 0).
    fn index(&mut self, len: usize) -> usize {
        // Below `len`, so it fits `usize`.
        self.below(len as u64) as usize
    }

    /// One of `items` (not empty).
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.index(items.len())]
    }

    /// `items` in a drawn order.
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for end in (1..items.len()).rev() {
            items.swap(end, self.index(end + 1));
        }
    }

    /// A float in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.below(1 << 24) as f32 / (1 << 23) as f32) - 1.0
    }
}

/// Every program of `signature`: its buffers' extents, then its requirements.
fn programs(signature: &Signature) -> impl Iterator<Item = &'static [Op]> {
    let params: &'static [KernelParam] = signature.params;
    params
        .iter()
        .filter_map(|param| match param.kind {
            ParamKind::Buffer { extent, .. } => Some(extent.program),
            ParamKind::Scalar(_) => None,
        })
        .chain(signature.requires.iter().map(|requirement| requirement.program))
}

/// What values an entry's launches are drawn from: [`SMALL`] and its programs' literals, each
/// with its neighbours.
fn dictionary(signature: &Signature) -> Vec<u64> {
    let constants = programs(signature).flat_map(constants);
    let mut values: Vec<u64> = SMALL
        .into_iter()
        .chain(constants.flat_map(|value| [value.saturating_sub(1), value, value.saturating_add(1)]))
        .collect();
    values.sort_unstable();
    values.dedup();
    values
}

/// Where the sub-expression each op of `program` ends begins, op by op: an operand-less op is its
/// own, an operation's starts where its first operand does. A malformed program ends where an op
/// lacks its operands.
fn sub_expressions(program: &[Op]) -> Vec<usize> {
    let mut stack: Vec<usize> = Vec::new();
    let mut starts = Vec::new();
    for (end, op) in program.iter().enumerate() {
        let operands = match op {
            Op::Literal(_) | Op::Scalar(_) | Op::Launch(_) => 0,
            Op::Strided(..) => 1,
            Op::Select => 3,
            _ => 2,
        };
        let Some(first) = stack.len().checked_sub(operands) else { break };
        let start = stack.get(first).copied().unwrap_or(end);
        stack.truncate(first);
        stack.push(start);
        starts.push(start);
    }
    starts
}

/// Whether `program` reads an argument or the launch (its value is not known before a launch).
fn reads_launch(program: &[Op]) -> bool {
    program.iter().any(|op| matches!(op, Op::Scalar(_) | Op::Launch(_) | Op::Strided(..)))
}

/// Whether `program` reads a layout with `strided`.
fn reads_layout(program: &[Op]) -> bool {
    program.iter().any(|op| matches!(op, Op::Strided(..)))
}

/// The values of `program`'s constant sub-expressions, its literals among them: what it compares
/// a scalar or the launch with, such as `GEMM_STAGES * (GEMM_TILE_M + GEMM_TILE_N) * 64`, which
/// no literal of it is.
fn constants(program: &[Op]) -> Vec<u64> {
    let no_launch = LaunchGeometry { grid: (1, 1, 1), block: (1, 1, 1), shared_mem_bytes: 0 };
    sub_expressions(program)
        .into_iter()
        .enumerate()
        .map(|(end, start)| &program[start..=end])
        .filter(|expression| !reads_launch(expression))
        .filter_map(|expression| signature::evaluate(expression, &[], &no_launch).ok())
        .collect()
}

/// A `strided(layout, rank, part)` of an entry's programs: the layout's parameter position, the
/// program of the rank, and which run of strides it reads.
#[derive(Clone, Copy, Debug)]
struct LayoutRead {
    layout: usize,
    rank: &'static [Op],
    part: u16,
}

/// Every `strided` of `signature`'s programs, in program order.
fn layout_reads(signature: &Signature) -> Vec<LayoutRead> {
    programs(signature)
        .flat_map(|program| {
            sub_expressions(program).into_iter().enumerate().filter_map(move |(end, start)| {
                match program[end] {
                    Op::Strided(layout, part) => {
                        Some(LayoutRead { layout: usize::from(layout), rank: &program[start..end], part })
                    }
                    _ => None,
                }
            })
        })
        .collect()
}

/// Draws up to `tries` candidates for one launch of `signature`; the first that keeps every
/// requirement, with extents that evaluate and fit [`MAX_ELEMENTS`] (or that a drawn layout
/// makes the check refuse), or `None`.
pub fn draw(signature: &Signature, rng: &mut Draw, tries: u32) -> Option<Launch> {
    let values = dictionary(signature);
    let reads = layout_reads(signature);
    // The check reads a layout only from a `ConstBuffer`: the candidates' layouts are uploaded
    // to host memory to evaluate the extents that read them.
    let host = CpuBackend::new();
    (0..tries).find_map(|_| candidate(signature, &values, &reads, &host, rng))
}

/// A value a program reads: a scalar, by position, or a dimension of the launch.
#[derive(Clone, Copy)]
enum Read {
    Scalar(usize),
    Launch(LaunchDim),
}

/// The arguments programs read: the scalars by position, the layouts uploaded so far at theirs,
/// and a placeholder at any other buffer (no program reads it).
fn program_args<'a>(scalars: &[Option<Scalar>], layouts: &'a [Option<ConstBuffer>]) -> Vec<KernelArg<'a>> {
    scalars
        .iter()
        .enumerate()
        .map(|(index, scalar)| match (scalar, layouts.get(index)) {
            (_, Some(Some(layout))) => KernelArg::from(layout.view()),
            (Some(scalar), _) => KernelArg::from(*scalar),
            (None, _) => KernelArg::from(0u32),
        })
        .collect()
}

/// One candidate launch: drawn, repaired until the requirements that read no layout hold, its
/// layouts drawn; `None` where it is not kept (a requirement still broken, an extent that does not
/// evaluate or is past the cap).
fn candidate(
    signature: &Signature,
    values: &[u64],
    layout_reads: &[LayoutRead],
    host: &CpuBackend,
    rng: &mut Draw,
) -> Option<Launch> {
    let mut scalars: Vec<Option<Scalar>> =
        signature.params.iter().map(|param| draw_scalar(param, values, rng)).collect();
    let mut geometry = LaunchGeometry { grid: (1, 1, 1), block: (1, 1, 1), shared_mem_bytes: 0 };
    for dim in LaunchDim::ALL {
        set_dim(&mut geometry, dim, draw_dim(dim, values, rng));
    }
    // The requirements that read no layout, repaired value by value; those that read one are
    // met or not by the layouts drawn for the scalars they keep.
    let mut repairs = 0;
    loop {
        let args = program_args(&scalars, &[]);
        let broken = signature.requires.iter().filter(|requirement| !reads_layout(requirement.program)).find(
            |requirement| {
                signature::evaluate(requirement.program, &args, &geometry).map_or(true, |held| held == 0)
            },
        );
        let suspects: Vec<Read> = match broken {
            Some(requirement) => requirement
                .program
                .iter()
                .filter_map(|op| match op {
                    Op::Scalar(index) => Some(Read::Scalar(usize::from(*index))),
                    Op::Launch(dim) => Some(Read::Launch(*dim)),
                    _ => None,
                })
                .collect(),
            None if fits(&geometry) => break,
            None => LaunchDim::ALL.map(Read::Launch).to_vec(),
        };
        if suspects.is_empty() || repairs == REPAIRS {
            return None;
        }
        repairs += 1;
        match rng.pick(&suspects) {
            Read::Scalar(index) => {
                let param = signature.params.get(index)?;
                *scalars.get_mut(index)? = draw_scalar(param, values, rng);
            }
            Read::Launch(dim) => set_dim(&mut geometry, dim, draw_dim(dim, values, rng)),
        }
    }
    let layouts = draw_layouts(signature, layout_reads, &program_args(&scalars, &[]), &geometry, rng)?;
    let uploaded = layouts
        .iter()
        .map(|layout| layout.as_ref().map(|layout| layout.upload(host)).transpose())
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    let args = program_args(&scalars, &uploaded);
    let layout_requirements_hold =
        signature.requires.iter().filter(|requirement| reads_layout(requirement.program)).all(
            |requirement| {
                signature::evaluate(requirement.program, &args, &geometry).is_ok_and(|held| held != 0)
            },
        );
    if !layout_requirements_hold {
        return None;
    }
    let arguments = signature
        .params
        .iter()
        .zip(scalars)
        .zip(layouts)
        .map(|((param, scalar), layout)| match (param.kind, scalar, layout) {
            (ParamKind::Scalar(_), scalar, _) => scalar.map(Drawn::Scalar),
            (ParamKind::Buffer { .. }, _, Some(layout)) => Some(Drawn::Layout(layout)),
            (ParamKind::Buffer { dtype, extent, .. }, _, None) => {
                match signature::evaluate(extent.program, &args, &geometry) {
                    Ok(elements) => (elements <= MAX_ELEMENTS).then_some(Drawn::Buffer { dtype, elements }),
                    // Kept: the launch shows that the check refuses the layout.
                    Err(_) if reads_layout(extent.program) => Some(Drawn::Buffer { dtype, elements: 0 }),
                    Err(_) => None,
                }
            }
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Launch { arguments, geometry })
}

/// The layout of each buffer a `strided` of `reads` reads, by parameter position (`None` at any
/// other), each as long as its extent evaluates to over `args` (the scalars) and `geometry`:
/// `None` where one cannot be drawn (its extent does not evaluate or is past the cap, its rank
/// does not evaluate, its type is `bool`).
fn draw_layouts(
    signature: &Signature,
    reads: &[LayoutRead],
    args: &[KernelArg<'_>],
    geometry: &LaunchGeometry,
    rng: &mut Draw,
) -> Option<Vec<Option<Layout>>> {
    let mut layouts = vec![None; signature.params.len()];
    for (index, param) in signature.params.iter().enumerate() {
        let ParamKind::Buffer { dtype, extent, .. } = param.kind else { continue };
        // The first read of the layout gives its rank; each run of strides any read takes is
        // drawn.
        let mut of_layout = reads.iter().filter(|read| read.layout == index);
        let Some(first) = of_layout.next() else { continue };
        let parts = of_layout.map(|read| read.part).fold(first.part, u16::max);
        let length =
            signature::evaluate(extent.program, args, geometry).ok().filter(|&n| n <= MAX_ELEMENTS)?;
        let rank = signature::evaluate(first.rank, args, geometry).ok()?;
        let values = layout_values(rank, parts, length, dtype.is_signed(), rng);
        *layouts.get_mut(index)? = Some(Layout::new(dtype, &values)?);
    }
    Some(layouts)
}

/// The `length` values of a layout of `rank` dims and `parts` runs of strides: dims whose
/// elements fit [`MAX_LAYOUT_ELEMENTS`], each run of strides drawn on its own ([`strides`]),
/// zeros past them, and, one layout in [`REFUSED_LAYOUT_ONE_IN`], a dim of 0 or (`signed`) a
/// negative value, which the check refuses. A rank past `length` keeps the values that fit
/// (the check refuses the short layout).
fn layout_values(rank: u64, parts: u16, length: u64, signed: bool, rng: &mut Draw) -> Vec<i128> {
    // At most `MAX_ELEMENTS`, which fits `usize`.
    let length = length as usize;
    let rank = usize::try_from(rank).map_or(length, |rank| rank.min(length));
    let dims = dims(rank, rng);
    let mut values: Vec<i128> = dims.iter().map(|&dim| i128::from(dim)).collect();
    for _ in 0..parts {
        values.extend(strides(&dims, rng).into_iter().map(i128::from));
    }
    values.resize(length, 0);
    match rng.below(REFUSED_LAYOUT_ONE_IN) {
        0 if rank > 0 => values[rng.index(rank)] = 0,
        1 if signed && length > 0 => values[rng.index(length)] = -1 - i128::from(rng.below(3)),
        _ => {}
    }
    values
}

/// `rank` dims drawn from [`DIMS`], in a drawn order of axes, each that would take the layout past
/// [`MAX_LAYOUT_ELEMENTS`] elements left at 1.
fn dims(rank: usize, rng: &mut Draw) -> Vec<u64> {
    let mut dims = vec![1u64; rank];
    let mut axes: Vec<usize> = (0..rank).collect();
    rng.shuffle(&mut axes);
    let mut elements = 1u64;
    for axis in axes {
        let dim = rng.pick(&DIMS);
        if let Some(grown) = elements.checked_mul(dim).filter(|&grown| grown <= MAX_LAYOUT_ELEMENTS) {
            dims[axis] = dim;
            elements = grown;
        }
    }
    dims
}

/// The strides of a contiguous layout of `dims` whose axes lie in `order`, outermost first.
fn contiguous(dims: &[u64], order: &[usize]) -> Vec<u64> {
    let mut strides = vec![0u64; dims.len()];
    let mut stride = 1u64;
    for &axis in order.iter().rev() {
        strides[axis] = stride;
        stride = stride.saturating_mul(dims[axis]);
    }
    strides
}

/// One run of strides over `dims`, as a caller's tensors have them: contiguous, transposed (the
/// axes of a contiguous layout permuted), broadcast (some strides 0), overlapping (each stride at
/// most the contiguous one, so elements are read more than once), drawn from [`SMALL`], or
/// contiguous but for one huge stride ([`HUGE_STRIDES`]).
fn strides(dims: &[u64], rng: &mut Draw) -> Vec<u64> {
    let row_major: Vec<usize> = (0..dims.len()).collect();
    let mut strides = contiguous(dims, &row_major);
    match rng.below(6) {
        0 => {}
        1 => {
            let mut order = row_major;
            rng.shuffle(&mut order);
            strides = contiguous(dims, &order);
        }
        2 => strides.iter_mut().filter(|_| rng.below(2) == 0).for_each(|stride| *stride = 0),
        3 => strides.iter_mut().for_each(|stride| *stride = rng.below(stride.saturating_add(1))),
        4 => strides.iter_mut().for_each(|stride| *stride = rng.pick(&SMALL)),
        _ if !strides.is_empty() => {
            let axis = rng.index(strides.len());
            strides[axis] = rng.pick(&HUGE_STRIDES);
        }
        _ => {}
    }
    strides
}

fn draw_scalar(param: &KernelParam, values: &[u64], rng: &mut Draw) -> Option<Scalar> {
    let ParamKind::Scalar(kind) = param.kind else { return None };
    if !kind.is_integer() {
        return Scalar::from_f64(kind, f64::from(rng.unit()) * 2.0);
    }
    // A value the kind cannot hold is drawn again as a small one.
    let value = rng.pick(values);
    Scalar::from_size(kind, value).or_else(|| Scalar::from_size(kind, value % 2))
}

/// One dimension of a launch: a common size for it (one to a few blocks) or a value of the entry's
/// dictionary.
fn draw_dim(dim: LaunchDim, values: &[u64], rng: &mut Draw) -> u32 {
    let common: &[u32] = match dim {
        LaunchDim::BlockX => &BLOCK_X,
        LaunchDim::BlockY => &[1, 1, 1, 2, 4],
        LaunchDim::BlockZ | LaunchDim::GridZ => &[1, 1, 1, 1, 2],
        LaunchDim::GridX => &[1, 1, 2, 3],
        LaunchDim::GridY => &[1, 1, 1, 2],
        LaunchDim::SharedBytes => &[0, 0, 0, 256, 4096],
    };
    if rng.below(2) == 0 { rng.pick(common) } else { u32::try_from(rng.pick(values)).unwrap_or(u32::MAX) }
}

/// Sets `dim` of `geometry` to `value`.
fn set_dim(geometry: &mut LaunchGeometry, dim: LaunchDim, value: u32) {
    let LaunchGeometry { grid, block, shared_mem_bytes } = geometry;
    let place = match dim {
        LaunchDim::GridX => &mut grid.0,
        LaunchDim::GridY => &mut grid.1,
        LaunchDim::GridZ => &mut grid.2,
        LaunchDim::BlockX => &mut block.0,
        LaunchDim::BlockY => &mut block.1,
        LaunchDim::BlockZ => &mut block.2,
        LaunchDim::SharedBytes => shared_mem_bytes,
    };
    *place = value;
}

/// Whether `geometry` is within the device's limits ([`DEVICE`]), [`MAX_LAUNCH_THREADS`] and
/// [`MAX_DYNAMIC_SHARED`].
fn fits(geometry: &LaunchGeometry) -> bool {
    let LaunchGeometry { grid, block, shared_mem_bytes } = *geometry;
    let threads = u64::from(block.0) * u64::from(block.1) * u64::from(block.2);
    let blocks = u64::from(grid.0) * u64::from(grid.1) * u64::from(grid.2);
    let within = |extent: (u32, u32, u32), limit: [u32; 3]| {
        extent.0 <= limit[0] && extent.1 <= limit[1] && extent.2 <= limit[2]
    };
    threads > 0
        && blocks > 0
        && threads <= u64::from(DEVICE.max_threads_per_block)
        && within(block, DEVICE.max_block)
        && within(grid, DEVICE.max_grid)
        && threads * blocks <= MAX_LAUNCH_THREADS
        && u64::from(shared_mem_bytes) <= MAX_DYNAMIC_SHARED
}

#[cfg(test)]
mod tests {
    use kda_runtime::signature::{Access, Requirement, ScalarKind};

    use super::*;

    #[test]
    fn neighbouring_seeds_draw_different_streams() {
        let first = |seed| {
            let mut draw = Draw::new(seed);
            [draw.next(), draw.next()]
        };
        // Made odd, seeds 2k and 2k + 1 were one stream.
        for seed in [0u64, 2, 1 << 20, u64::MAX - 1] {
            assert_ne!(first(seed), first(seed + 1), "seeds {seed} and {}", seed + 1);
        }
        assert_eq!(first(42), first(42), "a seed draws the same stream again");
    }

    const N: [Op; 1] = [Op::Scalar(1)];
    /// `const f32 x[n], u32 n` with `requires` `n % 4 == 3` and `block.x == 96 || block.x == 200`.
    const SIGNATURE: Signature = Signature {
        params: &[
            KernelParam::buffer("x", DType::F32, Access::Read, "n", &N),
            KernelParam::scalar("n", ScalarKind::U32),
        ],
        requires: &[
            Requirement::new("n % 4 == 3", &[Op::Scalar(1), Op::Literal(4), Op::Rem, Op::Literal(3), Op::Eq]),
            Requirement::new(
                "block.x == 96 || block.x == 200",
                &[
                    Op::Launch(kda_runtime::signature::LaunchDim::BlockX),
                    Op::Literal(96),
                    Op::Eq,
                    Op::Launch(kda_runtime::signature::LaunchDim::BlockX),
                    Op::Literal(200),
                    Op::Eq,
                    Op::Or,
                ],
            ),
        ],
    };

    #[test]
    fn every_drawn_launch_keeps_the_requirements_and_sizes_each_buffer_at_its_extent() {
        let mut rng = Draw::new(7);
        let mut blocks = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let launch = draw(&SIGNATURE, &mut rng, 4000).expect("a launch exists");
            let [Drawn::Buffer { dtype: DType::F32, elements }, Drawn::Scalar(n)] = launch.arguments[..]
            else {
                panic!("an f32 buffer, then a scalar: {launch:?}")
            };
            let Some(n) = n.get::<u32>() else { panic!("n is a u32: {launch:?}") };
            assert_eq!(n % 4, 3, "{launch:?}");
            assert_eq!(elements, u64::from(n), "{launch:?}");
            blocks.insert(launch.geometry.block.0);
        }
        // 200 is no common block size: it comes from the requirement's own literal.
        assert_eq!(blocks.into_iter().collect::<Vec<_>>(), [96, 200]);
    }

    #[test]
    fn a_contract_of_many_requirements_is_met_by_repairing_each_one_it_breaks() {
        use kda_runtime::signature::LaunchDim::{BlockX, BlockY, GridX};
        // `u32 n, u32 m, u32 h`: five requirements at once, which a whole new draw meets about
        // once in ten million tries.
        const MANY: Signature = Signature {
            params: &[
                KernelParam::scalar("n", ScalarKind::U32),
                KernelParam::scalar("m", ScalarKind::U32),
                KernelParam::scalar("h", ScalarKind::U32),
            ],
            requires: &[
                Requirement::new("block.x == 200", &[Op::Launch(BlockX), Op::Literal(200), Op::Eq]),
                Requirement::new("block.y == 2", &[Op::Launch(BlockY), Op::Literal(2), Op::Eq]),
                Requirement::new("n == 17", &[Op::Scalar(0), Op::Literal(17), Op::Eq]),
                Requirement::new("m == 33", &[Op::Scalar(1), Op::Literal(33), Op::Eq]),
                Requirement::new("grid.x >= h", &[Op::Launch(GridX), Op::Scalar(2), Op::Ge]),
            ],
        };
        // Repairs meet every requirement within 100 tries for nearly every draw, on any seed's
        // stream (a draw that does not is drawn again by the runner).
        let (mut met, mut missed) = (0, 0);
        for seed in 0..50 {
            let mut rng = Draw::new(seed);
            for _ in 0..20 {
                let Some(launch) = draw(&MANY, &mut rng, 100) else {
                    missed += 1;
                    continue;
                };
                met += 1;
                let scalar = |index: usize| match launch.arguments[index] {
                    Drawn::Scalar(scalar) => scalar.get::<u32>().expect("a u32"),
                    _ => panic!("a scalar: {launch:?}"),
                };
                let LaunchGeometry { grid, block, .. } = launch.geometry;
                assert_eq!((block.0, block.1, scalar(0), scalar(1)), (200, 2, 17, 33), "{launch:?}");
                assert!(grid.0 >= scalar(2), "{launch:?}");
                // Repairs keep the launch on the device: 400 threads a block, at most 4096 in all.
                assert!(u64::from(grid.0 * grid.1 * grid.2) * 400 * u64::from(block.2) <= MAX_LAUNCH_THREADS);
            }
        }
        assert!(missed * 20 <= met, "repairs met every requirement in {met} draws and missed {missed}");
    }

    #[test]
    fn the_dictionary_holds_the_value_of_each_constant_sub_expression() {
        // `shared.bytes >= 4 * (128 + 128) * 2 + n`: 2048, which no literal is, and no sum with n.
        let program = [
            Op::Launch(kda_runtime::signature::LaunchDim::SharedBytes),
            Op::Literal(4),
            Op::Literal(128),
            Op::Literal(128),
            Op::Add,
            Op::Mul,
            Op::Literal(2),
            Op::Mul,
            Op::Scalar(0),
            Op::Add,
            Op::Ge,
        ];
        assert_eq!(constants(&program), [4, 128, 128, 256, 1024, 2, 2048]);
        // A malformed program ends the search where it stops making sense.
        assert_eq!(constants(&[Op::Literal(3), Op::Add, Op::Literal(5)]), [3]);
    }

    #[test]
    fn a_contract_no_launch_keeps_has_none_drawn() {
        const NEVER: Signature = Signature {
            params: &[KernelParam::scalar("n", ScalarKind::U32)],
            requires: &[Requirement::new("n < n", &[Op::Scalar(0), Op::Scalar(0), Op::Lt])],
        };
        assert!(draw(&NEVER, &mut Draw::new(1), 500).is_none());
    }

    #[test]
    fn an_extent_past_the_cap_is_not_drawn() {
        const HUGE: [Op; 3] = [Op::Scalar(1), Op::Literal(MAX_ELEMENTS), Op::Mul];
        const SIGNATURE: Signature = Signature {
            params: &[
                KernelParam::buffer("x", DType::F32, Access::Read, "n*CAP", &HUGE),
                KernelParam::scalar("n", ScalarKind::U32),
            ],
            requires: &[],
        };
        let mut rng = Draw::new(3);
        for _ in 0..20 {
            let launch = draw(&SIGNATURE, &mut rng, 4000).expect("n = 0 and 1 fit");
            assert!(
                matches!(launch.arguments[0], Drawn::Buffer { elements, .. } if elements <= MAX_ELEMENTS),
                "{launch:?}"
            );
        }
    }

    /// `u64 numel, u64 rank, const u64 info[3 * rank], const f32 lhs[strided(info, rank)],
    /// const f32 rhs[strided(info, rank, 2)], f32 out[numel]`: a binary op's two strided inputs.
    const STRIDED_LHS: [Op; 2] = [Op::Scalar(1), Op::Strided(2, 1)];
    const STRIDED_RHS: [Op; 2] = [Op::Scalar(1), Op::Strided(2, 2)];
    const STRIDED: Signature = Signature {
        params: &[
            KernelParam::scalar("numel", ScalarKind::U64),
            KernelParam::scalar("rank", ScalarKind::U64),
            KernelParam::buffer(
                "info",
                DType::U64,
                Access::Read,
                "3 * rank",
                &[Op::Literal(3), Op::Scalar(1), Op::Mul],
            ),
            KernelParam::buffer("lhs", DType::F32, Access::Read, "strided(info, rank)", &STRIDED_LHS),
            KernelParam::buffer("rhs", DType::F32, Access::Read, "strided(info, rank, 2)", &STRIDED_RHS),
            KernelParam::buffer("out", DType::F32, Access::Write, "numel", &[Op::Scalar(0)]),
        ],
        requires: &[],
    };

    /// The reach of the dims `dims` at `strides`: one past the largest offset, as the check
    /// computes it.
    fn reach(dims: &[u64], strides: &[u64]) -> Option<u64> {
        dims.iter().zip(strides).try_fold(1u64, |reach, (&dim, &stride)| {
            reach.checked_add(dim.checked_sub(1)?.checked_mul(stride)?)
        })
    }

    #[test]
    fn a_strided_input_gets_a_drawn_layout_and_is_sized_at_its_reach_or_left_for_the_check_to_refuse() {
        let mut rng = Draw::new(11);
        let (mut kept, mut refused, mut zero_strides, mut unit_dims, mut transposed, mut overlapping) =
            (0, 0, 0, 0, 0, 0);
        for _ in 0..400 {
            let launch = draw(&STRIDED, &mut rng, 4000).expect("a launch exists");
            let [Drawn::Scalar(_), Drawn::Scalar(rank), Drawn::Layout(Layout::U64(info)), lhs, rhs, _] =
                &launch.arguments[..]
            else {
                panic!("the layout drawn as `u64`s: {launch:?}")
            };
            let rank = rank.get::<u64>().expect("a u64") as usize;
            assert_eq!(info.len(), 3 * rank, "the layout is its extent long: {launch:?}");
            let (dims, strides) = info.split_at(rank);
            let (lhs_strides, rhs_strides) = strides.split_at(rank);
            for (input, strides) in [(lhs, lhs_strides), (rhs, rhs_strides)] {
                let &Drawn::Buffer { elements, .. } = input else { panic!("a buffer: {launch:?}") };
                match reach(dims, strides) {
                    // Each input exactly its reach, within the cap.
                    Some(reach) if dims.iter().all(|&dim| dim > 0) => {
                        assert_eq!(elements, reach, "{launch:?}");
                        assert!(reach <= MAX_ELEMENTS, "{launch:?}");
                        kept += 1;
                        zero_strides += usize::from(strides.iter().zip(dims).any(|(&s, &d)| s == 0 && d > 1));
                        unit_dims += usize::from(dims.contains(&1));
                        // A later axis with a larger stride than an earlier one: transposed.
                        transposed += usize::from(strides.windows(2).any(|pair| pair[0] < pair[1]));
                        let elements_addressed = dims.iter().product::<u64>();
                        overlapping +=
                            usize::from(reach < elements_addressed && strides.iter().all(|&s| s > 0));
                    }
                    // A dim of 0 or a reach past u64: the launch is kept with no buffer, for the
                    // check to refuse.
                    _ => {
                        assert_eq!(elements, 0, "{launch:?}");
                        refused += 1;
                    }
                }
            }
        }
        for (what, count) in [
            ("kept", kept),
            ("refused", refused),
            ("broadcast", zero_strides),
            ("dims of 1", unit_dims),
            ("transposed", transposed),
            ("overlapping", overlapping),
        ] {
            assert!(count >= 10, "{count} inputs {what} of 800 drawn");
        }
    }

    /// `u32 rank, const L info[2 * rank], const f32 x[strided(info, rank)]`, the layout of `L`s.
    const fn unary_over(layout: DType) -> [KernelParam; 3] {
        [
            KernelParam::scalar("rank", ScalarKind::U32),
            KernelParam::buffer(
                "info",
                layout,
                Access::Read,
                "2 * rank",
                &[Op::Literal(2), Op::Scalar(0), Op::Mul],
            ),
            KernelParam::buffer(
                "x",
                DType::F32,
                Access::Read,
                "strided(info, rank)",
                &[Op::Scalar(0), Op::Strided(1, 1)],
            ),
        ]
    }

    #[test]
    fn a_signed_layout_is_sometimes_negative_and_a_layout_of_huge_strides_is_not_kept() {
        const SIGNED: Signature = Signature { params: &unary_over(DType::I32), requires: &[] };
        let mut rng = Draw::new(5);
        let mut negative = 0;
        for _ in 0..300 {
            let launch = draw(&SIGNED, &mut rng, 4000).expect("a launch exists");
            let [_, Drawn::Layout(Layout::I32(info)), Drawn::Buffer { elements, .. }] = &launch.arguments[..]
            else {
                panic!("an `i32` layout: {launch:?}")
            };
            if info.iter().any(|&value| value < 0) {
                negative += 1;
                assert_eq!(*elements, 0, "a negative layout is left for the check to refuse: {launch:?}");
            }
            // A huge stride is kept only on an axis of one element or where its reach overflows.
            assert!(*elements <= MAX_ELEMENTS, "{launch:?}");
        }
        assert!(negative >= 10, "{negative} negative layouts of 300");
    }

    #[test]
    fn a_layout_of_no_type_a_layout_is_uploaded_as_draws_nothing() {
        // A `bool` layout has no `upload_const`: no launch, never a panic.
        const BOOLS: Signature = Signature { params: &unary_over(DType::Bool), requires: &[] };
        assert!(draw(&BOOLS, &mut Draw::new(2), 100).is_none());
    }
}
