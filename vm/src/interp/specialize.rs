//! The interpreter's own form of the code: each bytecode instruction, or a specialised form
//! of it chosen once when the VM is made.
//!
//! A two-operand integer builtin (`%d = call @vm.iadd(%a, 1)`) goes through the operand
//! pool in the bytecode: the dispatcher reads the list, decodes each operand's kind and
//! then picks the builtin, three dependent loads and three indirect jumps before the add.
//! Its specialised form carries its registers (and an immediate) in the instruction word,
//! so a counter loop runs with one indirect jump per instruction. The translation is one
//! to one (`ops[f][pc]` is `code[f][pc]`), so program counters, error locations and the
//! debugger are unchanged; when a specialised instruction cannot finish on its fast path
//! (an operand that is not an int, an overflow) the interpreter runs the original
//! instruction, which reports the error exactly as before.

//!
//! An `alloc_tensor` of a buffer view whose offset and dims are constants (every one a
//! compiler emits for a static shape) has them checked and its size computed here, once:
//! at run time it checks only that the view fits its storage.

use crate::ir::builtins::Builtin;
use crate::ir::bytecode::{for_each_opcode, Arg, BuiltinId, ConstId, FuncId, Instr, Label, OpId, Reg};
use crate::ir::module::Module;
use crate::ir::types::{DType, Scope};
use crate::runtime::memory::SliceGeom;
use smallvec::SmallVec;

/// Generates the interpreter's [`Op`] from the opcode table ([`for_each_opcode!`]):
/// every instruction with its own tag, then the specialised forms below.
macro_rules! define_op {
    ($(
        $(#[doc = $doc:literal])*
        $code:literal $Name:ident $mnemonic:literal { $($field:ident : $fty:ty = $slot:ident),* $(,)? }
        => [ $($access:tt)* ]
    )*) => {
        /// An instruction as the interpreter runs it: every instruction of the table with
        /// its own tag, then the forms [`specialize`] turns some into when a module is
        /// loaded. One word, one `match` to dispatch.
        // `CallOp` ends with the enum's name: it is the instruction's name in the table.
        #[allow(clippy::enum_variant_names)]
        #[derive(Clone, Copy, Debug)]
        pub(crate) enum Op {
            $( $(#[doc = $doc])* $Name { $($field: $fty),* }, )*
            // The interpreter's specialised forms (never encoded; see `crate::interp::specialize`): a
            // storage of constant size, a buffer or image view of constant geometry, an operator call by
            // site, and each two-operand int builtin with register operands (`RR`) or a register
            // and an immediate (`RI`), one variant each so that dispatch picks the operation too.
            /// `%dst = alloc_storage SIZE, align A, device D, scope "S"` whose size and alignment
            /// are constants, checked once ([`crate::runtime::memory::ConstAlloc`]).
            AllocStorageConst(StorageArgs),
            /// `%dst = alloc_tensor %storage, offset, dtype[dims]` of scope `global` whose offset
            /// and dims are constants, checked and measured once ([`BufferGeom`]).
            AllocBufferConst(BufferArgs),
            /// `%dst = alloc_tensor %storage, offset, dtype[dims], scope "global.texture*"` whose
            /// offset and dims are constants: its layout checked once per device
            /// ([`ImageGeom`]).
            AllocImageConst(BufferArgs),
            /// `call @onnx.Name(...)`: operator call site number `.0` (in code order); its operands
            /// are in the bytecode instruction.
            CallOpSite(u32),
            /// `%dst = call @vm.iadd(%a, %b)`.
            IAddRR(IntArgs<Reg>),
            /// `%dst = call @vm.iadd(%a, imm)`.
            IAddRI(IntArgs<i32>),
            /// `%dst = call @vm.isub(%a, %b)`.
            ISubRR(IntArgs<Reg>),
            /// `%dst = call @vm.isub(%a, imm)`.
            ISubRI(IntArgs<i32>),
            /// `%dst = call @vm.imul(%a, %b)`.
            IMulRR(IntArgs<Reg>),
            /// `%dst = call @vm.imul(%a, imm)`.
            IMulRI(IntArgs<i32>),
            /// `%dst = call @vm.imin(%a, %b)`.
            IMinRR(IntArgs<Reg>),
            /// `%dst = call @vm.imin(%a, imm)`.
            IMinRI(IntArgs<i32>),
            /// `%dst = call @vm.imax(%a, %b)`.
            IMaxRR(IntArgs<Reg>),
            /// `%dst = call @vm.imax(%a, imm)`.
            IMaxRI(IntArgs<i32>),
            /// `%dst = call @vm.ieq(%a, %b)`.
            IEqRR(IntArgs<Reg>),
            /// `%dst = call @vm.ieq(%a, imm)`.
            IEqRI(IntArgs<i32>),
            /// `%dst = call @vm.ine(%a, %b)`.
            INeRR(IntArgs<Reg>),
            /// `%dst = call @vm.ine(%a, imm)`.
            INeRI(IntArgs<i32>),
            /// `%dst = call @vm.ilt(%a, %b)`.
            ILtRR(IntArgs<Reg>),
            /// `%dst = call @vm.ilt(%a, imm)`.
            ILtRI(IntArgs<i32>),
            /// `%dst = call @vm.ile(%a, %b)`.
            ILeRR(IntArgs<Reg>),
            /// `%dst = call @vm.ile(%a, imm)`.
            ILeRI(IntArgs<i32>),
            /// `%dst = call @vm.igt(%a, %b)`.
            IGtRR(IntArgs<Reg>),
            /// `%dst = call @vm.igt(%a, imm)`.
            IGtRI(IntArgs<i32>),
            /// `%dst = call @vm.ige(%a, %b)`.
            IGeRR(IntArgs<Reg>),
            /// `%dst = call @vm.ige(%a, imm)`.
            IGeRI(IntArgs<i32>),
        }

        impl From<Instr> for Op {
            #[inline]
            fn from(i: Instr) -> Op {
                match i { $( Instr::$Name { $($field),* } => Op::$Name { $($field),* }, )* }
            }
        }
    };
}

for_each_opcode!(define_op);

/// The operands of a specialised constant buffer view: its destination and storage
/// registers, and its geometry's index in [`Specialized::geoms`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct BufferArgs {
    pub dst: Reg,
    pub storage: Reg,
    pub geom: u32,
}

/// The operands of a specialised constant `alloc_storage`: its destination register and
/// the index of its request in [`Specialized::storages`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct StorageArgs {
    pub dst: Reg,
    pub alloc: u32,
}

/// A constant `alloc_storage`'s request as the bytecode states it (the alignment 0 for
/// the device's base alignment): checked against its device when the `Vm` is made
/// ([`crate::runtime::memory::Runtime::const_alloc`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StorageRequest {
    pub device: u8,
    pub size: u64,
    pub align: u64,
    pub scope: Scope,
}

/// A buffer view's geometry, checked as `alloc_tensor` checks it: offset and dims
/// non-negative, the offset a multiple of the element size, the size representable.
/// Its `view.type_id` (see `memory::ViewClass`) is given when the `Vm` is made.
#[derive(Clone, Debug)]
pub(crate) struct BufferGeom {
    pub view: SliceGeom,
    /// `offset + bytes`: the view fits a storage of at least this many bytes.
    pub end: u64,
    /// Its number among the runtime's slice geometries ([`crate::Value::Slice`]), or
    /// [`NO_SLICE`], given when the `Vm` is made.
    pub slice: u32,
}

/// An image view's geometry as the bytecode states it (offset and dims constants, not
/// negative). Its layout depends on the device: the `Vm` checks it per device when it is
/// made.
#[derive(Clone, Debug)]
pub(crate) struct ImageGeom {
    pub offset: u64,
    pub dtype: DType,
    pub shape: SmallVec<[i64; 4]>,
    pub scope: Scope,
}

/// [`BufferGeom::slice`] of a geometry whose views are always objects.
pub(crate) const NO_SLICE: u32 = u32::MAX;

/// A module's code as the interpreter runs it.
pub(crate) struct Specialized {
    /// Per function, one op per instruction.
    pub ops: Vec<Box<[Op]>>,
    /// The requests of the [`Op::AllocStorageConst`]s.
    pub storages: Vec<StorageRequest>,
    /// The geometries of the [`Op::AllocBufferConst`]s.
    pub geoms: Vec<BufferGeom>,
    /// The geometries of the [`Op::AllocImageConst`]s.
    pub images: Vec<ImageGeom>,
    /// Per operator call site ([`Op::CallOpSite`], numbered in code order), how many of its
    /// operands are registers.
    pub op_sites: Vec<u32>,
}

/// The operands of a specialised integer builtin: `%dst = call @vm.<op>(%a, b)`, where `b`
/// is a register or an immediate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IntArgs<B: Copy> {
    pub dst: Reg,
    pub a: Reg,
    pub b: B,
}

/// What a two-operand int builtin computes (`iadd` ..= `ige`, not `idiv`/`irem`), or `None`
/// for an overflow or another builtin: the one definition the interpreter's fast paths
/// share (always inlined, so with a constant `b` it is the operation alone). The general
/// path (`exec::call_builtin`) reports the errors.
#[inline(always)]
pub(crate) fn int_builtin(b: Builtin, x: i64, y: i64) -> Option<i64> {
    match b {
        Builtin::IAdd => x.checked_add(y),
        Builtin::ISub => x.checked_sub(y),
        Builtin::IMul => x.checked_mul(y),
        Builtin::IMin => Some(x.min(y)),
        Builtin::IMax => Some(x.max(y)),
        Builtin::IEq => Some((x == y) as i64),
        Builtin::INe => Some((x != y) as i64),
        Builtin::ILt => Some((x < y) as i64),
        Builtin::ILe => Some((x <= y) as i64),
        Builtin::IGt => Some((x > y) as i64),
        Builtin::IGe => Some((x >= y) as i64),
        _ => None,
    }
}

/// The code of every function of a verified module, specialised.
pub(crate) fn specialize(m: &Module) -> Specialized {
    let mut geoms = Vec::new();
    let mut images = Vec::new();
    let mut storages = Vec::new();
    let mut op_sites: Vec<u32> = Vec::new();
    let ops = m
        .funcs
        .values()
        .map(|f| {
            f.code
                .iter()
                .map(|&ins| match ins {
                    Instr::CallBuiltin { builtin, list, ndst: 1, nargs: 2 } => {
                        int_op(builtin.0, f.args.get(list as usize..list as usize + 3)).unwrap_or(Op::from(ins))
                    }
                    Instr::AllocStorage { dst, size, align, device, scope } if storages.len() < u32::MAX as usize => {
                        let size = m.const_int(size).and_then(|v| u64::try_from(v).ok());
                        let align = m.const_int(align).and_then(|v| u64::try_from(v).ok());
                        match (size, align) {
                            (Some(size), Some(align)) => {
                                storages.push(StorageRequest { device, size, align, scope });
                                Op::AllocStorageConst(StorageArgs { dst, alloc: storages.len() as u32 - 1 })
                            }
                            _ => Op::from(ins),
                        }
                    }
                    Instr::AllocTensor { dst, storage, args, dtype, scope: Scope::Global, ndim } => {
                        let list = f.args.get(args as usize..args as usize + ndim as usize + 1);
                        match list.and_then(|l| buffer_geom(m, dtype, l)) {
                            Some(g) if geoms.len() < u32::MAX as usize => {
                                geoms.push(g);
                                Op::AllocBufferConst(BufferArgs { dst, storage, geom: geoms.len() as u32 - 1 })
                            }
                            _ => Op::from(ins),
                        }
                    }
                    Instr::AllocTensor { dst, storage, args, dtype, scope, ndim } if scope.is_texture() => {
                        let list = f.args.get(args as usize..args as usize + ndim as usize + 1);
                        match list.and_then(|l| image_geom(m, dtype, scope, l)) {
                            Some(g) if images.len() < u32::MAX as usize => {
                                images.push(g);
                                Op::AllocImageConst(BufferArgs { dst, storage, geom: images.len() as u32 - 1 })
                            }
                            _ => Op::from(ins),
                        }
                    }
                    Instr::CallOp { list, nout, nin, .. } if op_sites.len() < u32::MAX as usize => {
                        let items = f.args.get(list as usize..).unwrap_or_default();
                        let items = items.get(..nin as usize + nout as usize).unwrap_or_default();
                        op_sites.push(items.iter().filter(|a| a.as_reg().is_some()).count() as u32);
                        Op::CallOpSite(op_sites.len() as u32 - 1)
                    }
                    _ => Op::from(ins),
                })
                .collect()
        })
        .collect();
    Specialized { ops, storages, geoms, images, op_sites }
}

/// The geometry of a buffer view from its `[offset, dims...]` operands, when all are
/// constants and pass `alloc_tensor`'s checks (otherwise the general instruction runs and
/// reports the error where it happens).
fn buffer_geom(m: &Module, dtype: DType, list: &[Arg]) -> Option<BufferGeom> {
    let (offset, shape) = const_offset_and_dims(m, list)?;
    if !offset.is_multiple_of(dtype.size() as u64) {
        return None;
    }
    let bytes = crate::ir::types::dense_bytes(dtype, &shape)?;
    let end = offset.checked_add(bytes)?;
    let view = SliceGeom { offset, dtype, shape, bytes, type_id: 0, scope: Scope::Global, image: None };
    Some(BufferGeom { view, end, slice: NO_SLICE })
}

/// The geometry of an image view from its `[offset, dims...]` operands, when all are
/// non-negative constants.
fn image_geom(m: &Module, dtype: DType, scope: Scope, list: &[Arg]) -> Option<ImageGeom> {
    let (offset, shape) = const_offset_and_dims(m, list)?;
    Some(ImageGeom { offset, dtype, shape, scope })
}

/// An `alloc_tensor`'s `[offset, dims...]` operands when all are non-negative constants.
fn const_offset_and_dims(m: &Module, list: &[Arg]) -> Option<(u64, SmallVec<[i64; 4]>)> {
    let (first, dims) = list.split_first()?;
    let offset = u64::try_from(m.const_int(*first)?).ok()?;
    let shape = dims.iter().map(|a| m.const_int(*a).filter(|&d| d >= 0)).collect::<Option<SmallVec<[i64; 4]>>>()?;
    Some((offset, shape))
}

/// The specialised form of a two-operand int builtin whose destination and first operand
/// are registers and whose second is a register or an immediate. `idiv` and `irem` keep
/// the general path: their errors need it anyway.
fn int_op(builtin: u32, list: Option<&[crate::ir::bytecode::Arg]>) -> Option<Op> {
    let b = *Builtin::ALL.get(builtin as usize)?;
    let &[d, a, rhs] = list? else { return None };
    let (dst, a) = (d.as_reg()?, a.as_reg()?);
    if let Some(r) = rhs.as_reg() {
        let x = IntArgs { dst, a, b: r };
        return Some(match b {
            Builtin::IAdd => Op::IAddRR(x),
            Builtin::ISub => Op::ISubRR(x),
            Builtin::IMul => Op::IMulRR(x),
            Builtin::IMin => Op::IMinRR(x),
            Builtin::IMax => Op::IMaxRR(x),
            Builtin::IEq => Op::IEqRR(x),
            Builtin::INe => Op::INeRR(x),
            Builtin::ILt => Op::ILtRR(x),
            Builtin::ILe => Op::ILeRR(x),
            Builtin::IGt => Op::IGtRR(x),
            Builtin::IGe => Op::IGeRR(x),
            _ => return None,
        });
    }
    let x = IntArgs { dst, a, b: rhs.as_imm()? };
    Some(match b {
        Builtin::IAdd => Op::IAddRI(x),
        Builtin::ISub => Op::ISubRI(x),
        Builtin::IMul => Op::IMulRI(x),
        Builtin::IMin => Op::IMinRI(x),
        Builtin::IMax => Op::IMaxRI(x),
        Builtin::IEq => Op::IEqRI(x),
        Builtin::INe => Op::INeRI(x),
        Builtin::ILt => Op::ILtRI(x),
        Builtin::ILe => Op::ILeRI(x),
        Builtin::IGt => Op::IGtRI(x),
        Builtin::IGe => Op::IGeRI(x),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_op_is_one_instruction_word() {
        assert_eq!(std::mem::size_of::<Op>(), 16);
    }

    #[test]
    fn int_builtins_with_register_and_immediate_operands_are_specialised() {
        let m = rxvm_test_module();
        let ops = specialize(&m).ops;
        let kinds: Vec<&str> = ops[0]
            .iter()
            .map(|o| match o {
                Op::IAddRI(_) => "add_ri",
                Op::ILtRR(_) => "lt_rr",
                Op::IAddRR(_) | Op::ISubRI(_) | Op::ISubRR(_) | Op::ILtRI(_) => "other specialised",
                _ => "instr",
            })
            .collect();
        // int, iadd(%a, 1), ilt(%a, %a), idiv(%a, 2), fadd(.., ..) (not ints), imm first, ret
        assert_eq!(kinds, ["instr", "add_ri", "lt_rr", "instr", "instr", "instr", "instr", "instr"]);
    }

    #[test]
    fn storage_requests_of_constant_size_are_specialised() {
        use crate::ir::builder::{ModuleBuilder, Operand};
        use crate::ir::types::Type;
        let mut mb = ModuleBuilder::new("s");
        let mut f = mb.function("main", vec![Type::Int], vec![]);
        let n = f.param(0);
        let a = f.alloc_storage(Operand::Int(4096), Some(Operand::Int(256)), 0, Scope::Global);
        let b = f.alloc_storage(n.into(), None, 0, Scope::Global);
        f.kill(a);
        f.kill(b);
        f.ret(&[]);
        mb.add_function(f);
        let sp = specialize(&mb.build().expect("a module"));
        assert!(matches!(sp.ops[0][0], Op::AllocStorageConst(StorageArgs { alloc: 0, .. })), "{:?}", sp.ops[0][0]);
        assert!(matches!(sp.ops[0][1], Op::AllocStorage { .. }), "a size in a register: {:?}", sp.ops[0][1]);
        let r = sp.storages[0];
        assert_eq!((sp.storages.len(), r.device, r.size, r.align, r.scope), (1, 0, 4096, 256, Scope::Global));
    }

    /// A module built through the builder: the specialiser sees the bytecode, not text.
    fn rxvm_test_module() -> Module {
        use crate::ir::bytecode::{Arg, BuiltinId};
        use crate::ir::module::Function;
        let call = |b: Builtin, list: u32| Instr::CallBuiltin { builtin: BuiltinId(b as u32), list, ndst: 1, nargs: 2 };
        let r = |i: u32| Arg::reg(Reg(i));
        let imm = |v: i64| Arg::imm(v).expect("a small immediate");
        let args = vec![
            r(0),
            r(0),
            imm(1), // iadd
            r(1),
            r(0),
            r(0), // ilt
            r(0),
            r(0),
            imm(2), // idiv
            r(2),
            r(2),
            r(2), // fadd
            r(0),
            imm(1),
            r(0), // isub(1, %a): immediate first
        ];
        let code = vec![
            Instr::LoadInt { dst: Reg(0), value: 5 },
            call(Builtin::IAdd, 0),
            call(Builtin::ILt, 3),
            call(Builtin::IDiv, 6),
            Instr::LoadFloat { dst: Reg(2), value: 1.0 },
            call(Builtin::FAdd, 9),
            call(Builtin::ISub, 12),
            Instr::Ret { list: 0, nvals: 0 },
        ];
        let f = Function {
            name: "main".into(),
            params: vec![],
            placements: vec![],
            results: vec![],
            num_regs: 3,
            code,
            args,
            debug: Default::default(),
        };
        let mut m = Module::default();
        m.funcs.push(f);
        m
    }
}
