//! The launch contract of one entry, as the manifest writes it: its parameters (`params`), with
//! the extent of every buffer, and its preconditions (`requires`).
//!
//! ```toml
//! gemm = { module = "gemm", entry = "dense_gemm_bf16",
//!          params = "const bf16 a[m*k], const bf16 b[n*k], bf16 c[m*n], u32 m, u32 n, u32 k",
//!          requires = ["block.x == GEMM_THREADS", "block.y * block.z == 1"] }
//! ```

use std::fmt;

pub use kda_types::{DType, LaunchDim, Op, ScalarKind};

use super::Location;

/// One parameter of a kernel, in the kernel's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name: unique within the entry, a C identifier (it names an argument of the launcher).
    pub name: String,
    /// What it is.
    pub ty: ParamType,
    /// For a buffer whose reach depends on data kda cannot check (an index buffer's contents, a
    /// layout on the device): what the caller of a launch guarantees (the entry's `safety`). Its
    /// launcher is then an `unsafe fn`.
    pub safety: Option<String>,
    /// The variant axis its type is written as (`T x` under `variants = { T = [...] }`).
    pub type_axis: Option<String>,
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
        /// The number of elements the kernel may touch (`?`, unknown to kda, is 0: all it can
        /// check, the rest is the parameter's `safety`).
        extent: Expr,
        /// `EXTENT` as written (for messages and generated docs).
        extent_text: String,
        /// `nullable`: a null pointer may fill it, for a kernel that takes it as absent.
        nullable: bool,
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
    /// A dimension of the launch geometry (`block.x`, `grid.y`, ..., `shared.bytes`), which the
    /// launch check reads from the launch's geometry.
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
    /// `strided(layout, rank, part)`: the reach of the strided layout a `const` integer buffer
    /// holds, its `rank` dims first, then runs of `rank` strides.
    Strided {
        /// The layout buffer's name.
        layout: String,
        /// Its position in the entry's parameters.
        index: usize,
        /// How many dims (and as many strides in each part) it holds.
        rank: Box<Expr>,
        /// Which run of strides this reach is of, from 1 (the run after the dims).
        part: u16,
    },
    /// `condition ? taken : other`: only the side chosen is evaluated for its errors.
    Select {
        /// What chooses.
        condition: Box<Comparison>,
        /// The value when the condition holds.
        taken: Box<Expr>,
        /// The value when it does not.
        other: Box<Expr>,
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
    /// `a / b`: ⌊a / b⌋ (`b = 0` is an error)
    Div,
    /// `min(a, b)`
    Min,
    /// `max(a, b)`
    Max,
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
    /// The manifest spelling without the name: `const bf16[m*k]`, `nullable f32[n]`, `u32`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamType::Buffer { element, writable, extent_text, nullable, .. } => {
                let nullable = if *nullable { "nullable " } else { "" };
                let constness = if *writable { "" } else { "const " };
                write!(f, "{nullable}{constness}{}[{extent_text}]", element.name())
            }
            ParamType::Scalar(scalar) => f.write_str(scalar.name()),
        }
    }
}

impl Expr {
    /// The expression as the postfix program the launch check evaluates; `[defines]` become their
    /// values. A scalar's position saturates at `u16::MAX`: the derive refuses an entry with more
    /// parameters than that before any program of it is used.
    pub fn program(&self) -> Vec<Op> {
        let mut program = Vec::new();
        self.push_postfix(&mut program);
        program
    }

    fn push_postfix(&self, program: &mut Vec<Op>) {
        match self {
            Expr::Literal(value) | Expr::Define { value, .. } => program.push(Op::Literal(*value)),
            Expr::Scalar { index, .. } => program.push(Op::Scalar(u16::try_from(*index).unwrap_or(u16::MAX))),
            Expr::Launch(dim) => program.push(Op::Launch(*dim)),
            Expr::Binary { op, lhs, rhs } => {
                lhs.push_postfix(program);
                rhs.push_postfix(program);
                program.push(op.op());
            }
            Expr::Strided { index, rank, part, .. } => {
                rank.push_postfix(program);
                program.push(Op::Strided(u16::try_from(*index).unwrap_or(u16::MAX), *part));
            }
            Expr::Select { condition, taken, other } => {
                condition.push_postfix(program);
                taken.push_postfix(program);
                other.push_postfix(program);
                program.push(Op::Select);
            }
        }
    }
}

impl Comparison {
    fn push_postfix(&self, program: &mut Vec<Op>) {
        self.lhs.push_postfix(program);
        self.rhs.push_postfix(program);
        program.push(self.op.op());
    }
}

impl BinaryOp {
    /// The program instruction of the operator.
    pub const fn op(self) -> Op {
        match self {
            BinaryOp::Add => Op::Add,
            BinaryOp::Sub => Op::Sub,
            BinaryOp::Mul => Op::Mul,
            BinaryOp::Rem => Op::Rem,
            BinaryOp::Cdiv => Op::Cdiv,
            BinaryOp::Div => Op::Div,
            BinaryOp::Min => Op::Min,
            BinaryOp::Max => Op::Max,
        }
    }
}

impl CompareOp {
    /// Whether `a op b` holds.
    pub const fn holds(self, a: u64, b: u64) -> bool {
        match self {
            CompareOp::Eq => a == b,
            CompareOp::Ne => a != b,
            CompareOp::Lt => a < b,
            CompareOp::Le => a <= b,
            CompareOp::Gt => a > b,
            CompareOp::Ge => a >= b,
        }
    }

    /// The program instruction of the comparison.
    pub const fn op(self) -> Op {
        match self {
            CompareOp::Eq => Op::Eq,
            CompareOp::Ne => Op::Ne,
            CompareOp::Lt => Op::Lt,
            CompareOp::Le => Op::Le,
            CompareOp::Gt => Op::Gt,
            CompareOp::Ge => Op::Ge,
        }
    }
}

impl Requirement {
    /// The requirement as the postfix program the launch check evaluates: each comparison, the
    /// alternatives joined by `Or`.
    pub fn program(&self) -> Vec<Op> {
        let mut program = Vec::new();
        for (i, comparison) in self.any_of.iter().enumerate() {
            comparison.push_postfix(&mut program);
            if i > 0 {
                program.push(Op::Or);
            }
        }
        program
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Manifest;

    #[test]
    fn extents_and_requirements_compile_to_postfix_programs() {
        let text = r#"
            [defines]
            TILE = 64

            [t]
            e = { module = "m", entry = "e", params = "const f32 x[cdiv(n, TILE) * k + 1], u32 n, u32 k, f32 y[k > 0 ? n / k : grid.x]",
                  requires = ["block.x == 256 || n % 2 != 0"] }
        "#;
        let manifest = Manifest::parse("kernels.toml", text).unwrap();
        let entry = &manifest.tables[0].entries[0];
        let params = entry.params.as_ref().unwrap();
        let ParamType::Buffer { extent, .. } = &params[0].ty else { panic!("x is a buffer") };
        use Op::*;
        assert_eq!(
            extent.program(),
            [Scalar(1), Literal(64), Cdiv, Scalar(2), Mul, Literal(1), Add],
            "{extent:?}"
        );
        let ParamType::Buffer { extent, .. } = &params[3].ty else { panic!("y is a buffer") };
        assert_eq!(
            extent.program(),
            [Scalar(2), Literal(0), Gt, Scalar(1), Scalar(2), Div, Launch(LaunchDim::GridX), Select]
        );
        assert_eq!(
            entry.requires[0].program(),
            [Launch(LaunchDim::BlockX), Literal(256), Eq, Scalar(1), Literal(2), Rem, Literal(0), Ne, Or]
        );
    }
}
