//! The model's f32 products on tf32 tensor cores (`kernels/mma_f32.cuh`, the "3xTF32" split) on the
//! emulator: one 16×8×8 tile by three tf32 products is within f32's precision of the exact
//! product, where one tf32 product is off by the operands' rounding. The fixture kernel
//! (`tests/mma_f32/`) is built by this test for the emulator only.
#![cfg(feature = "emulation")]

use std::path::Path;
use std::sync::OnceLock;

use kda_build::cuda::emulation::Emulation;
use kda_runtime::emu::EmuBackend;
use kda_runtime::signature::{Access, KernelParam, Op, Signature};
use kda_runtime::{DType, EmulatedSet, GpuBackend, GpuBackendExt, KernelEntry, LaunchGeometry};
use kda_test_support::emulator::{Bits, assert_built, build, emulated_set};

/// The namespace of the fixture set and its entry.
const NAMESPACE: &str = "mma_f32@0:kernels.toml";

/// An f32 buffer of `text` (the literal `len`) elements.
const fn buffer(name: &'static str, access: Access, text: &'static str, len: &'static [Op]) -> KernelParam {
    KernelParam::buffer(name, DType::F32, access, text, len)
}

/// `const f32 a[128], const f32 b[64], f32 split[128], f32 single[128]`.
const MMA_F32_TILE: KernelEntry = KernelEntry {
    namespace: NAMESPACE,
    table: "fixtures",
    field: "mma_f32_tile",
    module: "mma_f32",
    entry: "mma_f32_tile",
    required: true,
    line: 0,
    signature: Some(&Signature {
        params: &[
            buffer("a", Access::Read, "128", &[Op::Literal(128)]),
            buffer("b", Access::Read, "64", &[Op::Literal(64)]),
            buffer("split", Access::Write, "128", &[Op::Literal(128)]),
            buffer("single", Access::Write, "128", &[Op::Literal(128)]),
        ],
        requires: &[],
    }),
};

/// The fixture of `tests/mma_f32/`, built once.
fn fixtures() -> &'static EmulatedSet {
    static SET: OnceLock<&'static EmulatedSet> = OnceLock::new();
    SET.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mma_f32");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mma-f32-fixture");
        let output = build(&dir, &out, Emulation::default());
        assert_built(&output, "the mma_f32 fixture");
        emulated_set(NAMESPACE, &output.emulated, &[MMA_F32_TILE], None)
    })
}

#[test]
fn three_tf32_products_give_an_f32_tile_where_one_is_off_by_the_tf32_rounding() {
    let gpu = EmuBackend::new(&[fixtures()]).unwrap_or_else(|error| panic!("{error}")).with_seed(66);
    let mut bits = Bits(0x6633_7466);
    let a: Vec<f32> = (0..128).map(|_| bits.f32_any()).collect();
    let b: Vec<f32> = (0..64).map(|_| bits.f32_any()).collect();
    let (a_buffer, b_buffer) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let (mut split, mut single) =
        (gpu.upload(&[f32::NAN; 128]).unwrap(), gpu.upload(&[f32::NAN; 128]).unwrap());
    let kernel = gpu.lookup(&MMA_F32_TILE).unwrap_or_else(|error| panic!("{error}"));
    let geometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };
    gpu.launch(
        kernel,
        geometry,
        &mut [(&a_buffer).into(), (&b_buffer).into(), (&mut split).into(), (&mut single).into()],
    )
    .unwrap_or_else(|error| panic!("{error}"));
    // The largest error of a tile against the exact (f64) product, relative to Σ_k |a·b| of its
    // element.
    let worst = |tile: &[f32]| {
        (0..128)
            .map(|at| {
                let (m, n) = (at / 8, at % 8);
                let terms = (0..8).map(|k| f64::from(a[m * 8 + k]) * f64::from(b[k * 8 + n]));
                let (exact, scale) =
                    terms.fold((0.0, 0.0), |(sum, abs), term: f64| (sum + term, abs + term.abs()));
                (f64::from(tile[at]) - exact).abs() / scale
            })
            .fold(0.0, f64::max)
    };
    let (split, single) =
        (worst(&gpu.download::<f32>(&split).unwrap()), worst(&gpu.download::<f32>(&single).unwrap()));
    // Three products: each off by at most about 3·2⁻²² of |a·b| (the dropped lo·lo and the two lo
    // roundings), 24 f32 additions on top. One: the operands' tf32 rounding, up to 2⁻¹¹ each.
    assert!(split <= 2f64.powi(-19), "three tf32 products: worst relative error {split:e}");
    assert!(single >= 2f64.powi(-15), "one tf32 product: worst relative error {single:e}, no worse than f32");
}
