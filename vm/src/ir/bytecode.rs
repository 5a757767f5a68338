//! The instruction set: one table from which the instruction enum, the fixed 16-byte encoding,
//! the decoder and the mnemonics derive.
//!
//! An encoded instruction word is `[op u8][x u8][y u8][z u8][a u32][b u32][c u32]`, little
//! endian. Each opcode names which of those slots its operands occupy; unused slots must be
//! zero (the decoder refuses anything else, so every valid word has exactly one meaning).

use crate::ir::types::{DType, Scope};
use cranelift_entity::entity_impl;
pub use cranelift_entity::{EntityRef, PrimaryMap};

/// A register index within a function frame. Parameters occupy `0..nparams`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg(pub u32);

/// Index of a function in the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FuncId(pub u32);

/// Index of a named constant in the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConstId(pub u32);

/// Index of a builtin in [`crate::ir::builtins::BUILTINS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BuiltinId(pub u32);

/// An instruction index within a function, the target of a branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label(pub u32);

/// An operator: its index in the operator table (`crate::ir::operators::OPS`), as encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpId(pub u32);

// Typed ids: `id.index()` indexes the `PrimaryMap` (or frame, or table) the id names.
entity_impl!(Reg);
entity_impl!(FuncId);
entity_impl!(ConstId);
entity_impl!(BuiltinId);
entity_impl!(Label);
entity_impl!(OpId);

/// An operand that is a register, a small integer immediate, a literal-pool entry or a
/// named constant, packed in one `u32`: the top two bits are the tag.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arg(pub u32);

/// The decoded form of an [`Arg`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgKind {
    Reg(Reg),
    /// A signed integer that fits in 30 bits.
    Imm(i32),
    /// Index into the module's literal pool (large integers and all floats).
    Lit(u32),
    Const(ConstId),
    /// An omitted optional operator input (`none` in assembly text).
    None,
}

impl Arg {
    const TAG_SHIFT: u32 = 30;
    const PAYLOAD: u32 = (1 << 30) - 1;
    pub const IMM_MIN: i64 = -(1 << 29);
    pub const IMM_MAX: i64 = (1 << 29) - 1;
    /// Largest register, literal or constant index an `Arg` can hold.
    pub const MAX_INDEX: u32 = Self::PAYLOAD - 1;
    /// The omitted optional input.
    pub const NONE: Arg = Arg(u32::MAX);

    pub fn reg(r: Reg) -> Arg {
        debug_assert!(r.0 <= Self::PAYLOAD);
        Arg(r.0)
    }
    /// `None` when `v` does not fit the 30-bit immediate.
    pub fn imm(v: i64) -> Option<Arg> {
        (Self::IMM_MIN..=Self::IMM_MAX).contains(&v).then_some(Arg((1 << Self::TAG_SHIFT) | (v as u32 & Self::PAYLOAD)))
    }
    pub fn lit(i: u32) -> Arg {
        debug_assert!(i <= Self::PAYLOAD);
        Arg((2 << Self::TAG_SHIFT) | i)
    }
    pub fn konst(c: ConstId) -> Arg {
        debug_assert!(c.0 <= Self::PAYLOAD);
        Arg((3 << Self::TAG_SHIFT) | c.0)
    }

    /// The register, if this is one: a single compare, for the interpreter's fast paths
    /// (registers are tag 0; [`Arg::kind`] decodes every tag).
    #[inline(always)]
    pub fn as_reg(self) -> Option<Reg> {
        (self.0 >> Self::TAG_SHIFT == 0).then_some(Reg(self.0))
    }

    /// The immediate, if this is one.
    #[inline(always)]
    pub fn as_imm(self) -> Option<i32> {
        (self.0 >> Self::TAG_SHIFT == 1).then_some(((self.0 << 2) as i32) >> 2)
    }

    #[inline]
    pub fn kind(self) -> ArgKind {
        if self == Arg::NONE {
            return ArgKind::None;
        }
        let p = self.0 & Self::PAYLOAD;
        match self.0 >> Self::TAG_SHIFT {
            0 => ArgKind::Reg(Reg(p)),
            // Sign-extend the 30-bit payload.
            1 => ArgKind::Imm(((p << 2) as i32) >> 2),
            2 => ArgKind::Lit(p),
            _ => ArgKind::Const(ConstId(p)),
        }
    }
}

impl std::fmt::Debug for Arg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.kind())
    }
}

/// A range of a function's argument pool: `args[start .. start + len]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArgList {
    pub start: u32,
    pub len: u16,
}

impl ArgList {
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }
}

/// Size in bytes of one encoded instruction word.
pub const WORD_SIZE: usize = 16;

/// Why a word could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    UnknownOpcode(u8),
    BadDType(u8),
    BadScope(u8),
    /// A slot the opcode does not use holds a non-zero value.
    NonZeroUnusedSlot {
        opcode: &'static str,
        slot: &'static str,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::UnknownOpcode(op) => write!(f, "unknown opcode 0x{op:02x}"),
            DecodeError::BadDType(d) => write!(f, "invalid dtype code {d}"),
            DecodeError::BadScope(s) => write!(f, "invalid scope code {s}"),
            DecodeError::NonZeroUnusedSlot { opcode, slot } => {
                write!(f, "`{opcode}` leaves slot {slot} unused but it is not zero")
            }
        }
    }
}

/// The raw slots of an encoded word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Word {
    pub op: u8,
    pub x: u8,
    pub y: u8,
    pub z: u8,
    pub a: u32,
    pub b: u32,
    pub c: u32,
}

impl Word {
    pub fn to_bytes(self) -> [u8; WORD_SIZE] {
        let mut out = [0u8; WORD_SIZE];
        out[0] = self.op;
        out[1] = self.x;
        out[2] = self.y;
        out[3] = self.z;
        out[4..8].copy_from_slice(&self.a.to_le_bytes());
        out[8..12].copy_from_slice(&self.b.to_le_bytes());
        out[12..16].copy_from_slice(&self.c.to_le_bytes());
        out
    }

    pub fn from_bytes(b: &[u8; WORD_SIZE]) -> Word {
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Word { op: b[0], x: b[1], y: b[2], z: b[3], a: u(4), b: u(8), c: u(12) }
    }
}

/// How an operand type maps to and from the raw slot bits.
trait Field: Sized {
    fn to_raw(self) -> u64;
    fn from_raw(v: u64) -> Result<Self, DecodeError>;
}

macro_rules! newtype_field {
    ($($t:ident),*) => {$(
        impl Field for $t {
            fn to_raw(self) -> u64 { self.0 as u64 }
            fn from_raw(v: u64) -> Result<Self, DecodeError> { Ok($t(v as u32)) }
        }
    )*};
}
newtype_field!(Reg, FuncId, ConstId, BuiltinId, Label, Arg, OpId);

impl Field for u8 {
    fn to_raw(self) -> u64 {
        self as u64
    }
    fn from_raw(v: u64) -> Result<Self, DecodeError> {
        Ok(v as u8)
    }
}
impl Field for u16 {
    fn to_raw(self) -> u64 {
        self as u64
    }
    fn from_raw(v: u64) -> Result<Self, DecodeError> {
        Ok(v as u16)
    }
}
impl Field for u32 {
    fn to_raw(self) -> u64 {
        self as u64
    }
    fn from_raw(v: u64) -> Result<Self, DecodeError> {
        Ok(v as u32)
    }
}
impl Field for i64 {
    fn to_raw(self) -> u64 {
        self as u64
    }
    fn from_raw(v: u64) -> Result<Self, DecodeError> {
        Ok(v as i64)
    }
}
impl Field for f64 {
    fn to_raw(self) -> u64 {
        self.to_bits()
    }
    fn from_raw(v: u64) -> Result<Self, DecodeError> {
        Ok(f64::from_bits(v))
    }
}
impl Field for DType {
    fn to_raw(self) -> u64 {
        self as u64
    }
    fn from_raw(v: u64) -> Result<Self, DecodeError> {
        DType::from_u8(v as u8).ok_or(DecodeError::BadDType(v as u8))
    }
}
impl Field for Scope {
    fn to_raw(self) -> u64 {
        self as u64
    }
    fn from_raw(v: u64) -> Result<Self, DecodeError> {
        Scope::from_u8(v as u8).ok_or(DecodeError::BadScope(v as u8))
    }
}

/// Reads or writes one slot of a [`Word`]. `yz` is the 16-bit pair `y | z << 8`,
/// `bc` the 64-bit pair `b | c << 32`.
macro_rules! slot {
    (get $w:ident, a) => {
        $w.a as u64
    };
    (get $w:ident, b) => {
        $w.b as u64
    };
    (get $w:ident, c) => {
        $w.c as u64
    };
    (get $w:ident, x) => {
        $w.x as u64
    };
    (get $w:ident, y) => {
        $w.y as u64
    };
    (get $w:ident, z) => {
        $w.z as u64
    };
    (get $w:ident, yz) => {
        ($w.y as u64) | (($w.z as u64) << 8)
    };
    (get $w:ident, bc) => {
        ($w.b as u64) | (($w.c as u64) << 32)
    };
    (set $w:ident, a, $v:expr) => {
        $w.a = $v as u32
    };
    (set $w:ident, b, $v:expr) => {
        $w.b = $v as u32
    };
    (set $w:ident, c, $v:expr) => {
        $w.c = $v as u32
    };
    (set $w:ident, x, $v:expr) => {
        $w.x = $v as u8
    };
    (set $w:ident, y, $v:expr) => {
        $w.y = $v as u8
    };
    (set $w:ident, z, $v:expr) => {
        $w.z = $v as u8
    };
    (set $w:ident, yz, $v:expr) => {{
        let v = $v;
        $w.y = v as u8;
        $w.z = (v >> 8) as u8
    }};
    (set $w:ident, bc, $v:expr) => {{
        let v = $v;
        $w.b = v as u32;
        $w.c = (v >> 32) as u32
    }};
    (mask a) => {
        1u8 << 0
    };
    (mask b) => {
        1u8 << 1
    };
    (mask c) => {
        1u8 << 2
    };
    (mask x) => {
        1u8 << 3
    };
    (mask y) => {
        1u8 << 4
    };
    (mask z) => {
        1u8 << 5
    };
    (mask yz) => {
        (1u8 << 4) | (1u8 << 5)
    };
    (mask bc) => {
        (1u8 << 1) | (1u8 << 2)
    };
}

/// Generates [`Instr`], [`Opcode`] and their encoding from the opcode table
/// ([`for_each_opcode!`]).
macro_rules! define_instr {
    ($(
        $(#[doc = $doc:literal])*
        $code:literal $Name:ident $mnemonic:literal { $($field:ident : $fty:ty = $slot:ident),* $(,)? }
        => [ $($access:tt)* ]
    )*) => {
        /// A decoded instruction. Generated from the opcode table ([`for_each_opcode!`]).
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum Instr {
            $( $(#[doc = $doc])* $Name { $($field: $fty),* }, )*
        }

        /// The opcode of each instruction, as encoded.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Opcode { $( $Name = $code, )* }

        impl Opcode {
            pub const ALL: &'static [Opcode] = &[$(Opcode::$Name),*];

            pub fn from_u8(v: u8) -> Option<Opcode> {
                match v { $( $code => Some(Opcode::$Name), )* _ => None }
            }

            /// The mnemonic used in assembly text.
            pub fn mnemonic(self) -> &'static str {
                match self { $( Opcode::$Name => $mnemonic, )* }
            }
        }

        impl Instr {
            pub fn opcode(&self) -> Opcode {
                match self { $( Instr::$Name { .. } => Opcode::$Name, )* }
            }

            pub fn encode(&self) -> Word {
                #[allow(unused_mut)]
                let mut w = Word { op: self.opcode() as u8, ..Word::default() };
                match *self {
                    $( Instr::$Name { $($field),* } => {
                        $( slot!(set w, $slot, Field::to_raw($field)); )*
                    } )*
                }
                w
            }

            pub fn decode(w: Word) -> Result<Instr, DecodeError> {
                match w.op {
                    $( $code => {
                        let used: u8 = 0 $( | slot!(mask $slot) )*;
                        check_unused(&w, used, $mnemonic)?;
                        Ok(Instr::$Name { $( $field: <$fty as Field>::from_raw(slot!(get w, $slot))?, )* })
                    } )*
                    op => Err(DecodeError::UnknownOpcode(op)),
                }
            }
        }
    };
}

fn check_unused(w: &Word, used: u8, opcode: &'static str) -> Result<(), DecodeError> {
    let slots: [(u8, u64, &'static str); 6] = [
        (1 << 0, w.a as u64, "a"),
        (1 << 1, w.b as u64, "b"),
        (1 << 2, w.c as u64, "c"),
        (1 << 3, w.x as u64, "x"),
        (1 << 4, w.y as u64, "y"),
        (1 << 5, w.z as u64, "z"),
    ];
    for (mask, value, slot) in slots {
        if used & mask == 0 && value != 0 {
            return Err(DecodeError::NonZeroUnusedSlot { opcode, slot });
        }
    }
    Ok(())
}

/// The opcode table: every instruction once, with its code, name, mnemonic, operand
/// slots and, after `=>`, how it touches registers in text operand order (`def`, `read`,
/// `kill` a register field; `arg` an operand that may be a register; `defs`/`args` a run
/// `[from; len]` of the function's argument list at field `list`): the verifier's
/// register accesses are generated from it. `for_each_opcode!(m)` calls macro `m` with the whole table; [`Instr`] and
/// [`Opcode`] are generated from it here, the interpreter's dispatch enum in
/// `interp/specialize.rs` (as wasmi's `for_each_op!` does).
macro_rules! for_each_opcode {
    ($m:ident) => {
        $m! {
        /// Does nothing.
        0x00 Nop "nop" {} => []
        /// `%dst = mov %src`: copies a register's value (sharing storage and views).
        0x01 Mov "mov" { dst: Reg = a, src: Reg = b } => [def dst, read src]
        /// `%dst = int IMM`: a 64-bit integer.
        0x02 LoadInt "int" { dst: Reg = a, value: i64 = bc } => [def dst]
        /// `%dst = float IMM`: a 64-bit float.
        0x03 LoadFloat "float" { dst: Reg = a, value: f64 = bc } => [def dst]
        /// `%dst = const @c`: a named constant tensor.
        0x04 LoadConst "const" { dst: Reg = a, konst: ConstId = b } => [def dst]
        /// `%dst = shape [d0, d1, ...]`: each dim an int register or literal.
        0x05 MakeShape "shape" { dst: Reg = a, dims: u32 = c, ndim: u8 = z } => [def dst, args dims[0; ndim as usize]]
        /// `%dst = alloc_storage SIZE, align A, device D, scope "S"`. `align` is an int `Arg`;
        /// the immediate 0 means the device's base alignment.
        0x06 AllocStorage "alloc_storage" { dst: Reg = a, size: Arg = b, align: Arg = c, device: u8 = x, scope: Scope = y } => [def dst, arg size, arg align]
        /// `%dst = alloc_tensor %storage, OFFSET, DTYPE[SHAPE], scope "S"`. The argument list
        /// at `args` holds the offset followed by `ndim` dims.
        0x07 AllocTensor "alloc_tensor" { dst: Reg = a, storage: Reg = b, args: u32 = c, dtype: DType = x, scope: Scope = y, ndim: u8 = z } => [def dst, read storage, args args[0; ndim as usize + 1]]
        /// `kill %reg`: drops the register's reference.
        0x08 Kill "kill" { reg: Reg = a } => [kill reg]
        /// `%d0, ... = call @f(args)`: the list at `list` holds `ndst` destination registers
        /// followed by `nargs` arguments.
        0x09 Call "call" { func: FuncId = a, list: u32 = b, ndst: u8 = x, nargs: u16 = yz } => [defs list[0; ndst as usize], args list[ndst as usize; nargs as usize]]
        /// `%d0, ... = call @vm.name(args)`: a builtin, list layout as `call`.
        0x0a CallBuiltin "call" { builtin: BuiltinId = a, list: u32 = b, ndst: u8 = x, nargs: u16 = yz } => [defs list[0; ndst as usize], args list[ndst as usize; nargs as usize]]
        /// `ret a, b, ...`: returns the list's values.
        0x0b Ret "ret" { list: u32 = b, nvals: u16 = yz } => [args list[0; nvals as usize]]
        /// `br L`.
        0x0c Br "br" { target: Label = a } => []
        /// `br_if %cond, L_then, L_else`: branches on a non-zero int.
        0x0d BrIf "br_if" { cond: Reg = a, then_: Label = b, else_: Label = c } => [read cond]
        /// `call @onnx.Name(inputs) -> (outputs) { attributes }`: an operator from
        /// [`crate::ir::operators::OPS`]. The list holds `nin` inputs (`none` for omitted optional ones)
        /// then `nout` output tensors; `attrs` is 0 for none, else 1 + an index into
        /// [`crate::ir::module::Module::attrs`].
        0x0e CallOp "call" { op: OpId = a, list: u32 = b, attrs: u32 = c, nout: u8 = x, nin: u16 = yz } => [args list[0; nin as usize + nout as usize]]
        /// `call @cl.name(args) global [d0, ...]`: a user-declared OpenCL kernel
        /// ([`crate::ir::module::Module::kernels`]). The list holds `nargs` arguments (tensors,
        /// ints, floats) then `ndims` (1 to 3) global work sizes (ints).
        0x0f CallKernel "call" { kernel: u32 = a, list: u32 = b, ndims: u8 = x, nargs: u16 = yz } => [args list[0; nargs as usize + ndims as usize]]
        /// `%y0, ... = call @onnx.Name(inputs) { attributes }`: an operator whose outputs the VM
        /// allocates, for shapes known only at run time (a shape computed from data, or a
        /// tensor sized by one). Inference runs on the actual inputs (reading the values that
        /// decide shapes), each output gets a fresh storage from the device's pool, and the
        /// destinations hold the new tensors (a `kill` returns the storage). The list holds
        /// `ndst` destinations then `nin` inputs; `attrs` as `call @onnx` has it.
        0x10 CallOpAlloc "call" { op: OpId = a, list: u32 = b, attrs: u32 = c, ndst: u8 = x, nin: u16 = yz } => [defs list[0; ndst as usize], args list[ndst as usize; nin as usize]]
        }
    };
}
pub(crate) use for_each_opcode;

for_each_opcode!(define_instr);

impl Instr {
    /// True when control never falls through to the next instruction.
    pub fn is_terminator(&self) -> bool {
        matches!(self, Instr::Ret { .. } | Instr::Br { .. } | Instr::BrIf { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instruction_word_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Instr>(), 16);
        assert_eq!(std::mem::size_of::<Arg>(), 4);
        assert_eq!(WORD_SIZE, 16);
    }

    #[test]
    fn every_opcode_round_trips() {
        let samples = [
            Instr::Nop {},
            Instr::Mov { dst: Reg(1), src: Reg(2) },
            Instr::LoadInt { dst: Reg(3), value: -5_000_000_000 },
            Instr::LoadFloat { dst: Reg(3), value: -1.25 },
            Instr::LoadConst { dst: Reg(0), konst: ConstId(7) },
            Instr::MakeShape { dst: Reg(1), dims: 4, ndim: 3 },
            Instr::AllocStorage {
                dst: Reg(9),
                size: Arg::imm(4096).unwrap(),
                align: Arg::imm(64).unwrap(),
                device: 1,
                scope: Scope::Global,
            },
            Instr::AllocTensor {
                dst: Reg(2),
                storage: Reg(9),
                args: 10,
                dtype: DType::F16,
                scope: Scope::TextureNhwc,
                ndim: 4,
            },
            Instr::Kill { reg: Reg(4) },
            Instr::Call { func: FuncId(2), list: 5, ndst: 1, nargs: 300 },
            Instr::CallBuiltin { builtin: BuiltinId(3), list: 0, ndst: 0, nargs: 2 },
            Instr::Ret { list: 3, nvals: 2 },
            Instr::Br { target: Label(17) },
            Instr::BrIf { cond: Reg(1), then_: Label(2), else_: Label(9) },
            Instr::CallOp { op: OpId(1), list: 4, attrs: 2, nout: 1, nin: 3 },
            Instr::CallKernel { kernel: 2, list: 7, ndims: 2, nargs: 4 },
            Instr::CallOpAlloc { op: OpId(3), list: 9, attrs: 1, ndst: 2, nin: 2 },
        ];
        assert_eq!(samples.len(), Opcode::ALL.len());
        for ins in samples {
            let w = ins.encode();
            let bytes = w.to_bytes();
            assert_eq!(Instr::decode(Word::from_bytes(&bytes)), Ok(ins));
        }
    }

    #[test]
    fn decoder_refuses_garbage() {
        let w = Word { op: 0x7f, ..Word::default() };
        assert_eq!(Instr::decode(w), Err(DecodeError::UnknownOpcode(0x7f)));
        let w = Word { op: Opcode::Kill as u8, c: 1, ..Word::default() };
        assert!(matches!(Instr::decode(w), Err(DecodeError::NonZeroUnusedSlot { slot: "c", .. })));
        let w = Word { op: Opcode::AllocTensor as u8, x: 200, ..Word::default() };
        assert_eq!(Instr::decode(w), Err(DecodeError::BadDType(200)));
    }

    #[test]
    fn arg_tags_round_trip() {
        for v in [0i64, 1, -1, Arg::IMM_MIN, Arg::IMM_MAX] {
            assert_eq!(Arg::imm(v).unwrap().kind(), ArgKind::Imm(v as i32));
        }
        assert!(Arg::imm(Arg::IMM_MAX + 1).is_none());
        assert_eq!(Arg::reg(Reg(5)).kind(), ArgKind::Reg(Reg(5)));
        assert_eq!(Arg::lit(9).kind(), ArgKind::Lit(9));
        assert_eq!(Arg::konst(ConstId(3)).kind(), ArgKind::Const(ConstId(3)));
    }
}
