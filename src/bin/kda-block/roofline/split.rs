//! Split K where the dense dispatch splits it, at the real sizes.
//!
//! Whether the GEMM splits K ([`gemm_splits`]) depends on a product's tile count, which is not
//! affine in the head count: at the 1 to 3 heads the model samples, a decode step's input
//! projection would split and its o_proj would not, and at 64 heads the other way round. So the
//! samples run without the split-K pair, and each extrapolated `gemm` becomes `gemm_splitk` and
//! `gemm_reduce` where the dispatch would split it at its real sizes.

use kda::kernels::Glm5NextKdaEntry;
use kda::ops::gemm_splits;
use kda_runtime::DType;

use super::{LaunchArg, LaunchModel, RooflineError};

/// The entries the sampled runs leave out.
pub const SPLIT_K: [Glm5NextKdaEntry; 2] = [Glm5NextKdaEntry::gemm_splitk, Glm5NextKdaEntry::gemm_reduce];

/// `launches` with each `gemm` whose sizes the dispatch splits replaced by the split-K pair over
/// the same operands: `a, b, partial, m, n, k, lda, splits`, then `partial, c, m, n, splits`.
pub fn split_k(launches: Vec<LaunchModel>) -> Result<Vec<LaunchModel>, RooflineError> {
    let mut split = Vec::with_capacity(launches.len());
    for launch in launches {
        if launch.entry != Glm5NextKdaEntry::gemm {
            split.push(launch);
            continue;
        }
        let [m, n, k] = [launch.need("m")?, launch.need("n")?, launch.need("k")?];
        let size = |value: u64| u32::try_from(value).unwrap_or(u32::MAX);
        let splits = gemm_splits(size(m), size(n), size(k));
        if splits == 1 {
            split.push(launch);
            continue;
        }
        let int = |name: &'static str, value: u64| LaunchArg::Int { name, value };
        let (m_arg, n_arg, splits_arg) = (int("m", m), int("n", n), int("splits", u64::from(splits)));
        let len = u64::from(splits) * m * n;
        let partial = |writable| LaunchArg::Buffer { name: "partial", dtype: DType::F32, len, writable };
        let operands = [launch.arg("a")?, launch.arg("b")?];
        let tail =
            [m_arg.clone(), n_arg.clone(), int("k", k), int("lda", launch.need("lda")?), splits_arg.clone()];
        let split_args = operands.into_iter().chain([partial(true)]).chain(tail).collect();
        split.push(LaunchModel::new(Glm5NextKdaEntry::gemm_splitk, split_args)?);
        let reduce_args = vec![partial(false), launch.arg("c")?, m_arg, n_arg, splits_arg];
        split.push(LaunchModel::new(Glm5NextKdaEntry::gemm_reduce, reduce_args)?);
    }
    Ok(split)
}
