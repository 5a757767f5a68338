//! The words of the `.rxa` language, derived from the VM's tables rather than listed again:
//! mnemonics from the opcode table ([`Opcode::ALL`], [`Opcode::mnemonic`]), type keywords
//! from [`Kind`], dtype names from [`DType`]. The parser, the diagnostics and the fuzzing
//! dictionaries and vocabularies all use these lists, so that a new opcode or dtype is
//! known everywhere at once.

use rxvm_vm::bytecode::Opcode;
use rxvm_vm::types::{DType, Kind};

/// How an instruction is written, by opcode. The `match` is exhaustive: a new opcode does
/// not compile until its form is stated here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Form {
    /// Written with destinations: `%d = mnemonic ...` (calls may write none).
    pub writes: bool,
    /// Takes operands after the mnemonic.
    pub operands: bool,
}

/// The form of `op`'s instruction.
pub fn form(op: Opcode) -> Form {
    let (writes, operands) = match op {
        Opcode::Nop => (false, false),
        Opcode::Mov
        | Opcode::LoadInt
        | Opcode::LoadFloat
        | Opcode::LoadConst
        | Opcode::MakeShape
        | Opcode::AllocStorage
        | Opcode::AllocTensor
        | Opcode::Call
        | Opcode::CallBuiltin
        | Opcode::CallOp
        | Opcode::CallOpAlloc
        | Opcode::CallKernel => (true, true),
        Opcode::Kill | Opcode::Ret | Opcode::Br | Opcode::BrIf => (false, true),
    };
    Form { writes, operands }
}

/// One mnemonic of the language: several opcodes may share it (`call`); `op` is the first
/// of them in the opcode table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mnemonic {
    pub text: &'static str,
    pub op: Opcode,
    pub form: Form,
}

/// Builds the mnemonic table: one entry per distinct mnemonic, those written with
/// destinations first, then those without; each group in opcode-table order, with the
/// instructions without operands (`nop`) last. (That is the order in which "expected"
/// lists show them.)
fn mnemonic_table() -> Vec<Mnemonic> {
    let mut v: Vec<Mnemonic> = Vec::with_capacity(Opcode::ALL.len());
    for &op in Opcode::ALL {
        if !v.iter().any(|m| m.text == op.mnemonic()) {
            v.push(Mnemonic { text: op.mnemonic(), op, form: form(op) });
        }
    }
    // A stable sort keeps the table's order within each group.
    v.sort_by_key(|m| (!m.form.writes, !m.form.operands));
    v
}

/// The mnemonic table and an index for looking words up.
struct Table {
    list: Vec<Mnemonic>,
    /// By [`bucket`]: 1 + the index in `list` of the only mnemonic there, 0 for none,
    /// [`SHARED`] when several share the bucket (then `list` is searched).
    index: [u8; 256],
}

const SHARED: u8 = u8::MAX;

/// A hash of a word: its length, first and last bytes.
#[inline]
fn bucket(w: &[u8]) -> usize {
    match (w.first(), w.last()) {
        (Some(&f), Some(&l)) => (w.len().wrapping_mul(7) ^ usize::from(f).wrapping_mul(3) ^ usize::from(l)) & 255,
        _ => 0,
    }
}

fn table() -> &'static Table {
    static TABLE: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let list = mnemonic_table();
        let mut index = [0u8; 256];
        for (k, m) in list.iter().enumerate() {
            let b = &mut index[bucket(m.text.as_bytes())];
            *b = if *b == 0 { u8::try_from(k + 1).unwrap_or(SHARED) } else { SHARED };
        }
        Table { list, index }
    })
}

/// Every mnemonic, in the order "expected" lists show them: those written with
/// destinations first, then those without, each group in opcode-table order with the
/// instructions without operands (`nop`) last.
pub fn mnemonics() -> &'static [Mnemonic] {
    &table().list
}

/// The mnemonic spelled `text`, if any. (The parser asks about every instruction: one
/// table lookup and one comparison.)
#[inline]
pub fn mnemonic(text: &str) -> Option<&'static Mnemonic> {
    let t = table();
    match t.index[bucket(text.as_bytes())] {
        0 => None,
        SHARED => t.list.iter().find(|m| m.text == text),
        k => t.list.get(usize::from(k) - 1).filter(|m| m.text == text),
    }
}

/// The type keywords that are not tensor types: `int`, `float`, `shape`, `storage`,
/// `tensor` (any tensor), from the VM's value kinds.
pub fn type_keywords() -> impl Iterator<Item = (&'static str, Kind)> {
    Kind::ALL.into_iter().map(|k| (k.name(), k))
}

/// Every dtype name (`f32`, `i64`, `bool`, ...), which start tensor types.
pub fn dtype_names() -> impl Iterator<Item = &'static str> {
    DType::ALL.into_iter().map(DType::name)
}

/// The keywords that are neither mnemonics nor types: declarations, clauses, constant
/// initialisers and literals.
pub const KEYWORDS: &[&str] = &[
    "module", "const", "kernel", "func", "opencl", "fill", "file", "true", "false", "none", "in", "at", "align",
    "device", "scope", "global",
];

/// Every word of the language, each once: [`KEYWORDS`], the mnemonics, the type keywords
/// and the dtype names. For fuzzing dictionaries and vocabularies, completion, and
/// syntax highlighting.
pub fn keywords() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = KEYWORDS.to_vec();
    let words = mnemonics().iter().map(|m| m.text).chain(type_keywords().map(|(w, _)| w)).chain(dtype_names());
    for w in words {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnemonics_come_from_the_opcode_table() {
        let texts: Vec<&str> = mnemonics().iter().map(|m| m.text).collect();
        assert_eq!(
            texts,
            [
                "mov",
                "int",
                "float",
                "const",
                "shape",
                "alloc_storage",
                "alloc_tensor",
                "call",
                "kill",
                "ret",
                "br",
                "br_if",
                "nop"
            ]
        );
        assert_eq!(mnemonic("call").map(|m| m.op), Some(Opcode::Call));
        assert_eq!(mnemonic("frob"), None);
        assert_eq!(mnemonic(""), None);
        assert_eq!(mnemonic("callx"), None);
        for &op in Opcode::ALL {
            assert!(mnemonic(op.mnemonic()).is_some(), "{op:?}");
        }
    }

    #[test]
    fn keywords_are_unique_and_complete() {
        let k = keywords();
        for (i, w) in k.iter().enumerate() {
            assert!(!k[..i].contains(w), "{w} twice");
        }
        for w in ["func", "br_if", "tensor", "storage", "f32", "bool", "none", "global"] {
            assert!(k.contains(&w), "{w}");
        }
    }
}
