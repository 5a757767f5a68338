//! The assembler's state for one module ([`Asm`]: names, literals, attribute sets, types)
//! and the names every part of the assembler uses: the other files of `assemble/` add
//! `impl Asm` blocks by concern, and `mod.rs` drives them.

use super::source_map::Lines;
pub(super) use crate::ast::*;
pub(super) use crate::diag::Diagnostic;
pub(super) use rustc_hash::FxHashMap as FastMap;
pub(super) use rxvm_vm::builtins::{Builtin, BUILTINS};
pub(super) use rxvm_vm::bytecode::{Arg, BuiltinId, ConstId, FuncId, Instr, Label, OpId, Reg};
pub(super) use rxvm_vm::module::{
    ConstData, Constant, FuncDebug, Function, Literal, NameList, Placement, SourceLoc, UserKernel,
};
pub(super) use rxvm_vm::ops::{AttrTable, Attrs, OPS};
pub(super) use rxvm_vm::types::{DType, Dim, Kind, Scope, Type};
pub(super) use smallvec::SmallVec;
pub(super) use std::path::Path;

pub(super) fn dtype_list() -> String {
    DType::ALL.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}

pub(super) fn scope_list() -> String {
    Scope::ALL.iter().map(|s| format!("\"{}\"", s.name())).collect::<Vec<_>>().join(", ")
}

/// Module-wide state while assembling.
pub(super) struct Asm<'s> {
    pub(super) lines: Lines<'s>,
    pub(super) base_dir: Option<&'s Path>,
    pub(super) errs: Vec<Diagnostic>,
    pub(super) literals: Vec<Literal>,
    pub(super) lit_index: FastMap<(bool, u64), u32>,
    pub(super) consts: FastMap<&'s str, (ConstId, Span)>,
    pub(super) funcs: FastMap<&'s str, (FuncId, Span)>,
    /// Kernels by declared name (without `cl.`).
    pub(super) kernels: FastMap<&'s str, (u32, Span)>,
    /// Each function's parameter types, until it is assembled (which takes them).
    pub(super) func_params: Vec<Vec<Type>>,
    /// Which parameters of each function are floats (integer literals passed there become
    /// float literals).
    pub(super) float_params: Vec<SmallVec<[bool; 8]>>,
    /// Register names of the function being assembled: a buffer kept from function to
    /// function, so that each function's list is allocated once, at its size.
    pub(super) reg_names: NameList,
    /// The register table of `FuncAsm`, kept from function to function.
    pub(super) reg_table: FastMap<u64, u32>,
    /// Operator attribute sets, in text order of first use.
    pub(super) attrs: Vec<Attrs>,
    /// Numbers `attrs`: equal sets are stored once.
    pub(super) attr_table: AttrTable,
    /// Attribute sets by the text of their block (`{` to `}`), which finds most repeats
    /// without decoding them. Only sets that assembled without errors.
    pub(super) attrs_by_text: FastMap<&'s str, u32>,
    /// Whether to record the [`SourceMap`]'s per-instruction spans.
    pub(super) want_map: bool,
    pub(super) names: CalleeNames,
    /// Assembling item by item ([`assemble_stream`]): a call may name a function defined
    /// further on, which is resolved at the end (see `fixups`).
    pub(super) stream: bool,
    /// Calls of functions not yet defined: function index, pc, callee name.
    pub(super) fixups: Vec<(usize, usize, &'s str)>,
    /// Set when the streaming assembler cannot finish (the reference path takes over).
    pub(super) give_up: bool,
}

/// Builtins and operators by name: the same answers as `Builtin::from_name` and
/// `OpId::from_name`, by hash instead of a scan of the tables for every call.
pub(super) struct CalleeNames {
    pub(super) builtins: FastMap<&'static str, Builtin>,
    pub(super) ops: FastMap<&'static str, OpId>,
}

impl CalleeNames {
    pub(super) fn new() -> CalleeNames {
        let mut builtins = FastMap::default();
        for b in Builtin::ALL {
            builtins.entry(b.sig().name).or_insert(*b);
        }
        let mut ops = FastMap::default();
        for (i, o) in OPS.iter().enumerate() {
            ops.entry(o.name).or_insert(OpId(i as u32));
        }
        CalleeNames { builtins, ops }
    }

    /// As [`Builtin::from_name`].
    pub(super) fn builtin(&self, name: &str) -> Option<Builtin> {
        self.builtins.get(name.strip_prefix("vm.").unwrap_or(name)).copied()
    }

    /// As [`OpId::from_name`].
    pub(super) fn op(&self, name: &str) -> Option<OpId> {
        self.ops.get(name.strip_prefix("onnx.").unwrap_or(name)).copied()
    }
}
