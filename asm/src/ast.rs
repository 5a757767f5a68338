//! The parse tree. Every node lives in a [`bumpalo::Bump`] arena owned by the caller of
//! [`crate::parser::parse`]; lists are arena slices, and text is borrowed from the source.

use std::ops::Range;

/// A byte range of the source. `Copy`, unlike `Range<usize>`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span { start: self.start.min(other.start), end: self.end.max(other.end) }
    }

    pub fn range(self) -> Range<usize> {
        self.start..self.end
    }
}

impl From<Span> for Range<usize> {
    fn from(s: Span) -> Range<usize> {
        s.start..s.end
    }
}

/// A name (register, global, label, keyword argument) without its sigil.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Name<'a> {
    pub text: &'a str,
    pub span: Span,
}

/// An integer literal. `value` is `None` when it does not even fit an `i128`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntLit {
    pub value: Option<i128>,
    pub span: Span,
}

/// The value of a float literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FloatVal {
    /// A finite number or an infinity.
    Num(f64),
    /// `nan`, `-nan` or `nan(0xPAYLOAD)`: the payload is the mantissa bits of the type the
    /// value is stored in; `None` means that type's default quiet NaN.
    Nan { negative: bool, payload: Option<u64> },
}

/// A float literal; `text` is kept so that narrower types can be parsed from it exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloatLit<'a> {
    pub text: &'a str,
    pub value: FloatVal,
    pub span: Span,
}

/// A numeric literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number<'a> {
    Int(IntLit),
    Float(FloatLit<'a>),
}

impl Number<'_> {
    pub fn span(&self) -> Span {
        match self {
            Number::Int(i) => i.span,
            Number::Float(f) => f.span,
        }
    }
}

/// A string literal, quotes and escapes included as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrLit<'a> {
    pub raw: &'a str,
    pub span: Span,
}

/// A dimension in a declared tensor type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimExpr<'a> {
    Known(IntLit),
    Any(Span),
    /// A symbol: `%n`.
    Sym(Name<'a>),
}

/// `%n <= 8` in a function's `where` clause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymBound<'a> {
    pub sym: Name<'a>,
    pub max: IntLit,
}

/// A type as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeKind<'a> {
    Int,
    Float,
    Shape,
    Storage,
    AnyTensor,
    Tensor { dtype: Name<'a>, dims: &'a [DimExpr<'a>] },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeExpr<'a> {
    pub kind: TypeKind<'a>,
    pub span: Span,
}

/// An instruction operand as written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand<'a> {
    Reg(Name<'a>),
    Int(IntLit),
    Float(FloatLit<'a>),
    Const(Name<'a>),
    /// `none`: an omitted optional operator input (only parsed in operator calls).
    None(Span),
}

impl Operand<'_> {
    pub fn span(&self) -> Span {
        match self {
            Operand::Reg(n) | Operand::Const(n) => n.span,
            Operand::Int(i) => i.span,
            Operand::Float(f) => f.span,
            Operand::None(s) => *s,
        }
    }
}

/// An operator attribute value as written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AttrExpr<'a> {
    Int(IntLit),
    Float(FloatLit<'a>),
    Str(StrLit<'a>),
    /// `[v0, v1, ...]` of numbers; `span` covers the brackets.
    List {
        elems: &'a [Number<'a>],
        span: Span,
    },
}

impl AttrExpr<'_> {
    pub fn span(&self) -> Span {
        match self {
            AttrExpr::Int(i) => i.span,
            AttrExpr::Float(f) => f.span,
            AttrExpr::Str(s) => s.span,
            AttrExpr::List { span, .. } => *span,
        }
    }
}

/// One `name = value` of an attribute block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttrNode<'a> {
    pub name: Name<'a>,
    pub value: AttrExpr<'a>,
}

impl AttrNode<'_> {
    /// From the name to the end of the value.
    pub fn span(&self) -> Span {
        self.name.span.to(self.value.span())
    }
}

/// `{ name = value, ... }` after an operator call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttrBlock<'a> {
    pub attrs: &'a [AttrNode<'a>],
    /// From `{` to `}`.
    pub span: Span,
}

/// `global [d0, ...]` after a kernel call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GlobalClause<'a> {
    pub dims: &'a [Operand<'a>],
    /// From `global` to `]`.
    pub span: Span,
}

/// The operands of an instruction, by mnemonic. The operands of the larger forms are in
/// the arena behind a reference, so that every instruction node stays small (128 bytes,
/// where the largest form made each 272: 59 bytes of memory per byte of a file of `nop`s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum InstrKind<'a> {
    Nop,
    Mov { src: Name<'a> },
    Int { value: IntLit },
    Float(&'a FloatOps<'a>),
    Const { konst: Name<'a> },
    Shape { dims: &'a [Operand<'a>] },
    AllocStorage(&'a AllocStorageOps<'a>),
    AllocTensor(&'a AllocTensorOps<'a>),
    Kill { reg: Name<'a> },
    Call { callee: Name<'a>, args: &'a [Operand<'a>] },
    OpCall(&'a OpCallOps<'a>),
    KernelCall(&'a KernelCallOps<'a>),
    Ret { values: &'a [Operand<'a>] },
    Br { target: Name<'a> },
    BrIf(&'a BrIfOps<'a>),
}

/// `%d = float VALUE`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloatOps<'a> {
    pub value: Number<'a>,
}

/// `%d = alloc_storage SIZE[, align A][, device D][, scope "S"]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllocStorageOps<'a> {
    pub size: Operand<'a>,
    pub align: Option<Operand<'a>>,
    pub device: Option<IntLit>,
    pub scope: Option<StrLit<'a>>,
}

/// `%d = alloc_tensor %storage, OFFSET, DTYPE[dims][, scope "S"]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllocTensorOps<'a> {
    pub storage: Name<'a>,
    pub offset: Operand<'a>,
    pub dtype: Name<'a>,
    pub dims: &'a [Operand<'a>],
    pub scope: Option<StrLit<'a>>,
}

/// `call @onnx.Name(inputs) [-> (outputs)] [{ attributes }]`. `op` is the name after `@`
/// (`onnx.Name`). Inputs are registers, constants or `none`; outputs are parsed as
/// registers, constants or `none` so that the assembler can explain the last two.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpCallOps<'a> {
    pub op: Name<'a>,
    pub inputs: &'a [Operand<'a>],
    pub outputs: &'a [Operand<'a>],
    /// The `->` token, when written.
    pub arrow: Option<Span>,
    pub attrs: Option<AttrBlock<'a>>,
}

/// `call @cl.name(args) [global [d0, ...]]`. `kernel` is the name after `@` (`cl.name`).
/// `global` is `None` when the clause is missing (the assembler explains).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelCallOps<'a> {
    pub kernel: Name<'a>,
    pub args: &'a [Operand<'a>],
    pub global: Option<GlobalClause<'a>>,
}

/// `br_if %cond, THEN, ELSE`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BrIfOps<'a> {
    pub cond: Name<'a>,
    pub then_: Name<'a>,
    pub else_: Name<'a>,
}

/// One instruction: destinations, mnemonic, operands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InstrNode<'a> {
    pub dsts: &'a [Name<'a>],
    pub mnemonic: Name<'a>,
    pub kind: InstrKind<'a>,
    /// From the first token (first destination or mnemonic) to the last operand.
    pub span: Span,
}

/// An item of a function body.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BodyItem<'a> {
    Label(Name<'a>),
    Instr(&'a InstrNode<'a>),
}

/// `in %STORAGE at OFFSET` after a parameter's type: the parameter is a view of the
/// storage parameter `%STORAGE` at byte `OFFSET`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacementExpr<'a> {
    pub storage: Name<'a>,
    pub offset: IntLit,
    /// From `in` to the offset.
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param<'a> {
    pub name: Name<'a>,
    pub ty: TypeExpr<'a>,
    pub placement: Option<PlacementExpr<'a>>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FuncDecl<'a> {
    pub name: Name<'a>,
    pub params: &'a [Param<'a>],
    pub results: &'a [TypeExpr<'a>],
    /// The `where` clause: bounds of dimension symbols.
    pub bounds: &'a [SymBound<'a>],
    pub body: &'a [BodyItem<'a>],
    /// From `func` to the end of the result types.
    pub header_span: Span,
}

/// An element of a constant's value list.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Elem<'a> {
    Num(Number<'a>),
    Bool(bool, Span),
}

impl Elem<'_> {
    pub fn span(&self) -> Span {
        match self {
            Elem::Num(n) => n.span(),
            Elem::Bool(_, s) => *s,
        }
    }
}

/// How a constant's elements are given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ConstInit<'a> {
    List { elems: &'a [Elem<'a>], span: Span },
    Fill(Number<'a>),
    File(StrLit<'a>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConstDecl<'a> {
    pub name: Name<'a>,
    pub ty: TypeExpr<'a>,
    pub init: ConstInit<'a>,
}

/// Where a kernel's OpenCL C source comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelSource<'a> {
    /// The source itself, as a string literal.
    Str(StrLit<'a>),
    /// `file("path")`, relative to the `.rxa` file.
    File(StrLit<'a>),
}

/// `kernel @name = opencl("entry", source)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelDecl<'a> {
    pub name: Name<'a>,
    pub entry: StrLit<'a>,
    pub source: KernelSource<'a>,
}

/// The module name, as an identifier or a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleName<'a> {
    Ident(Name<'a>),
    Str(StrLit<'a>),
}

/// A parsed `.rxa` file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SourceModule<'a> {
    pub name: Option<ModuleName<'a>>,
    pub consts: &'a [ConstDecl<'a>],
    pub kernels: &'a [KernelDecl<'a>],
    pub funcs: &'a [FuncDecl<'a>],
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function body holds one node per instruction, `nop`s included: their size is
    /// most of the assembler's memory for a long function.
    #[test]
    fn an_instruction_node_is_small() {
        assert!(std::mem::size_of::<InstrNode<'_>>() <= 128, "{}", std::mem::size_of::<InstrNode<'_>>());
    }
}
