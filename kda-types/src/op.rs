//! The instructions of the contract's integer programs: an extent (`m*k`) or a requirement
//! (`block.x == 256`) is compiled once, by the manifest, into a postfix program of [`Op`]s, which
//! the derive embeds and the launch check evaluates.

use crate::LaunchDim;

/// One step of an extent or requirement program: pushes a value, pops two and pushes one, or
/// ([`Op::Select`]) pops three and pushes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Pushes a literal (a `[defines]` constant arrives here as its value).
    Literal(u64),
    /// Pushes the integer scalar argument at this parameter position.
    Scalar(u16),
    /// Pushes a dimension of the launch geometry.
    Launch(LaunchDim),
    /// Pops a rank `r` and pushes the reach of the strided layout the buffer argument at the
    /// first position holds: its `r` dims, then runs of `r` strides, of which the second number
    /// picks one (1 for the run right after the dims). The reach is 1 + Σ (dim − 1) × stride, or 0
    /// where a dim is 0. The buffer's contents must be known on the host.
    Strided(u16, u16),
    /// `a + b`.
    Add,
    /// `a - b`; below zero is an error.
    Sub,
    /// `a * b`.
    Mul,
    /// `a % b`; `b = 0` is an error.
    Rem,
    /// `⌈a / b⌉`; `b = 0` is an error.
    Cdiv,
    /// `⌊a / b⌋`; `b = 0` is an error.
    Div,
    /// The smaller of `a` and `b`.
    Min,
    /// The larger of `a` and `b`.
    Max,
    /// `a == b` (1 or 0).
    Eq,
    /// `a != b`.
    Ne,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
    /// `a || b`.
    Or,
    /// `c ? a : b`, popping `c`, `a` and `b` (pushed in that order): only the value taken can
    /// fail the program, so `n == 0 ? 0 : m / n` is defined at `n = 0`.
    Select,
}
