//! `weighted_sum`: `a·x + b·y + c·z + w` of four tensors in one kernel, where candle's own ops take
//! six. candle's custom ops take at most three tensors: the fourth rides in the op, as candle's
//! extension crates (flash-attn's ALiBi slopes, layer-norm's residual) carry theirs, and its storage
//! is read under its own lock in each forward.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::CudaDType;
use candle_core::{
    CpuStorage, CudaStorage, CustomOp3, DType, Error, Layout, Result, Shape, Storage, Tensor, WithDType,
};
use kda_runtime::cudarc::driver::DeviceRepr;
use kda_runtime::{Element, bf16};

use crate::candle_ops::{self, weighted_sum_type};
use crate::operands::{same_shape, unsupported};
use crate::{cpu, cuda};

/// The op on `x`, `y`, `z`: `a·x + b·y + c·z + w` elementwise, computed in f32 and rounded once,
/// for four contiguous tensors of one shape, element type (f32 or bf16) and device. Forward only.
#[derive(Debug, Clone)]
pub struct WeightedSum {
    /// The weight of `x`.
    pub a: f32,
    /// The weight of `y`.
    pub b: f32,
    /// The weight of `z`.
    pub c: f32,
    /// The fourth tensor, added unweighted.
    pub w: Tensor,
}

/// `a·x + b·y + c·z + w` through [`WeightedSum`], on the tensors' device.
pub fn weighted_sum(x: &Tensor, y: &Tensor, z: &Tensor, w: &Tensor, [a, b, c]: [f32; 3]) -> Result<Tensor> {
    x.apply_op3_no_bwd(y, z, &WeightedSum { a, b, c, w: w.clone() })
}

impl WeightedSum {
    /// `a·x + b·y + c·z + w` for one element, in f32, as the kernel computes it.
    fn combine(&self, x: f32, y: f32, z: f32, w: f32) -> f32 {
        self.a * x + self.b * y + self.c * z + w
    }
}

impl CustomOp3 for WeightedSum {
    fn name(&self) -> &'static str {
        "weighted-sum"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        x_layout: &Layout,
        y: &CpuStorage,
        y_layout: &Layout,
        z: &CpuStorage,
        z_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        fn run<T: WithDType>(
            op: &WeightedSum,
            operands: [(&str, &CpuStorage, &Layout); 4],
        ) -> Result<CpuStorage> {
            let [x, y, z, w] =
                operands.map(|(name, storage, layout)| cpu::elements::<T>(name, storage, layout));
            let (x, y, z, w) = (x?, y?, z?, w?);
            let out = (0..x.len()).map(|i| {
                cpu::from_f32(op.combine(
                    cpu::to_f32(x[i]),
                    cpu::to_f32(y[i]),
                    cpu::to_f32(z[i]),
                    cpu::to_f32(w[i]),
                ))
            });
            Ok(T::to_cpu_storage_owned(out.collect()))
        }
        let (w_storage, w_layout) = self.w.storage_and_layout();
        let Storage::Cpu(w) = &*w_storage else {
            return Err(Error::msg(format!(
                "{}: `w` is on {:?}, `x` on the CPU",
                self.name(),
                self.w.device().location()
            )));
        };
        let shape =
            same_shape(self.name(), &[("x", x_layout), ("y", y_layout), ("z", z_layout), ("w", w_layout)])?;
        let operands = [("x", x, x_layout), ("y", y, y_layout), ("z", z, z_layout), ("w", w, w_layout)];
        let out = match x.dtype() {
            DType::F32 => run::<f32>(self, operands),
            DType::BF16 => run::<bf16>(self, operands),
            other => Err(unsupported(self.name(), other)),
        }?;
        Ok((out, shape))
    }

    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        x_layout: &Layout,
        y: &CudaStorage,
        y_layout: &Layout,
        z: &CudaStorage,
        z_layout: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        fn run<T: CudaDType + DeviceRepr + Element + weighted_sum_type>(
            op: &WeightedSum,
            shape: &Shape,
            operands: [(&str, &CudaStorage, &Layout); 4],
        ) -> Result<CudaStorage> {
            let [x, y, z, w] =
                operands.map(|(name, storage, layout)| cuda::elements::<T>(name, storage, layout));
            let (x, y, z, w) = (x?, y?, z?, w?);
            let (n, geometry) = cuda::linear(op.name(), shape)?;
            let device = &operands[0].1.device;
            let (gpu, kernels) = cuda::kernels(device)?;
            // SAFETY: the memory is left unset; nothing reads it before the launch below writes
            // every element (the kernel's grid-stride loop covers `n` whatever the grid), and if kda
            // refuses the launch, `out` is dropped unread.
            let mut out = unsafe { device.alloc::<T>(n as usize) }?;
            // kda checks that every view is of this backend's context: a `w` on another device is
            // an `Err` here, not a fault.
            let arguments = candle_ops::weighted_sum {
                x: (&x).into(),
                y: (&y).into(),
                z: (&z).into(),
                w: (&w).into(),
                out: (&mut out).into(),
                n,
                a: op.a,
                b: op.b,
                c: op.c,
            };
            kernels.launch_weighted_sum::<T>(&gpu, geometry, arguments).map_err(Error::wrap)?;
            Ok(CudaStorage::wrap_cuda_slice(out, device.clone()))
        }
        let (w_storage, w_layout) = self.w.storage_and_layout();
        let Storage::Cuda(w) = &*w_storage else {
            return Err(Error::msg(format!(
                "{}: `w` is on {:?}, `x` on a CUDA device",
                self.name(),
                self.w.device().location()
            )));
        };
        let shape =
            same_shape(self.name(), &[("x", x_layout), ("y", y_layout), ("z", z_layout), ("w", w_layout)])?;
        let operands = [("x", x, x_layout), ("y", y, y_layout), ("z", z, z_layout), ("w", w, w_layout)];
        let out = match x.dtype() {
            DType::F32 => run::<f32>(self, &shape, operands),
            DType::BF16 => run::<bf16>(self, &shape, operands),
            other => Err(unsupported(self.name(), other)),
        }?;
        Ok((out, shape))
    }
}
