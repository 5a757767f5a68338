//! The in-memory module: literals, constants, functions with their code and debug info.
//! `binary.rs` reads and writes it as `.rxb`.

use crate::ir::bytecode::{Arg, ArgKind, ConstId, EntityRef, FuncId, Instr, PrimaryMap, Reg};
use crate::ir::types::{DType, Dim, Type};
/// Constants' shared bytes ([`ConstData::Bytes`]).
pub use bytes::Bytes;

/// A scalar in the literal pool: integers too large for an immediate, and every float.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Literal {
    Int(i64),
    Float(f64),
}

impl Literal {
    /// Bitwise identity, so that literal interning treats `-0.0` and `0.0`, and NaNs, apart.
    pub fn same(&self, other: &Literal) -> bool {
        match (self, other) {
            (Literal::Int(a), Literal::Int(b)) => a == b,
            (Literal::Float(a), Literal::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

/// How a constant's elements are given.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstData {
    /// Little-endian element bytes, `numel * dtype.size()` of them. Shared, not owned: a
    /// module loaded from a mapped `.rxb` points into the mapping, and a compiled one into
    /// the graph's tensors, so the weights are in memory once.
    Bytes(Bytes),
    /// Every element is this value (converted to the dtype); stored compactly.
    Fill(f64),
}

/// A named constant tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Constant {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub data: ConstData,
}

impl Constant {
    pub fn numel(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(u64::try_from(d).ok()?))
    }
}

/// An OpenCL C kernel declared by the program: `kernel @name = opencl("entry", source)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserKernel {
    /// The name calls use (`@cl.name`).
    pub name: String,
    /// The `__kernel` function to run.
    pub entry: String,
    /// OpenCL C source (embedded, also when declared with `file(...)`).
    pub source: String,
}

/// A source position, 1-based; `line == 0` means unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceLoc {
    pub line: u32,
    pub col: u32,
}

/// A list of names stored in one buffer. A function names dozens of registers: one
/// allocation for all of them, not one each, is what keeps assembling, loading and
/// dropping a large module from being a stream of small allocations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameList {
    text: String,
    /// Where each name ends in `text`; name `i` starts where name `i - 1` ends.
    ends: Vec<usize>,
}

impl NameList {
    pub fn new() -> NameList {
        NameList::default()
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Name `i`, if there are more than `i` names.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text.get(start..end)
    }

    pub fn push(&mut self, name: &str) {
        self.text.push_str(name);
        self.ends.push(self.text.len());
    }

    /// Room for `names` more names of `bytes` bytes in all.
    pub fn reserve(&mut self, names: usize, bytes: usize) {
        self.ends.reserve(names);
        self.text.reserve(bytes);
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

impl<'a> FromIterator<&'a str> for NameList {
    fn from_iter<I: IntoIterator<Item = &'a str>>(names: I) -> NameList {
        let mut list = NameList::new();
        names.into_iter().for_each(|n| list.push(n));
        list
    }
}

/// Names and source positions of one function, for diagnostics and disassembly.
/// Optional: a stripped module has none and prints registers as `%r0`, `%r1`, ...
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FuncDebug {
    /// One name per register (empty when unknown).
    pub reg_names: NameList,
    /// Label names by instruction index, sorted by index.
    pub labels: Vec<(u32, String)>,
    /// One position per instruction (empty when unknown).
    pub locs: Vec<SourceLoc>,
}

/// Where a tensor parameter must live: a view of storage parameter `storage` at byte
/// `offset` (scope `global`). A compiled model whose input is planned in an arena that
/// the caller provides declares it so (`%x: f32[..] in %arena at 4096`): the caller writes
/// the input there and nothing is copied; a tensor passed from elsewhere is copied in once
/// by the VM, which reports why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The tensor parameter.
    pub param: u32,
    /// The storage parameter it lives in.
    pub storage: u32,
    pub offset: u64,
}

/// A function: parameters occupy registers `0..params.len()`.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: String,
    pub params: Vec<Type>,
    /// Tensor parameters that must be views of a storage parameter, by parameter index.
    pub placements: Vec<Placement>,
    pub results: Vec<Type>,
    pub num_regs: u32,
    pub code: Vec<Instr>,
    /// Operand lists referenced by instructions (see [`crate::ir::bytecode::ArgList`]).
    pub args: Vec<Arg>,
    pub debug: FuncDebug,
}

impl Function {
    /// The register's source name, or `r<N>` when the module carries no names.
    pub fn reg_name(&self, r: Reg) -> String {
        match self.debug.reg_names.get(r.index()) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => format!("r{}", r.0),
        }
    }

    /// A type as the text syntax writes it in this function: symbolic dimensions by their
    /// register names (`f32[%n, 3]`), where `Type`'s own `Display` can only number them.
    pub fn type_text(&self, t: &Type) -> String {
        match t {
            Type::Tensor { dtype, dims } if dims.iter().any(|d| matches!(d, Dim::Sym { .. })) => {
                let dims: Vec<String> = dims
                    .iter()
                    .map(|d| match d {
                        Dim::Sym { reg, .. } => format!("%{}", self.reg_name(Reg(*reg))),
                        Dim::Known(v) => v.to_string(),
                        Dim::Any => "?".to_string(),
                    })
                    .collect();
                format!("{dtype}[{}]", dims.join(", "))
            }
            t => t.to_string(),
        }
    }

    /// The symbols the parameters bind at entry: each symbol register once, in order of
    /// first occurrence, with its declared bound.
    pub fn symbols(&self) -> Vec<(u32, Option<i64>)> {
        let mut out: Vec<(u32, Option<i64>)> = Vec::new();
        for t in &self.params {
            for (_, reg, max) in t.symbols() {
                if !out.iter().any(|(r, _)| *r == reg) {
                    out.push((reg, max));
                }
            }
        }
        out
    }

    pub fn loc(&self, pc: usize) -> SourceLoc {
        self.debug.locs.get(pc).copied().unwrap_or_default()
    }

    /// `args[start .. start + len]`, or `None` when out of range.
    pub fn arg_slice(&self, start: u32, len: usize) -> Option<&[Arg]> {
        let s = start as usize;
        self.args.get(s..s.checked_add(len)?)
    }

    /// The placement of parameter `param`, if it has one.
    pub fn placement(&self, param: u32) -> Option<&Placement> {
        self.placements.iter().find(|p| p.param == param)
    }

    pub fn label_at(&self, pc: u32) -> Option<&str> {
        self.debug.labels.binary_search_by_key(&pc, |(p, _)| *p).ok().map(|i| self.debug.labels[i].1.as_str())
    }
}

/// A loaded or assembled module.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Module {
    pub name: String,
    pub literals: Vec<Literal>,
    pub consts: PrimaryMap<ConstId, Constant>,
    pub funcs: PrimaryMap<FuncId, Function>,
    /// Operator attribute sets, referenced by `call_op` instructions (1-based).
    pub attrs: Vec<crate::ir::attrs::Attrs>,
    /// User-declared OpenCL kernels, referenced by `call_kernel` instructions.
    pub kernels: Vec<UserKernel>,
    /// The source file the module was assembled from, for diagnostics.
    pub source_file: Option<String>,
}

impl Module {
    pub fn func_by_name(&self, name: &str) -> Option<FuncId> {
        let name = name.strip_prefix('@').unwrap_or(name);
        // Bytewise in line: names are short, and a call to `bcmp` per candidate cost half
        // a nanosecond of a 20 ns empty invocation by name.
        let same = |f: &Function| f.name.len() == name.len() && f.name.bytes().zip(name.bytes()).all(|(a, b)| a == b);
        self.funcs.iter().find(|(_, f)| same(f)).map(|(id, _)| id)
    }

    pub fn func(&self, id: FuncId) -> Option<&Function> {
        self.funcs.get(id)
    }

    pub fn const_by_name(&self, name: &str) -> Option<ConstId> {
        self.consts.iter().find(|(_, c)| c.name == name).map(|(id, _)| id)
    }

    /// Removes names and source positions (what `asm --strip` emits).
    pub fn strip_debug(&mut self) {
        self.source_file = None;
        for f in self.funcs.values_mut() {
            f.debug = FuncDebug::default();
        }
    }

    /// The integer value of an `Arg` that is an immediate or an integer literal.
    pub fn const_int(&self, a: Arg) -> Option<i64> {
        match a.kind() {
            ArgKind::Imm(v) => Some(v as i64),
            ArgKind::Lit(i) => match self.literals.get(i as usize)? {
                Literal::Int(v) => Some(*v),
                Literal::Float(_) => None,
            },
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NameList;

    #[test]
    fn name_list_keeps_each_name_apart() {
        let names: NameList = ["x", "", "weight.0", "é"].into_iter().collect();
        assert_eq!(names.len(), 4);
        assert_eq!(
            (names.get(0), names.get(1), names.get(2), names.get(3)),
            (Some("x"), Some(""), Some("weight.0"), Some("é"))
        );
        assert_eq!(names.get(4), None);
        assert_eq!(names.iter().collect::<Vec<_>>(), ["x", "", "weight.0", "é"]);
        // Equal lists are equal however they were built; a different split is not equal.
        let mut pushed = NameList::new();
        pushed.reserve(4, 16);
        ["x", "", "weight.0", "é"].into_iter().for_each(|n| pushed.push(n));
        assert_eq!(pushed, names);
        assert_ne!(["xw", "eight.0"].into_iter().collect::<NameList>(), ["x", "weight.0"].into_iter().collect());
        pushed.clear();
        assert!(pushed.is_empty() && pushed.get(0).is_none());
    }
}
