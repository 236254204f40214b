//! Builders for the hand-written signatures of this crate's unit tests, and the entries several
//! of them share.

use crate::signature::{Access, KernelParam, LaunchDim, Op, Requirement, ScalarKind};
use crate::{DType, DeviceBuffer, GpuBackend, KernelEntry, Signature};

/// A `const dtype[text]` parameter, `program` being `text` in postfix order.
pub const fn read(
    name: &'static str,
    dtype: DType,
    text: &'static str,
    program: &'static [Op],
) -> KernelParam {
    KernelParam::buffer(name, dtype, Access::Read, text, program)
}

/// A `dtype[text]` parameter, `program` being `text` in postfix order.
pub const fn write(
    name: &'static str,
    dtype: DType,
    text: &'static str,
    program: &'static [Op],
) -> KernelParam {
    KernelParam::buffer(name, dtype, Access::Write, text, program)
}

/// The entry `module::entry` of the table `test`, launched against `signature`.
pub const fn signed(module: &'static str, entry: &'static str, signature: &'static Signature) -> KernelEntry {
    KernelEntry { table: "test", signature: Some(signature), ..KernelEntry::named(module, entry) }
}

/// No parameters, no requirements.
pub const EMPTY: Signature = Signature { params: &[], requires: &[] };

/// `y[i] += a·x[i]` for `i < n`, launched with at most 1024 threads per block.
pub const AXPY_SIGNATURE: Signature = Signature {
    params: &[
        read("x", DType::F32, "n", &[Op::Scalar(2)]),
        write("y", DType::F32, "n", &[Op::Scalar(2)]),
        KernelParam::scalar("n", ScalarKind::U32),
        KernelParam::scalar("a", ScalarKind::F32),
    ],
    requires: &[Requirement::new(
        "block.x <= 1024",
        &[Op::Launch(LaunchDim::BlockX), Op::Literal(1024), Op::Le],
    )],
};

/// `blas::axpy` with [`AXPY_SIGNATURE`].
pub const AXPY: KernelEntry = signed("blas", "axpy", &AXPY_SIGNATURE);

/// The bytes of each of `buffers`, to show a refused launch changed none of them.
pub fn contents(gpu: &dyn GpuBackend, buffers: &[&DeviceBuffer]) -> Vec<Vec<u8>> {
    let download = |buffer: &&DeviceBuffer| {
        let mut bytes = vec![0; buffer.byte_len()];
        gpu.copy_to_host(buffer, &mut bytes).unwrap();
        bytes
    };
    buffers.iter().map(download).collect()
}
