//! `silu_mul`: the SwiGLU gate `silu(gate) · up` in one kernel, where candle's own ops take two.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::CudaDType;
use candle_core::{CpuStorage, CudaStorage, CustomOp2, DType, Layout, Result, Shape, Tensor, WithDType};
use kda_runtime::cudarc::driver::DeviceRepr;
use kda_runtime::{Element, bf16};

use crate::candle_ops::{self, silu_mul_type};
use crate::operands::{same_shape, unsupported};
use crate::{cpu, cuda};

/// The op: `silu(gate) · up` elementwise, computed in f32 and rounded once, for two contiguous
/// tensors of one shape and element type (f32 or bf16). Forward only.
#[derive(Debug, Clone, Copy)]
pub struct SiluMul;

/// `silu(gate) · up` through [`SiluMul`], on the tensors' device.
pub fn silu_mul(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    gate.apply_op2_no_bwd(up, &SiluMul)
}

/// `silu(g) · u` in f32, as the kernel computes it.
fn gated(g: f32, u: f32) -> f32 {
    g / (1.0 + (-g).exp()) * u
}

impl CustomOp2 for SiluMul {
    fn name(&self) -> &'static str {
        "silu-mul"
    }

    fn cpu_fwd(
        &self,
        gate: &CpuStorage,
        gate_layout: &Layout,
        up: &CpuStorage,
        up_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        fn run<T: WithDType>(
            gate: &CpuStorage,
            gate_layout: &Layout,
            up: &CpuStorage,
            up_layout: &Layout,
        ) -> Result<CpuStorage> {
            let (gate, up) =
                (cpu::elements::<T>("gate", gate, gate_layout)?, cpu::elements::<T>("up", up, up_layout)?);
            let out =
                gate.iter().zip(up).map(|(&g, &u)| cpu::from_f32(gated(cpu::to_f32(g), cpu::to_f32(u))));
            Ok(T::to_cpu_storage_owned(out.collect()))
        }
        let shape = same_shape(self.name(), &[("gate", gate_layout), ("up", up_layout)])?;
        let out = match gate.dtype() {
            DType::F32 => run::<f32>(gate, gate_layout, up, up_layout),
            DType::BF16 => run::<bf16>(gate, gate_layout, up, up_layout),
            other => Err(unsupported(self.name(), other)),
        }?;
        Ok((out, shape))
    }

    fn cuda_fwd(
        &self,
        gate: &CudaStorage,
        gate_layout: &Layout,
        up: &CudaStorage,
        up_layout: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        fn run<T: CudaDType + DeviceRepr + Element + silu_mul_type>(
            op: &str,
            shape: &Shape,
            gate: &CudaStorage,
            gate_layout: &Layout,
            up: &CudaStorage,
            up_layout: &Layout,
        ) -> Result<CudaStorage> {
            let (gate_view, up_view) =
                (cuda::elements::<T>("gate", gate, gate_layout)?, cuda::elements::<T>("up", up, up_layout)?);
            let (n, geometry) = cuda::linear(op, shape)?;
            let device = &gate.device;
            let (gpu, kernels) = cuda::kernels(device)?;
            // SAFETY: the memory is left unset; nothing reads it before the launch below writes
            // every element (the kernel's grid-stride loop covers `n` whatever the grid), and if kda
            // refuses the launch, `out` is dropped unread.
            let mut out = unsafe { device.alloc::<T>(n as usize) }?;
            kernels
                .launch_silu_mul::<T>(
                    &gpu,
                    geometry,
                    candle_ops::silu_mul {
                        gate: (&gate_view).into(),
                        up: (&up_view).into(),
                        out: (&mut out).into(),
                        n,
                    },
                )
                .map_err(candle_core::Error::wrap)?;
            Ok(CudaStorage::wrap_cuda_slice(out, device.clone()))
        }
        let shape = same_shape(self.name(), &[("gate", gate_layout), ("up", up_layout)])?;
        let out = match gate.dtype() {
            DType::F32 => run::<f32>(self.name(), &shape, gate, gate_layout, up, up_layout),
            DType::BF16 => run::<bf16>(self.name(), &shape, gate, gate_layout, up, up_layout),
            other => Err(unsupported(self.name(), other)),
        }?;
        Ok((out, shape))
    }
}
