//! The builtin table: names, signatures and one-line docs of every `@vm.*` function.
//! The assembler resolves names here, the verifier checks calls against the signatures and
//! the interpreter dispatches on [`Builtin`]; the implementations live in `exec.rs`.

use crate::ir::types::Kind;
use Kind::{Float as F, Int as I, Shape as S, Tensor as T};

/// Signature and documentation of one builtin.
#[derive(Debug)]
pub struct BuiltinSig {
    /// Name without the `vm.` prefix.
    pub name: &'static str,
    pub params: &'static [Kind],
    /// Accepts any number of extra arguments of any kind after `params`.
    pub variadic: bool,
    pub results: &'static [Kind],
    pub doc: &'static str,
}

macro_rules! define_builtins {
    ($( $Name:ident $text:literal ($($p:ident),*) $(+ $var:ident)? -> ($($r:ident),*) $doc:literal; )*) => {
        /// A builtin, in table order (its discriminant is its [`crate::ir::bytecode::BuiltinId`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum Builtin { $($Name,)* }

        /// Every builtin's signature, indexed by [`crate::ir::bytecode::BuiltinId`].
        pub static BUILTINS: &[BuiltinSig] = &[
            $( BuiltinSig {
                name: $text,
                params: &[$($p),*],
                variadic: define_builtins!(@var $($var)?),
                results: &[$($r),*],
                doc: $doc,
            }, )*
        ];

        impl Builtin {
            pub const ALL: &'static [Builtin] = &[$(Builtin::$Name),*];
        }
    };
    (@var) => { false };
    (@var $v:ident) => { true };
}

define_builtins! {
    Nop "nop" () -> () "does nothing (measures call overhead)";
    IAdd "iadd" (I, I) -> (I) "integer a + b (wrapping is an error)";
    ISub "isub" (I, I) -> (I) "integer a - b";
    IMul "imul" (I, I) -> (I) "integer a * b";
    IDiv "idiv" (I, I) -> (I) "integer a / b, rounding toward zero; b = 0 is an error";
    IRem "irem" (I, I) -> (I) "integer remainder of a / b; b = 0 is an error";
    IMin "imin" (I, I) -> (I) "smaller of a and b";
    IMax "imax" (I, I) -> (I) "larger of a and b";
    IEq "ieq" (I, I) -> (I) "1 if a == b else 0";
    INe "ine" (I, I) -> (I) "1 if a != b else 0";
    ILt "ilt" (I, I) -> (I) "1 if a < b else 0";
    ILe "ile" (I, I) -> (I) "1 if a <= b else 0";
    IGt "igt" (I, I) -> (I) "1 if a > b else 0";
    IGe "ige" (I, I) -> (I) "1 if a >= b else 0";
    FAdd "fadd" (F, F) -> (F) "float a + b";
    FSub "fsub" (F, F) -> (F) "float a - b";
    FMul "fmul" (F, F) -> (F) "float a * b";
    FDiv "fdiv" (F, F) -> (F) "float a / b";
    IToF "itof" (I) -> (F) "integer to float";
    FToI "ftoi" (F) -> (I) "float to integer, truncating; NaN or out of range is an error";
    ShapeOf "shape_of" (T) -> (S) "the shape of a tensor";
    Dim "dim" (S, I) -> (I) "dimension i of a shape (negative i counts from the end)";
    Rank "rank" (S) -> (I) "number of dimensions of a shape";
    Numel "numel" (T) -> (I) "number of elements of a tensor";
    NBytes "nbytes" (T) -> (I) "bytes of a tensor's elements (without image padding)";
    Fill "fill" (T, F) -> () "sets every element of the tensor to v (converted to its dtype)";
    Iota "iota" (T, F, F) -> () "sets element i (row-major) to start + i * step";
    Copy "copy" (T, T) -> () "copies src into dst; same dtype and element count";
    Add "add" (T, T, T) -> () "out = a + b elementwise; b may also have one element";
    Sub "sub" (T, T, T) -> () "out = a - b elementwise; b may also have one element";
    Mul "mul" (T, T, T) -> () "out = a * b elementwise; b may also have one element";
    Relu "relu" (T, T) -> () "out = max(x, 0) elementwise";
    MatMul "matmul" (T, T, T) -> () "out[m, n] = sum_k a[m, k] * b[k, n] (rank-2 tensors)";
    Sum "sum" (T) -> (F) "sum of all elements, as a float";
    Print "print" () + any -> () "prints its arguments on one line";
    ToBlocked "to_blocked" (T, T) -> () "copies src [N, C, spatial...] into dst in the blocked layout [N, ceil(C/4), spatial..., 4] (padding channels zero)";
    FromBlocked "from_blocked" (T, T) -> () "copies blocked src [N, ceil(C/4), spatial..., 4] back into dst [N, C, spatial...]";
    Item "item" (T) -> (I) "the single element of a bool or integer tensor, as an int (an error for any other dtype or element count)";
}

impl Builtin {
    pub fn sig(self) -> &'static BuiltinSig {
        &BUILTINS[self as usize]
    }

    pub fn from_id(id: u32) -> Option<Builtin> {
        Builtin::ALL.get(id as usize).copied()
    }

    /// Looks up `name` (with or without the `vm.` prefix).
    pub fn from_name(name: &str) -> Option<Builtin> {
        let name = name.strip_prefix("vm.").unwrap_or(name);
        Builtin::ALL.iter().copied().find(|b| b.sig().name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_enum_agree() {
        assert_eq!(Builtin::ALL.len(), BUILTINS.len());
        for (i, b) in Builtin::ALL.iter().enumerate() {
            assert_eq!(*b as usize, i);
            assert_eq!(Builtin::from_name(&format!("vm.{}", b.sig().name)), Some(*b));
        }
    }
}
