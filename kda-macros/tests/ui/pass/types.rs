//! Every type a kernel library's kernels take, through a typed launcher: `half::f16` and
//! `half::bf16`, the primitive integers and floats, `bool`, and fp8 as its bits, each checked and
//! handed to the CPU kernel as its Rust type.
use kda_runtime::cpu::CpuBackend;
use kda_runtime::{BackendError, Fp8E4M3, Fp8E5M2, GpuBackendExt, KernelTable, LaunchGeometry, bf16, f16};

#[derive(KernelTable)]
#[kernel_table(manifest = "types.toml")]
pub struct Types;

fn main() {
    let gpu = CpuBackend::new().with_kernel(types::every::ENTRY, |mut args| {
        let n = args.scalar::<u64>(10)? as usize;
        let (s, t, u) = (args.scalar::<f16>(12)?, args.scalar::<bf16>(13)?, args.scalar::<f64>(14)?);
        let (w, y, z) = (args.scalar::<u8>(16)?, args.scalar::<u16>(18)?, args.scalar::<bool>(19)?);
        let (h, p) = (args.slice::<f16>(0)?, args.slice::<Fp8E4M3>(8)?);
        let d = args.slice_mut::<f64>(1)?;
        for i in 0..n {
            d[i] = f64::from(h[i]) + u + f64::from(s) + f64::from(t);
        }
        args.slice_mut::<u8>(3)?[..n].fill(w);
        args.slice_mut::<u16>(5)?[..n].fill(y);
        args.slice_mut::<u64>(7)?[..n].fill(u64::from(z) + args.slice::<i64>(6)?[0].unsigned_abs());
        let q = args.slice_mut::<Fp8E5M2>(9)?;
        for i in 0..n {
            q[i] = Fp8E5M2(p[i].0);
        }
        let _ = (args.slice::<i8>(2)?, args.slice::<i16>(4)?, args.scalar::<i64>(11)?);
        let _ = (args.scalar::<i8>(15)?, args.scalar::<i16>(17)?);
        Ok(())
    });
    let kernels = TypesKernels::resolve(&gpu).unwrap();
    let geometry = LaunchGeometry { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };
    let h = gpu.upload(&[f16::from_f32(0.5), f16::from_f32(1.5)]).unwrap();
    let (a, c, f) = (gpu.upload(&[1i8, -1]).unwrap(), gpu.upload(&[2i16, -2]).unwrap(), gpu.upload(&[-7i64, 7]).unwrap());
    let p = gpu.upload(&[Fp8E4M3(0x38), Fp8E4M3(0x40)]).unwrap();
    let (mut d, mut b, mut e) = (gpu.zeros::<f64>(2).unwrap(), gpu.zeros::<u8>(2).unwrap(), gpu.zeros::<u16>(2).unwrap());
    let (mut g, mut q) = (gpu.zeros::<u64>(2).unwrap(), gpu.zeros::<Fp8E5M2>(2).unwrap());
    let args = types::every {
        h: h.view().into(), d: d.view_mut().into(), a: a.view().into(), b: b.view_mut().into(), c: c.view().into(), e: e.view_mut().into(),
        f: f.view().into(), g: g.view_mut().into(), p: p.view().into(), q: q.view_mut().into(), n: 2, o: 0,
        s: f16::from_f32(0.25), t: bf16::from_f32(2.0), u: 10.0, v: -3, w: 200, x: -300, y: 60_000, z: true,
    };
    kernels.launch_every(&gpu, geometry, args).unwrap();
    assert_eq!(gpu.download::<f64>(&d).unwrap(), [12.75, 13.75]);
    assert_eq!(gpu.download::<u8>(&b).unwrap(), [200, 200]);
    assert_eq!(gpu.download::<u16>(&e).unwrap(), [60_000, 60_000]);
    assert_eq!(gpu.download::<u64>(&g).unwrap(), [8, 8]);
    assert_eq!(gpu.download::<Fp8E5M2>(&q).unwrap(), [Fp8E5M2(0x38), Fp8E5M2(0x40)]);

    // An i64 that sizes nothing but takes part in a requirement: refused, naming it.
    let args = types::every {
        h: h.view().into(), d: d.view_mut().into(), a: a.view().into(), b: b.view_mut().into(), c: c.view().into(), e: e.view_mut().into(),
        f: f.view().into(), g: g.view_mut().into(), p: p.view().into(), q: q.view_mut().into(), n: 2, o: 1,
        s: f16::ZERO, t: bf16::ZERO, u: 0.0, v: 0, w: 0, x: 0, y: 0, z: false,
    };
    let error = kernels.launch_every(&gpu, geometry, args).unwrap_err();
    assert!(matches!(error, BackendError::Requirement { requirement: "o == 0 || z == 1", .. }), "{error}");
    // A buffer of another element type: refused.
    let wrong = gpu.upload(&[0.5f32, 1.5]).unwrap();
    let args = types::every {
        h: wrong.view().into(), d: d.view_mut().into(), a: a.view().into(), b: b.view_mut().into(), c: c.view().into(), e: e.view_mut().into(),
        f: f.view().into(), g: g.view_mut().into(), p: p.view().into(), q: q.view_mut().into(), n: 2, o: 0,
        s: f16::ZERO, t: bf16::ZERO, u: 0.0, v: 0, w: 0, x: 0, y: 0, z: false,
    };
    let error = kernels.launch_every(&gpu, geometry, args).unwrap_err();
    assert!(error.to_string().contains("`types.every.h`: expected f16 elements, found f32 elements"), "{error}");
}
