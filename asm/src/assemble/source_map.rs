//! Where things came from in the text: the [`SourceMap`] that places verifier errors on
//! the operand, instruction or header they are about, and the line/column positions of the
//! debug info.

use crate::ast::*;
use crate::diag::Diagnostic;
use rxvm_vm::bytecode::{FuncId, PrimaryMap};
use rxvm_vm::module::SourceLoc;
use rxvm_vm::VerifyError;
use smallvec::SmallVec;

/// Where each part of the module came from in the text.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    /// The `module` declaration, if any.
    pub module_span: Option<Span>,
    pub funcs: PrimaryMap<FuncId, FuncMap>,
}

#[derive(Clone, Debug, Default)]
pub struct FuncMap {
    /// From `func` to the end of the result types.
    pub header: Span,
    pub instrs: Vec<InstrMap>,
}

#[derive(Clone, Debug, Default)]
pub struct InstrMap {
    pub span: Span,
    /// Operands in written order, destinations first (absent optional clauses of
    /// `alloc_storage`/`alloc_tensor` get the instruction's span). An operator call has its
    /// inputs, its outputs, then its attribute block (the instruction's span when absent).
    pub operands: SmallVec<[Span; 6]>,
    /// An operator call's attributes: name and the span of `name = value`.
    pub attrs: Vec<(String, Span)>,
}

impl InstrMap {
    /// The attribute a verifier message is about: the first one named in backquotes, else
    /// the one whose name appears first as a word.
    pub(super) fn attr_in_message(&self, message: &str) -> Option<Span> {
        if let Some(&(_, s)) = self.attrs.iter().find(|(n, _)| message.contains(&format!("`{n}`"))) {
            return Some(s);
        }
        let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        self.attrs
            .iter()
            .filter_map(|(n, s)| {
                let pos = message.match_indices(n.as_str()).map(|(p, _)| p).find(|&p| {
                    let before = message[..p].chars().next_back();
                    let after = message[p + n.len()..].chars().next();
                    !before.is_some_and(is_word) && !after.is_some_and(is_word)
                })?;
                Some((pos, *s))
            })
            .min_by_key(|(p, _)| *p)
            .map(|(_, s)| s)
    }
}

impl SourceMap {
    /// The diagnostic for a verifier error: at the operand, else the instruction, else the
    /// function header.
    pub fn verify_diagnostic(&self, e: &VerifyError) -> Diagnostic {
        let fmap = e.func.and_then(|f| self.funcs.get(f));
        let span = match (fmap, e.pc) {
            (Some(f), Some(pc)) => match f.instrs.get(pc) {
                Some(ins) => match e.operand {
                    // The attribute block of an operator call: the attribute the message names.
                    Some(o) if o + 1 == ins.operands.len() && !ins.attrs.is_empty() => {
                        ins.attr_in_message(&e.message).unwrap_or(ins.operands[o])
                    }
                    Some(o) => ins.operands.get(o).copied().unwrap_or(ins.span),
                    None => ins.span,
                },
                None => f.header,
            },
            (Some(f), None) => f.header,
            (None, _) => self.module_span.unwrap_or_default(),
        };
        let mut d = Diagnostic::new(span, e.message.clone());
        d.notes = e.notes.clone();
        d
    }
}

/// Precomputed line starts, to turn byte offsets into 1-based line/column.
pub(super) struct Lines<'a> {
    pub(super) src: &'a str,
    pub(super) starts: Vec<usize>,
    /// The line of the previous lookup: instructions are looked up in text order, so the
    /// next one is usually on the same line or a few lines further.
    hint: std::cell::Cell<usize>,
}

impl<'a> Lines<'a> {
    /// Only the first line start; the rest are appended as they are found.
    pub(super) fn first(src: &'a str) -> Lines<'a> {
        Lines { src, starts: vec![0], hint: std::cell::Cell::new(1) }
    }

    pub(super) fn new(src: &'a str) -> Lines<'a> {
        let mut starts = vec![0];
        starts.extend(src.bytes().enumerate().filter(|(_, b)| *b == b'\n').map(|(i, _)| i + 1));
        Lines { src, starts, hint: std::cell::Cell::new(1) }
    }

    /// The 1-based line holding byte `off`: the number of line starts at or before it.
    pub(super) fn line_of(&self, off: usize) -> usize {
        let s = &self.starts;
        let mut line = self.hint.get();
        if line >= 1 && line <= s.len() && s[line - 1] <= off {
            // Walk forward a little from the previous answer, else search.
            let mut steps = 0;
            while line < s.len() && s[line] <= off && steps < 16 {
                line += 1;
                steps += 1;
            }
            if line == s.len() || s[line] > off {
                self.hint.set(line);
                return line;
            }
        }
        line = s.partition_point(|&st| st <= off).max(1);
        self.hint.set(line);
        line
    }

    pub(super) fn loc(&self, off: usize) -> SourceLoc {
        let line = self.line_of(off);
        let start = self.starts[line - 1];
        // Columns count characters; the indentation before an instruction is ASCII.
        let col = self.src.get(start..off).map_or(0, |t| if t.is_ascii() { t.len() } else { t.chars().count() }) + 1;
        SourceLoc { line: u32::try_from(line).unwrap_or(u32::MAX), col: u32::try_from(col).unwrap_or(u32::MAX) }
    }
}
