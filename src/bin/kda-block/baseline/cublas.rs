//! cuBLAS's bf16 GEMM: the vendor's product that the table's own GEMM is measured against, on the
//! same device in the same run (`kda-block bench`). The product is the table's `gemm`:
//! `c[m,n] = a[m,k] · b[n,k]ᵀ`, bf16 in and out, f32 accumulation (`cublasGemmEx`, compute
//! `CUBLAS_COMPUTE_32F`), all row-major. libcublas is loaded at run time: a machine without it
//! gets [`BackendError::Unavailable`]. It is this binary's alone: the model's users, and kda's,
//! never load cuBLAS.

// The binary's one FFI of its own: cuBLAS's GEMM. Each `unsafe` block says what it relies on.
#![allow(unsafe_code)]

use std::time::Duration;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::CudaSlice;
use kda_runtime::cuda::CudaBackend;
use kda_runtime::{BackendError, GpuBackend, bf16};

use super::GemmBaseline;

/// cuBLAS on device `ordinal`, issuing on the stream of a CUDA backend of its own (whose events
/// time it).
pub struct CublasGemm {
    backend: CudaBackend,
    blas: CudaBlas,
}

impl GemmBaseline for CublasGemm {
    fn describe(&self) -> String {
        format!("cuBLAS on {}", self.backend.describe())
    }

    /// On operands drawn like the `gemm` case's: uniform in [-1, 1), rounded to bf16.
    fn time(&self, m: u32, n: u32, k: u32, iterations: u32) -> Result<Duration, BackendError> {
        let mut rng = kda::rng::SplitMix64::new(0x6b64_615f_626c_6173);
        let mut operand = |rows: u32| -> Vec<bf16> {
            let len = rows as usize * k as usize;
            rng.uniform_vec(len, 1.0).into_iter().map(bf16::from_f32).collect()
        };
        let (a, b) = (operand(m), operand(n));
        self.time_product(&a, &b, (m, n, k), iterations)
    }
}

impl CublasGemm {
    /// cuBLAS on device `ordinal`: an `Err`, never a panic, where there is no driver, no such
    /// device or no libcublas.
    pub fn open(ordinal: usize) -> Result<Self, BackendError> {
        let backend = CudaBackend::new(ordinal, &[])?;
        // SAFETY: only tries to open the library; no cuBLAS function is called.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(BackendError::Unavailable {
                backend: "cuBLAS".to_owned(),
                reason: "libcublas is not installed on this machine".to_owned(),
            });
        }
        let blas = CudaBlas::new(backend.stream().clone())
            .map_err(|error| blas_error("creating a handle", error))?;
        Ok(Self { backend, blas })
    }

    /// The time of one `m×n×k` product of `a [m, k]` and `b [n, k]` (give them realistic values:
    /// a tensor core's power, and so its clock, depends on them), after one warm-up launch:
    /// `iterations` launches back to back between two events, divided.
    fn time_product(
        &self,
        a: &[bf16],
        b: &[bf16],
        (m, n, k): (u32, u32, u32),
        iterations: u32,
    ) -> Result<Duration, BackendError> {
        let dimension = |value: u32| {
            i32::try_from(value)
                .map_err(|_| BackendError::TooLarge { dtype: kda_runtime::DType::Bf16, len: value as usize })
        };
        let (rows, columns, depth) = (dimension(m)?, dimension(n)?, dimension(k)?);
        let elements = |x: u32, y: u32| (x as usize) * (y as usize);
        for (operand, expected) in [(a, elements(m, k)), (b, elements(n, k))] {
            if operand.len() != expected || expected == 0 {
                return Err(BackendError::SizeMismatch { expected: expected * 2, found: operand.len() * 2 });
            }
        }
        let (a, b) = (self.upload(a)?, self.upload(b)?);
        let mut c = self.backend.stream().alloc_zeros::<bf16>(elements(m, n).max(1)).map_err(driver_error)?;
        // Row-major c[m,n] is column-major cᵀ[n,m] = b[n,k] · aᵀ[k,m]: cuBLAS's A is `b` (held
        // column-major as bᵀ[k,n], so transposed back), its B is `a` (column-major aᵀ[k,m]).
        let config = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_T,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: columns,
            n: rows,
            k: depth,
            alpha: bf16::ONE,
            lda: depth,
            ldb: depth,
            beta: bf16::ZERO,
            ldc: columns,
        };
        let mut launch = || {
            // SAFETY: cuBLAS reads op(A) = bᵀ as a k×n column-major matrix with lda = k: the n·k
            // elements `b` holds (checked above); B = a, k×m with ldb = k: the m·k elements of `a`
            // (checked above); and writes
            // C, n×m with ldc = n: the m·n elements of `c` (`m·n ≥ 1`, allocated above). All
            // three were allocated on the handle's stream (`CudaBlas::new` above binds it to
            // `backend.stream`), and cudarc's `device_ptr` orders them there.
            unsafe { self.blas.gemm(config, &b, &a, &mut c) }
                .map_err(|error| blas_error("cublasGemmEx", error))
        };
        launch()?;
        let total = self.backend.time(&mut || (0..iterations).try_for_each(|_| launch()))?;
        Ok(total / iterations.max(1))
    }

    fn upload(&self, values: &[bf16]) -> Result<CudaSlice<bf16>, BackendError> {
        self.backend.stream().clone_htod(values).map_err(driver_error)
    }
}

fn driver_error(error: cudarc::driver::DriverError) -> BackendError {
    BackendError::Driver { operation: "preparing a cuBLAS product".to_owned(), source: Box::new(error) }
}

fn blas_error(operation: &str, error: cudarc::cublas::result::CublasError) -> BackendError {
    BackendError::Driver { operation: format!("cuBLAS: {operation}"), source: Box::new(error) }
}
