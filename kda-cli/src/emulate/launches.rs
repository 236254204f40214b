//! Launches made from an entry's contract alone: scalars and a geometry drawn from small values
//! and the literals of the entry's own programs (as a fuzzer's dictionary), each requirement a
//! candidate breaks repaired by drawing again one value it reads, and kept when every requirement
//! holds and every extent can be evaluated and is small enough to allocate.

use kda_emu::DeviceLimits;
use kda_runtime::signature::{self, KernelParam, LaunchDim, Op, ParamKind};
use kda_runtime::{KernelArg, LaunchGeometry, Scalar, Signature};

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

/// One launch of an entry: its scalars in parameter order (`None` at a buffer), its geometry,
/// and each buffer's extent (`None` at a scalar).
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    /// The scalar arguments, by parameter position.
    pub scalars: Vec<Option<Scalar>>,
    /// The grid, block and dynamic shared memory.
    pub geometry: LaunchGeometry,
    /// The elements each buffer needs, by parameter position.
    pub extents: Vec<Option<u64>>,
}

/// A small, seeded generator (xorshift64*): the same seed draws the same launches.
#[derive(Clone, Debug)]
pub struct Draw(u64);

impl Draw {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
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

    /// One of `items` (not empty).
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// A float in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.below(1 << 24) as f32 / (1 << 23) as f32) - 1.0
    }
}

/// What values an entry's launches are drawn from: [`SMALL`] and its programs' literals, each
/// with its neighbours.
fn dictionary(signature: &Signature) -> Vec<u64> {
    let programs = signature
        .params
        .iter()
        .filter_map(|param| match param.kind {
            ParamKind::Buffer { extent, .. } => Some(extent.program),
            ParamKind::Scalar(_) => None,
        })
        .chain(signature.requires.iter().map(|requirement| requirement.program));
    let constants = programs.flat_map(constants);
    let mut values: Vec<u64> = SMALL
        .into_iter()
        .chain(constants.flat_map(|value| [value.saturating_sub(1), value, value.saturating_add(1)]))
        .collect();
    values.sort_unstable();
    values.dedup();
    values
}

/// The values of `program`'s constant sub-expressions, its literals among them: what it compares
/// a scalar or the launch with, such as `GEMM_STAGES * (GEMM_TILE_M + GEMM_TILE_N) * 64`, which
/// no literal of it is.
fn constants(program: &[Op]) -> Vec<u64> {
    // Each value on the stack: where its sub-expression starts, and whether it reads no argument.
    let mut stack: Vec<(usize, bool)> = Vec::new();
    let mut found = Vec::new();
    let no_launch = LaunchGeometry { grid: (1, 1, 1), block: (1, 1, 1), shared_mem_bytes: 0 };
    for (end, op) in program.iter().enumerate() {
        let (pops, reads) = match op {
            Op::Literal(_) => (0, false),
            Op::Scalar(_) | Op::Launch(_) => (0, true),
            Op::Strided(..) => (1, true),
            Op::Select => (3, false),
            _ => (2, false),
        };
        let Some(first) = stack.len().checked_sub(pops) else { return found };
        let operands = stack.split_off(first);
        let start = operands.first().map_or(end, |(start, _)| *start);
        let constant = !reads && operands.iter().all(|(_, constant)| *constant);
        if constant && let Ok(value) = signature::evaluate(&program[start..=end], &[], &no_launch) {
            found.push(value);
        }
        stack.push((start, constant));
    }
    found
}

/// Draws up to `tries` candidates for one launch of `signature`; the first that keeps every
/// requirement, with extents that evaluate and fit [`MAX_ELEMENTS`], or `None`.
pub fn draw(signature: &Signature, rng: &mut Draw, tries: u32) -> Option<Launch> {
    let values = dictionary(signature);
    (0..tries).find_map(|_| candidate(signature, &values, rng))
}

/// A value a program reads: a scalar, by position, or a dimension of the launch.
#[derive(Clone, Copy)]
enum Read {
    Scalar(usize),
    Launch(LaunchDim),
}

fn candidate(signature: &Signature, values: &[u64], rng: &mut Draw) -> Option<Launch> {
    let mut scalars: Vec<Option<Scalar>> =
        signature.params.iter().map(|param| draw_scalar(param, values, rng)).collect();
    let mut geometry = LaunchGeometry { grid: (1, 1, 1), block: (1, 1, 1), shared_mem_bytes: 0 };
    for dim in LaunchDim::ALL {
        set_dim(&mut geometry, dim, draw_dim(dim, values, rng));
    }
    // The programs read integer scalars by position; a buffer's place holds a placeholder they
    // never read (the manifest's `Scalar` positions name integer scalars only).
    let arguments = |scalars: &[Option<Scalar>]| -> Vec<KernelArg<'static>> {
        scalars.iter().map(|scalar| KernelArg::from(scalar.unwrap_or(Scalar::new(0u32)))).collect()
    };
    let mut repairs = 0;
    let args = loop {
        let args = arguments(&scalars);
        let broken = signature.requires.iter().find(|requirement| {
            signature::evaluate(requirement.program, &args, &geometry).map_or(true, |held| held == 0)
        });
        let reads: Vec<Read> = match broken {
            Some(requirement) => requirement
                .program
                .iter()
                .filter_map(|op| match op {
                    Op::Scalar(index) => Some(Read::Scalar(usize::from(*index))),
                    Op::Launch(dim) => Some(Read::Launch(*dim)),
                    _ => None,
                })
                .collect(),
            None if fits(&geometry) => break args,
            None => LaunchDim::ALL.map(Read::Launch).to_vec(),
        };
        if reads.is_empty() || repairs == REPAIRS {
            return None;
        }
        repairs += 1;
        match rng.pick(&reads) {
            Read::Scalar(index) => {
                let param = signature.params.get(index)?;
                *scalars.get_mut(index)? = draw_scalar(param, values, rng);
            }
            Read::Launch(dim) => set_dim(&mut geometry, dim, draw_dim(dim, values, rng)),
        }
    };
    let extents = signature
        .params
        .iter()
        .map(|param| match param.kind {
            ParamKind::Buffer { extent, .. } => {
                let elements = signature::evaluate(extent.program, &args, &geometry).ok()?;
                (elements <= MAX_ELEMENTS).then_some(Some(elements))
            }
            ParamKind::Scalar(_) => Some(None),
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Launch { scalars, geometry, extents })
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
    use kda_runtime::DType;
    use kda_runtime::signature::{Access, Requirement, ScalarKind};

    use super::*;

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
            let Some(n) = launch.scalars[1].and_then(Scalar::get::<u32>) else {
                panic!("n is a u32: {launch:?}")
            };
            assert_eq!(n % 4, 3, "{launch:?}");
            assert_eq!(launch.extents, [Some(u64::from(n)), None]);
            assert_eq!(launch.scalars[0], None);
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
        let mut rng = Draw::new(5);
        for _ in 0..20 {
            let launch = draw(&MANY, &mut rng, 100).expect("repairs meet every requirement");
            let scalar = |index: usize| launch.scalars[index].and_then(Scalar::get::<u32>).expect("a u32");
            let LaunchGeometry { grid, block, .. } = launch.geometry;
            assert_eq!((block.0, block.1, scalar(0), scalar(1)), (200, 2, 17, 33), "{launch:?}");
            assert!(grid.0 >= scalar(2), "{launch:?}");
            // Repairs keep the launch on the device: 400 threads a block, at most 4096 in all.
            assert!(u64::from(grid.0 * grid.1 * grid.2) * 400 * u64::from(block.2) <= MAX_LAUNCH_THREADS);
        }
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
        assert_eq!(draw(&NEVER, &mut Draw::new(1), 500), None);
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
            assert!(launch.extents[0].is_some_and(|extent| extent <= MAX_ELEMENTS), "{launch:?}");
        }
    }
}
