//! The launch contract of one entry, as the manifest writes it: its parameters (`params`), with
//! the extent of every buffer, and its preconditions (`requires`).
//!
//! ```toml
//! gemm = { module = "gemm", entry = "dense_gemm_bf16",
//!          params = "const bf16 a[m*k], const bf16 b[n*k], bf16 c[m*n], u32 m, u32 n, u32 k",
//!          requires = ["block.x == GEMM_THREADS", "block.y * block.z == 1"] }
//! ```

use std::fmt;

pub use kda_types::{DType, LaunchDim, ScalarKind};

use super::Location;

/// One parameter of a kernel, in the kernel's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name: unique within the entry, a C identifier (it names an argument of the launcher).
    pub name: String,
    /// What it is.
    pub ty: ParamType,
    /// Where its name is written in the manifest.
    pub location: Location,
}

/// A parameter's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamType {
    /// A pointer to device memory: `[const] T name[EXTENT]`.
    Buffer {
        /// The element type `T`.
        element: DType,
        /// No `const`: the kernel writes it.
        writable: bool,
        /// The number of elements the kernel may touch.
        extent: Expr,
        /// `EXTENT` as written (for messages and generated docs).
        extent_text: String,
    },
    /// A value passed by copy: `T name`.
    Scalar(ScalarKind),
}

impl ParamType {
    /// Bytes the parameter takes in the kernel's parameter buffer (a pointer is 8).
    pub const fn size(&self) -> u32 {
        match self {
            ParamType::Buffer { .. } => 8,
            ParamType::Scalar(scalar) => scalar.size() as u32,
        }
    }
}

/// An integer expression of an extent or a requirement, evaluated in `u64` at launch, where
/// overflow, subtraction below zero and division by zero are errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// An integer literal.
    Literal(u64),
    /// An integer scalar parameter of the same entry.
    Scalar {
        /// Its name.
        name: String,
        /// Its position in the entry's parameters.
        index: usize,
    },
    /// A `[defines]` constant, by name, with its value.
    Define {
        /// Its name.
        name: String,
        /// Its value.
        value: u64,
    },
    /// A dimension of the launch geometry (`block.x`, `grid.y`, ..., `shared.bytes`): only in
    /// `requires`.
    Launch(LaunchDim),
    /// `lhs op rhs`.
    Binary {
        /// The operator.
        op: BinaryOp,
        /// The left operand.
        lhs: Box<Expr>,
        /// The right operand.
        rhs: Box<Expr>,
    },
}

/// The integer operators of an expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b` (below zero is an error)
    Sub,
    /// `a * b`
    Mul,
    /// `a % b` (`b = 0` is an error)
    Rem,
    /// `cdiv(a, b)`: ⌈a / b⌉ (`b = 0` is an error)
    Cdiv,
}

/// One precondition of a launch: a comparison, or several joined by `||` (any may hold).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// The alternatives; the requirement holds when one of them does.
    pub any_of: Vec<Comparison>,
    /// As written.
    pub text: String,
    /// Where the string is written in the manifest.
    pub location: Location,
}

/// `lhs op rhs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comparison {
    /// The left side.
    pub lhs: Expr,
    /// The comparison.
    pub op: CompareOp,
    /// The right side.
    pub rhs: Expr,
}

/// The comparisons of a requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl fmt::Display for ParamType {
    /// The manifest spelling without the name: `const bf16[m*k]`, `u32`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamType::Buffer { element, writable, extent_text, .. } => {
                let constness = if *writable { "" } else { "const " };
                write!(f, "{constness}{}[{extent_text}]", element.name())
            }
            ParamType::Scalar(scalar) => f.write_str(scalar.name()),
        }
    }
}
