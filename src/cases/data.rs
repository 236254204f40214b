//! The arguments of a launch case: host data, how the kernel uses each buffer, and the
//! constructors the cases are written with.

use std::fmt;
use std::ops::Range;

use half::bf16;
use kda_runtime::signature::{self, ParamKind, ScalarKind};
use kda_runtime::{BackendError, DType, DeviceBuffer, GpuBackend, GpuBackendExt};

use super::*;

/// What the positions of a buffer a kernel must not touch hold: chunk padding of the inputs (which
/// the kernels must read as zero) and the parts of outputs a kernel must leave alone. Exactly
/// representable in bf16 and f32, and far from every real value.
pub const POISON: f32 = 7.5;

/// Host data of one buffer.
#[derive(Clone, PartialEq)]
pub enum HostData {
    /// bf16 elements.
    Bf16(Vec<bf16>),
    /// f32 elements.
    F32(Vec<f32>),
    /// u32 elements.
    U32(Vec<u32>),
}

impl HostData {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            HostData::Bf16(_) => DType::Bf16,
            HostData::F32(_) => DType::F32,
            HostData::U32(_) => DType::U32,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            HostData::Bf16(data) => data.len(),
            HostData::F32(data) => data.len(),
            HostData::U32(data) => data.len(),
        }
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements, widened exactly to f64.
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            HostData::Bf16(data) => data.iter().map(|x| x.to_f64()).collect(),
            HostData::F32(data) => data.iter().map(|&x| f64::from(x)).collect(),
            HostData::U32(data) => data.iter().map(|&x| f64::from(x)).collect(),
        }
    }

    /// The elements' bit patterns (bf16 in the low 16 bits).
    pub fn bits(&self) -> Vec<u32> {
        match self {
            HostData::Bf16(data) => data.iter().map(|x| u32::from(x.to_bits())).collect(),
            HostData::F32(data) => data.iter().map(|x| x.to_bits()).collect(),
            HostData::U32(data) => data.clone(),
        }
    }

    /// Whether every element is finite.
    pub fn is_finite(&self) -> bool {
        match self {
            HostData::Bf16(data) => data.iter().all(|x| x.is_finite()),
            HostData::F32(data) => data.iter().all(|x| x.is_finite()),
            HostData::U32(_) => true,
        }
    }

    /// Whether every element is zero (of either sign); true when empty.
    pub fn is_all_zero(&self) -> bool {
        self.to_f64().iter().all(|&x| x == 0.0)
    }

    /// The bf16 elements, if these are bf16.
    pub fn as_bf16(&self) -> Option<&[bf16]> {
        match self {
            HostData::Bf16(data) => Some(data),
            HostData::F32(_) | HostData::U32(_) => None,
        }
    }

    /// The f32 elements, if these are f32.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            HostData::F32(data) => Some(data),
            HostData::Bf16(_) | HostData::U32(_) => None,
        }
    }

    /// A new buffer on `gpu` holding `offset` [`POISON`] elements, then this data.
    pub fn upload_at(&self, gpu: &dyn GpuBackend, offset: usize) -> Result<DeviceBuffer, BackendError> {
        fn prefixed<T: Copy>(poison: T, offset: usize, data: &[T]) -> Vec<T> {
            let mut all = vec![poison; offset];
            all.extend_from_slice(data);
            all
        }
        match self {
            HostData::Bf16(data) => gpu.upload(&prefixed(bf16::from_f32(POISON), offset, data)),
            HostData::F32(data) => gpu.upload(&prefixed(POISON, offset, data)),
            HostData::U32(data) => gpu.upload(&prefixed(POISON as u32, offset, data)),
        }
    }

    /// Elements `range` of `buffer`.
    pub(super) fn download_range(
        &self,
        gpu: &dyn GpuBackend,
        buffer: &DeviceBuffer,
        range: Range<usize>,
    ) -> Result<Self, BackendError> {
        // Of this data's element type: a buffer of another is a `DTypeMismatch` from `download`.
        Ok(match self {
            HostData::Bf16(_) => HostData::Bf16(gpu.download(buffer)?[range].to_vec()),
            HostData::F32(_) => HostData::F32(gpu.download(buffer)?[range].to_vec()),
            HostData::U32(_) => HostData::U32(gpu.download(buffer)?[range].to_vec()),
        })
    }
}

impl fmt::Debug for HostData {
    /// The type and length only: the data runs to millions of elements.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} × {}", self.dtype(), self.len())
    }
}

impl From<Vec<bf16>> for HostData {
    fn from(data: Vec<bf16>) -> Self {
        HostData::Bf16(data)
    }
}

impl From<Vec<f32>> for HostData {
    fn from(data: Vec<f32>) -> Self {
        HostData::F32(data)
    }
}

impl From<Vec<u32>> for HostData {
    fn from(data: Vec<u32>) -> Self {
        HostData::U32(data)
    }
}

/// How a kernel uses a buffer argument; a written buffer says how it must agree with the
/// reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Access {
    /// `const T*`: only read.
    Read,
    /// `T*`, written without being read (its initial contents are [`POISON`]).
    Write(Check),
    /// `T*`, read and written in place (a state).
    ReadWrite(Check),
}

/// A buffer argument.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferArg {
    /// The ABI's name of the parameter (`state`, `out`, ...).
    pub name: &'static str,
    /// The contents uploaded before the launch.
    pub data: HostData,
    /// How the kernel uses it.
    pub access: Access,
    /// The prefix the kernel uses: elements past it are padding, never read as data and, in a
    /// written buffer, left untouched (checked bit for bit).
    pub used: usize,
    /// Elements the kernel must read (or write) once each: `used`, unless the kernel touches
    /// only part of the prefix (the L2 norm leaves the v channels alone).
    pub moved: usize,
}

/// One argument of a launch case, in the kernel's parameter order, named as the manifest names
/// the parameter it fills.
#[derive(Clone, Debug, PartialEq)]
pub enum CaseArg {
    /// A buffer of its own.
    Buffer(BufferArg),
    /// Elements `range` of a read-only buffer holding `data`: the `pointer + offset` the block
    /// passes for q, k and v of the packed conv output.
    Slice {
        /// The ABI's name of the parameter.
        name: &'static str,
        /// The whole buffer.
        data: HostData,
        /// The part the kernel gets.
        range: Range<usize>,
    },
    /// A `u32` scalar.
    U32 {
        /// The ABI's name of the parameter.
        name: &'static str,
        /// Its value.
        value: u32,
    },
    /// An `f32` scalar.
    F32 {
        /// The ABI's name of the parameter.
        name: &'static str,
        /// Its value.
        value: f32,
    },
}

impl CaseArg {
    /// The `u32` scalar `name`.
    pub(super) fn u32(name: &'static str, value: u32) -> Self {
        CaseArg::U32 { name, value }
    }

    /// The `f32` scalar `name`.
    pub(super) fn f32(name: &'static str, value: f32) -> Self {
        CaseArg::F32 { name, value }
    }

    /// The name of the parameter it fills.
    pub fn name(&self) -> &'static str {
        match self {
            CaseArg::Buffer(BufferArg { name, .. })
            | CaseArg::Slice { name, .. }
            | CaseArg::U32 { name, .. }
            | CaseArg::F32 { name, .. } => name,
        }
    }

    /// Whether it is what a parameter of `kind` takes: a buffer of its element type and access
    /// (a written buffer for a written parameter, a read-only one for a `const` one), or a scalar
    /// of its type. Extents are the launch's to check.
    pub(super) fn fits(&self, kind: ParamKind) -> bool {
        match (self, kind) {
            (
                CaseArg::Buffer(BufferArg { data, access, .. }),
                ParamKind::Buffer { dtype, access: param, .. },
            ) => data.dtype() == dtype && (*access == Access::Read) == (param == signature::Access::Read),
            (CaseArg::Slice { data, .. }, ParamKind::Buffer { dtype, access, .. }) => {
                data.dtype() == dtype && access == signature::Access::Read
            }
            (CaseArg::U32 { .. }, ParamKind::Scalar(ScalarKind::U32))
            | (CaseArg::F32 { .. }, ParamKind::Scalar(ScalarKind::F32)) => true,
            _ => false,
        }
    }
}

impl fmt::Display for CaseArg {
    /// As the manifest would declare it: `const bf16[4096] x`, `f32[2048] state`, `u32 n`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaseArg::Buffer(BufferArg { name, data, access: Access::Read, .. }) => {
                write!(f, "const {}[{}] {name}", data.dtype(), data.len())
            }
            CaseArg::Buffer(BufferArg { name, data, .. }) => {
                write!(f, "{}[{}] {name}", data.dtype(), data.len())
            }
            CaseArg::Slice { name, data, range } => {
                write!(f, "const {}[{}] {name}", data.dtype(), range.len())
            }
            CaseArg::U32 { name, .. } => write!(f, "u32 {name}"),
            CaseArg::F32 { name, .. } => write!(f, "f32 {name}"),
        }
    }
}

/// A buffer the kernel reads whole.
pub(super) fn read(name: &'static str, data: impl Into<HostData>) -> CaseArg {
    let data = data.into();
    let len = data.len();
    CaseArg::Buffer(BufferArg { name, data, access: Access::Read, used: len, moved: len })
}

/// A buffer the kernel reads the first `used` elements of (the rest is poisoned padding).
pub(super) fn read_prefix(name: &'static str, data: Vec<f32>, used: usize) -> CaseArg {
    let data = HostData::F32(data);
    CaseArg::Buffer(BufferArg { name, data, access: Access::Read, used, moved: used })
}

/// An element type of the model's buffers.
pub(super) trait CaseElement: Copy {
    /// [`POISON`] as this type.
    const POISON: Self;
}

impl CaseElement for bf16 {
    const POISON: Self = bf16::from_f32_const(POISON);
}

impl CaseElement for f32 {
    const POISON: Self = POISON;
}

impl CaseElement for u32 {
    const POISON: Self = POISON as u32;
}

/// A poisoned buffer of `len` the kernel writes whole.
pub(super) fn write<T: CaseElement>(name: &'static str, len: u32, check: Check) -> CaseArg
where
    HostData: From<Vec<T>>,
{
    write_prefix::<T>(name, len, len, check)
}

/// A poisoned buffer of `len` the kernel writes the first `used` elements of.
pub(super) fn write_prefix<T: CaseElement>(name: &'static str, len: u32, used: u32, check: Check) -> CaseArg
where
    HostData: From<Vec<T>>,
{
    let data = HostData::from(vec![T::POISON; len as usize]);
    let used = used as usize;
    CaseArg::Buffer(BufferArg { name, data, access: Access::Write(check), used, moved: used })
}

/// A buffer the kernel reads and writes in place.
pub(super) fn update(name: &'static str, data: impl Into<HostData>, check: Check) -> CaseArg {
    let data = data.into();
    let len = data.len();
    CaseArg::Buffer(BufferArg { name, data, access: Access::ReadWrite(check), used: len, moved: len })
}
