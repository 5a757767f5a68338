//! The fast path for valid programs: a hand-written lexer and parser that read the source
//! once, top-level item by item, without a token array or a parse tree of the whole file
//! (for a large program those took more memory than the module, and page faults and nom's
//! bookkeeping were most of the parse time).
//!
//! They build the same nodes as [`crate::lexer`] + [`crate::parser`], for a subset of what
//! those accept. On anything else, an error above all, they give up ([`GiveUp`]) and the
//! caller starts again with the reference parser, whose diagnostics are the ones users see.
//! So this module never explains anything: it only has to be right when it succeeds.

use crate::ast::*;
use crate::lexer::TokKind;
use crate::parser::{float_value, int_value};
use bumpalo::Bump;
use rxvm_vm::bytecode::Opcode;
use smallvec::SmallVec;

/// The input is invalid, or outside the fast path: the reference parser decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GiveUp;

pub(crate) type R<T> = Result<T, GiveUp>;

/// A token: kind and byte span (its text is `src[span]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: TokKind,
    pub span: Span,
}

/// Bytes that continue an identifier, register or global name: `[A-Za-z0-9_.]`.
static NAME_CHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || b == b'_' || b == b'.';
        c += 1;
    }
    t
};

/// The same tokens as the `logos` lexer of [`crate::lexer`] (whitespace and comments
/// skipped, newlines kept), one at a time. It gives up wherever that lexer fails, and on
/// the few inputs where that lexer backtracks in its own way (see `nan_end`).
pub(crate) struct Lexer<'s> {
    src: &'s [u8],
    pos: usize,
    /// The start of every line after a newline lexed so far (for source positions).
    pub line_starts: Vec<usize>,
}

impl<'s> Lexer<'s> {
    pub fn new(src: &'s str) -> Lexer<'s> {
        Lexer { src: src.as_bytes(), pos: 0, line_starts: Vec::new() }
    }

    fn at(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    /// End of a run of name characters starting at `i`.
    fn name_end(&self, i: usize) -> usize {
        let rest = self.src.get(i..).unwrap_or(&[]);
        i + rest.iter().position(|&b| !NAME_CHAR[b as usize]).unwrap_or(rest.len())
    }

    fn digits_end(&self, mut i: usize) -> usize {
        while self.at(i).is_ascii_digit() {
            i += 1;
        }
        i
    }

    /// End of `[eE][+-]?[0-9]+` at `i`, if there is one.
    fn exponent_end(&self, i: usize) -> Option<usize> {
        if !matches!(self.at(i), b'e' | b'E') {
            return None;
        }
        let j = if matches!(self.at(i + 1), b'+' | b'-') { i + 2 } else { i + 1 };
        self.at(j).is_ascii_digit().then(|| self.digits_end(j))
    }

    /// A number starting with a digit at `i`: `Int` (decimal or `0x` hexadecimal) or
    /// `Float` (a fraction, an exponent or both), longest match as `logos` does.
    fn number(&self, i: usize) -> (TokKind, usize) {
        let d = self.digits_end(i);
        if d == i + 1 && self.at(i) == b'0' && matches!(self.at(d), b'x' | b'X') && self.at(d + 1).is_ascii_hexdigit() {
            let mut j = d + 1;
            while self.at(j).is_ascii_hexdigit() {
                j += 1;
            }
            return (TokKind::Int, j);
        }
        if self.at(d) == b'.' && self.at(d + 1).is_ascii_digit() {
            let f = self.digits_end(d + 1);
            return (TokKind::Float, self.exponent_end(f).unwrap_or(f));
        }
        match self.exponent_end(d) {
            Some(e) => (TokKind::Float, e),
            None => (TokKind::Int, d),
        }
    }

    /// After `nan` ending at `i`: the end of an optional `(0xHEX)` payload. `None` when a
    /// `(` follows but the payload is incomplete: there `logos` backtracks in ways of its own
    /// (`nan(` lexes as an identifier, `nan(0x1 ` not at all), left to it.
    fn nan_end(&self, i: usize) -> Option<usize> {
        if self.at(i) != b'(' {
            return Some(i);
        }
        if self.at(i + 1) == b'0' && matches!(self.at(i + 2), b'x' | b'X') {
            let mut j = i + 3;
            if self.at(j).is_ascii_hexdigit() {
                while self.at(j).is_ascii_hexdigit() {
                    j += 1;
                }
                if self.at(j) == b')' {
                    return Some(j + 1);
                }
            }
        }
        None
    }

    /// Appends up to `n` tokens to `out`; false once the input is exhausted.
    pub fn fill(&mut self, out: &mut Vec<Token>, n: usize) -> R<bool> {
        out.reserve(n);
        for _ in 0..n {
            match self.next_token()? {
                Some(t) => out.push(t),
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// The next token; `None` at the end of the input.
    #[inline(always)]
    pub fn next_token(&mut self) -> R<Option<Token>> {
        let src = self.src;
        let mut start = self.pos;
        // Blanks and comments (a comment runs to the end of its line; the newline is a token).
        let c = loop {
            let Some(&c) = src.get(start) else { return Ok(None) };
            match c {
                b' ' | b'\t' | b'\r' | 0x0c => start += 1,
                b';' => start = src[start..].iter().position(|&b| b == b'\n').map_or(src.len(), |n| start + n),
                _ => break c,
            }
        };
        let (kind, end) = match c {
            b'\n' => {
                self.line_starts.push(start + 1);
                (TokKind::Newline, start + 1)
            }
            b'A'..=b'Z' | b'a'..=b'z' | b'_' => {
                let end = self.name_end(start + 1);
                // `inf` and `nan` are floats (the same length as the identifier, and
                // of higher priority); `nan(0x..)` is longer than the identifier.
                match &self.src[start..end] {
                    b"inf" => (TokKind::Float, end),
                    b"nan" => (TokKind::Float, self.nan_end(end).ok_or(GiveUp)?),
                    _ => (TokKind::Ident, end),
                }
            }
            b'%' | b'@' => {
                let end = self.name_end(start + 1);
                if end == start + 1 {
                    return Err(GiveUp);
                }
                (if c == b'%' { TokKind::Reg } else { TokKind::Global }, end)
            }
            b'0'..=b'9' => self.number(start),
            b'-' => match self.at(start + 1) {
                b'>' => (TokKind::Arrow, start + 2),
                b'0'..=b'9' => self.number(start + 1),
                _ if self.src[start + 1..].starts_with(b"inf") => (TokKind::Float, start + 4),
                _ if self.src[start + 1..].starts_with(b"nan") => {
                    (TokKind::Float, self.nan_end(start + 4).ok_or(GiveUp)?)
                }
                _ => return Err(GiveUp),
            },
            b'"' => {
                // `"([^"\\\n]|\\[^\n])*"`; a string without its closing quote on its line is
                // an error. (A character after `\\` may take several bytes; the others are
                // not special.)
                let mut j = start + 1;
                loop {
                    match self.src.get(j) {
                        Some(b'"') => break,
                        None | Some(b'\n') => return Err(GiveUp),
                        Some(b'\\') => match self.src.get(j + 1) {
                            None | Some(b'\n') => return Err(GiveUp),
                            Some(_) => j += 2,
                        },
                        Some(_) => j += 1,
                    }
                }
                (TokKind::Str, j + 1)
            }
            b',' => (TokKind::Comma, start + 1),
            b':' => (TokKind::Colon, start + 1),
            b'=' => (TokKind::Eq, start + 1),
            b'(' => (TokKind::LParen, start + 1),
            b')' => (TokKind::RParen, start + 1),
            b'[' => (TokKind::LBracket, start + 1),
            b']' => (TokKind::RBracket, start + 1),
            b'{' => (TokKind::LBrace, start + 1),
            b'}' => (TokKind::RBrace, start + 1),
            b'?' => (TokKind::Question, start + 1),
            _ => return Err(GiveUp),
        };
        self.pos = end;
        Ok(Some(Token { kind, span: Span::new(start, end) }))
    }
}

/// A top-level declaration.
pub(crate) enum Item<'a> {
    Const(ConstDecl<'a>),
    Kernel(KernelDecl<'a>),
    Func(FuncDecl<'a>),
}

/// A recursive-descent parser over [`Lexer`] with two tokens of lookahead, following the
/// grammar of [`crate::parser`] rule for rule.
pub(crate) struct Parser<'s> {
    src: &'s str,
    lx: Lexer<'s>,
    /// A window of tokens, lexed in batches; `toks[at]` is the current one. Unless the
    /// input is exhausted (`more` false), the one after it is there too.
    toks: Vec<Token>,
    at: usize,
    more: bool,
    /// Where `at` must be to need a refill: the last token of the window, or never.
    refill_at: usize,
    /// End of the last token consumed.
    prev_end: usize,
}

/// Tokens lexed at a time.
const BATCH: usize = 256;

impl<'s> Parser<'s> {
    pub fn new(src: &'s str) -> R<Parser<'s>> {
        let toks = Vec::with_capacity(BATCH + 2);
        let mut p = Parser { src, lx: Lexer::new(src), toks, at: 0, more: true, refill_at: 0, prev_end: 0 };
        p.refill()?;
        Ok(p)
    }

    /// Drops the consumed tokens and lexes the next batch.
    #[cold]
    fn refill(&mut self) -> R<()> {
        self.toks.drain(..self.at);
        self.at = 0;
        self.more = self.lx.fill(&mut self.toks, BATCH)?;
        self.refill_at = if self.more { self.toks.len() - 1 } else { usize::MAX };
        Ok(())
    }

    /// Moves the line starts lexed so far to `into`.
    pub fn take_line_starts(&mut self, into: &mut Vec<usize>) {
        into.append(&mut self.lx.line_starts);
    }

    fn cur(&self) -> Option<Token> {
        self.toks.get(self.at).copied()
    }

    fn text(&self, t: Token) -> &'s str {
        self.src.get(t.span.range()).unwrap_or("")
    }

    fn at(&self, kind: TokKind) -> bool {
        self.cur().is_some_and(|t| t.kind == kind)
    }

    fn at_kw(&self, word: &str) -> bool {
        self.cur().is_some_and(|t| t.kind == TokKind::Ident && self.text(t) == word)
    }

    /// The token after the current one.
    fn peek2(&self) -> Option<Token> {
        self.toks.get(self.at + 1).copied()
    }

    fn bump(&mut self) -> R<Token> {
        let t = self.cur().ok_or(GiveUp)?;
        self.prev_end = t.span.end;
        self.at += 1;
        if self.at >= self.refill_at {
            self.refill()?;
        }
        Ok(t)
    }

    fn eat(&mut self, kind: TokKind) -> R<Token> {
        if self.at(kind) {
            self.bump()
        } else {
            Err(GiveUp)
        }
    }

    fn eat_kw(&mut self, word: &str) -> R<Token> {
        if self.at_kw(word) {
            self.bump()
        } else {
            Err(GiveUp)
        }
    }

    fn nls(&mut self) -> R<()> {
        while self.at(TokKind::Newline) {
            self.bump()?;
        }
        Ok(())
    }

    /// A newline, or the end of the input (not consumed).
    fn stmt_end(&mut self) -> R<()> {
        match self.cur() {
            None => Ok(()),
            Some(t) if t.kind == TokKind::Newline => self.bump().map(|_| ()),
            Some(_) => Err(GiveUp),
        }
    }

    fn name(&mut self, kind: TokKind) -> R<Name<'s>> {
        let t = self.eat(kind)?;
        // Registers and globals without their sigil.
        let from = if kind == TokKind::Ident { t.span.start } else { t.span.start + 1 };
        Ok(Name { text: self.src.get(from..t.span.end).unwrap_or(""), span: t.span })
    }

    fn reg(&mut self) -> R<Name<'s>> {
        self.name(TokKind::Reg)
    }

    fn global(&mut self) -> R<Name<'s>> {
        self.name(TokKind::Global)
    }

    fn ident(&mut self) -> R<Name<'s>> {
        self.name(TokKind::Ident)
    }

    fn int_lit(&mut self) -> R<IntLit> {
        let t = self.eat(TokKind::Int)?;
        let b = self.src.as_bytes().get(t.span.range()).unwrap_or(&[]);
        let (neg, digits) = match b.split_first() {
            Some((b'-', d)) => (true, d),
            _ => (false, b),
        };
        // Most literals are short decimals (the lexer checked the digits; 18 of them fit
        // an i64); `int_value` does hexadecimal and long ones.
        let value = if digits.len() <= 18 && !matches!(digits.get(1), Some(b'x' | b'X')) {
            let v = digits.iter().fold(0i64, |v, d| v * 10 + i64::from(d.wrapping_sub(b'0')));
            Some(i128::from(if neg { -v } else { v }))
        } else {
            int_value(self.text(t))
        };
        Ok(IntLit { value, span: t.span })
    }

    fn float_lit(&mut self) -> R<FloatLit<'s>> {
        let t = self.eat(TokKind::Float)?;
        let text = self.text(t);
        Ok(FloatLit { text, value: float_value(text), span: t.span })
    }

    fn number(&mut self) -> R<Number<'s>> {
        if self.at(TokKind::Int) {
            self.int_lit().map(Number::Int)
        } else {
            self.float_lit().map(Number::Float)
        }
    }

    fn string(&mut self) -> R<StrLit<'s>> {
        let t = self.eat(TokKind::Str)?;
        Ok(StrLit { raw: self.text(t), span: t.span })
    }

    /// Register, integer, float or constant.
    fn operand(&mut self) -> R<Operand<'s>> {
        match self.cur().map(|t| t.kind) {
            Some(TokKind::Reg) => self.reg().map(Operand::Reg),
            Some(TokKind::Int) => self.int_lit().map(Operand::Int),
            Some(TokKind::Float) => self.float_lit().map(Operand::Float),
            Some(TokKind::Global) => self.global().map(Operand::Const),
            _ => Err(GiveUp),
        }
    }

    /// Register or integer.
    fn int_operand(&mut self) -> R<Operand<'s>> {
        match self.cur().map(|t| t.kind) {
            Some(TokKind::Reg) => self.reg().map(Operand::Reg),
            Some(TokKind::Int) => self.int_lit().map(Operand::Int),
            _ => Err(GiveUp),
        }
    }

    /// Register, constant or `none` (operator inputs; outputs too: the assembler refuses
    /// the last two there).
    fn op_operand(&mut self) -> R<Operand<'s>> {
        match self.cur().map(|t| t.kind) {
            Some(TokKind::Reg) => self.reg().map(Operand::Reg),
            Some(TokKind::Global) => self.global().map(Operand::Const),
            _ if self.at_kw("none") => self.bump().map(|t| Operand::None(t.span)),
            _ => Err(GiveUp),
        }
    }

    /// `elem (, NEWLINES* elem)*` into `out`.
    fn comma_list<T>(&mut self, out: &mut SmallVec<[T; 8]>, mut elem: impl FnMut(&mut Self) -> R<T>) -> R<()> {
        out.push(elem(self)?);
        while self.at(TokKind::Comma) {
            self.bump()?;
            self.nls()?;
            out.push(elem(self)?);
        }
        Ok(())
    }

    /// `open NEWLINES* [elem, ...] NEWLINES* close`, copied into the arena.
    fn bracketed<'a, T: Copy>(
        &mut self,
        ar: &'a Bump,
        open: TokKind,
        close: TokKind,
        elem: impl FnMut(&mut Self) -> R<T>,
    ) -> R<&'a [T]> {
        self.eat(open)?;
        self.nls()?;
        let mut items: SmallVec<[T; 8]> = SmallVec::new();
        // No element can start with a closing bracket: an empty list.
        if !self.at(close) {
            self.comma_list(&mut items, elem)?;
        }
        self.nls()?;
        self.eat(close)?;
        Ok(ar.alloc_slice_copy(&items))
    }

    fn type_expr<'a>(&mut self, ar: &'a Bump) -> R<TypeExpr<'a>>
    where
        's: 'a,
    {
        let t = self.cur().filter(|t| t.kind == TokKind::Ident).ok_or(GiveUp)?;
        if let Some(kind) = crate::parser::simple_type(self.text(t)) {
            self.bump()?;
            return Ok(TypeExpr { kind, span: t.span });
        }
        let next_is_bracket = self.peek2().is_some_and(|n| n.kind == TokKind::LBracket);
        if !next_is_bracket && rxvm_vm::types::DType::from_name(self.text(t)).is_none() {
            return Err(GiveUp);
        }
        let dtype = self.ident()?;
        let dims = self.bracketed(ar, TokKind::LBracket, TokKind::RBracket, |p| match p.cur().map(|t| t.kind) {
            Some(TokKind::Int) => p.int_lit().map(DimExpr::Known),
            Some(TokKind::Question) => p.bump().map(|t| DimExpr::Any(t.span)),
            _ => Err(GiveUp),
        })?;
        Ok(TypeExpr { kind: TypeKind::Tensor { dtype, dims }, span: Span::new(t.span.start, self.prev_end) })
    }

    /// `, scope "..."` (optional).
    fn scope_clause(&mut self) -> R<Option<StrLit<'s>>> {
        if self.clause("scope")? {
            self.string().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Whether `, WORD` follows; if so, both are consumed.
    fn clause(&mut self, word: &str) -> R<bool> {
        if !self.at(TokKind::Comma) {
            return Ok(false);
        }
        let Some(t) = self.peek2() else { return Ok(false) };
        if t.kind != TokKind::Ident || self.text(t) != word {
            return Ok(false);
        }
        self.bump()?;
        self.bump()?;
        Ok(true)
    }

    /// `[%d, ... =] mnemonic operands`
    fn instr<'a>(&mut self, ar: &'a Bump) -> R<InstrNode<'a>>
    where
        's: 'a,
    {
        let start = self.cur().ok_or(GiveUp)?.span.start;
        let dsts: &'a [Name<'a>] = if self.at(TokKind::Reg) {
            let mut d: SmallVec<[Name<'s>; 8]> = SmallVec::new();
            self.comma_list(&mut d, |p| p.reg())?;
            self.eat(TokKind::Eq)?;
            ar.alloc_slice_copy(&d)
        } else {
            &[]
        };
        let mnemonic = self.ident()?;
        // Not a mnemonic: give up.
        let op = crate::syntax::mnemonic(mnemonic.text).ok_or(GiveUp)?.op;
        let kind = match op {
            Opcode::Nop => InstrKind::Nop,
            Opcode::Mov => InstrKind::Mov { src: self.reg()? },
            Opcode::LoadInt => InstrKind::Int { value: self.int_lit()? },
            Opcode::LoadFloat => InstrKind::Float { value: self.number()? },
            Opcode::LoadConst => InstrKind::Const { konst: self.global()? },
            Opcode::MakeShape => InstrKind::Shape {
                dims: self.bracketed(ar, TokKind::LBracket, TokKind::RBracket, |p| p.int_operand())?,
            },
            Opcode::AllocStorage => {
                let size = self.int_operand()?;
                let align = if self.clause("align")? { Some(self.int_operand()?) } else { None };
                let device = if self.clause("device")? { Some(self.int_lit()?) } else { None };
                let scope = self.scope_clause()?;
                InstrKind::AllocStorage { size, align, device, scope }
            }
            Opcode::AllocTensor => {
                let storage = self.reg()?;
                self.eat(TokKind::Comma)?;
                let offset = self.int_operand()?;
                self.eat(TokKind::Comma)?;
                let dtype = self.ident()?;
                let dims = self.bracketed(ar, TokKind::LBracket, TokKind::RBracket, |p| p.int_operand())?;
                let scope = self.scope_clause()?;
                InstrKind::AllocTensor { storage, offset, dtype, dims, scope }
            }
            Opcode::Kill => InstrKind::Kill { reg: self.reg()? },
            Opcode::Call | Opcode::CallBuiltin | Opcode::CallOp | Opcode::CallKernel => {
                let callee = self.global()?;
                if callee.text.starts_with("onnx.") {
                    self.op_call(ar, callee)?
                } else if callee.text.starts_with("cl.") {
                    let args = self.bracketed(ar, TokKind::LParen, TokKind::RParen, |p| p.operand())?;
                    let global = if self.at_kw("global") {
                        let kw = self.bump()?;
                        let dims = self.bracketed(ar, TokKind::LBracket, TokKind::RBracket, |p| p.int_operand())?;
                        Some(GlobalClause { dims, span: Span::new(kw.span.start, self.prev_end) })
                    } else {
                        None
                    };
                    InstrKind::KernelCall { kernel: callee, args, global }
                } else {
                    let args = self.bracketed(ar, TokKind::LParen, TokKind::RParen, |p| p.operand())?;
                    InstrKind::Call { callee, args }
                }
            }
            Opcode::Ret => {
                let mut values: SmallVec<[Operand<'s>; 8]> = SmallVec::new();
                // An operand cannot start with a newline: no values.
                if self.cur().is_some_and(|t| t.kind != TokKind::Newline) {
                    self.comma_list(&mut values, |p| p.operand())?;
                }
                InstrKind::Ret { values: ar.alloc_slice_copy(&values) }
            }
            Opcode::Br => InstrKind::Br { target: self.ident()? },
            Opcode::BrIf => {
                let cond = self.reg()?;
                self.eat(TokKind::Comma)?;
                let then_ = self.ident()?;
                self.eat(TokKind::Comma)?;
                let else_ = self.ident()?;
                InstrKind::BrIf { cond, then_, else_ }
            }
        };
        Ok(InstrNode { dsts, mnemonic, kind, span: Span::new(start, self.prev_end) })
    }

    /// The rest of `call @onnx.Name`: `(inputs) [-> (outputs)] [{ attributes }]`.
    fn op_call<'a>(&mut self, ar: &'a Bump, op: Name<'s>) -> R<InstrKind<'a>>
    where
        's: 'a,
    {
        let inputs = self.bracketed(ar, TokKind::LParen, TokKind::RParen, |p| p.op_operand())?;
        let (arrow, outputs) = if self.at(TokKind::Arrow) {
            let a = self.bump()?;
            (Some(a.span), self.bracketed(ar, TokKind::LParen, TokKind::RParen, |p| p.op_operand())?)
        } else {
            (None, &[][..])
        };
        let attrs = if self.at(TokKind::LBrace) {
            let open = self.bump()?;
            self.nls()?;
            let mut attrs: SmallVec<[AttrNode<'a>; 8]> = SmallVec::new();
            if !self.at(TokKind::RBrace) {
                self.comma_list(&mut attrs, |p| {
                    let name = p.ident()?;
                    p.eat(TokKind::Eq)?;
                    let start = p.cur().ok_or(GiveUp)?.span.start;
                    let value = match p.cur().map(|t| t.kind) {
                        Some(TokKind::Int) => AttrExpr::Int(p.int_lit()?),
                        Some(TokKind::Float) => AttrExpr::Float(p.float_lit()?),
                        Some(TokKind::Str) => AttrExpr::Str(p.string()?),
                        Some(TokKind::LBracket) => {
                            let elems = p.bracketed(ar, TokKind::LBracket, TokKind::RBracket, |p| {
                                match p.cur().map(|t| t.kind) {
                                    Some(TokKind::Int | TokKind::Float) => p.number(),
                                    _ => Err(GiveUp),
                                }
                            })?;
                            AttrExpr::List { elems, span: Span::new(start, p.prev_end) }
                        }
                        _ => return Err(GiveUp),
                    };
                    Ok(AttrNode { name, value })
                })?;
            }
            self.nls()?;
            self.eat(TokKind::RBrace)?;
            Some(AttrBlock { attrs: ar.alloc_slice_copy(&attrs), span: Span::new(open.span.start, self.prev_end) })
        } else {
            None
        };
        Ok(InstrKind::OpCall { op, inputs, outputs, arrow, attrs })
    }

    /// Labels and instructions up to (not including) the closing `}`.
    fn body<'a>(&mut self, ar: &'a Bump) -> R<&'a [BodyItem<'a>]>
    where
        's: 'a,
    {
        // On the stack for all but long functions.
        let mut items: SmallVec<[BodyItem<'a>; 64]> = SmallVec::new();
        loop {
            self.nls()?;
            let Some(t) = self.cur() else { return Err(GiveUp) };
            if t.kind == TokKind::RBrace {
                return Ok(ar.alloc_slice_copy(&items));
            }
            if t.kind == TokKind::Ident && self.peek2().is_some_and(|n| n.kind == TokKind::Colon) {
                let l = self.ident()?;
                self.bump()?;
                items.push(BodyItem::Label(l));
                continue;
            }
            let ins = self.instr(ar)?;
            self.stmt_end()?;
            items.push(BodyItem::Instr(ar.alloc(ins)));
        }
    }

    fn func<'a>(&mut self, ar: &'a Bump) -> R<FuncDecl<'a>>
    where
        's: 'a,
    {
        let kw = self.eat_kw("func")?;
        let name = self.global()?;
        let params = self.bracketed(ar, TokKind::LParen, TokKind::RParen, |p| {
            let name = p.reg()?;
            p.eat(TokKind::Colon)?;
            let ty = p.type_expr(ar)?;
            let placement = if p.at_kw("in") {
                let in_kw = p.bump()?;
                let storage = p.reg()?;
                p.eat_kw("at")?;
                let offset = p.int_lit()?;
                Some(PlacementExpr { storage, offset, span: in_kw.span.to(offset.span) })
            } else {
                None
            };
            Ok(Param { name, ty, placement })
        })?;
        let results: &'a [TypeExpr<'a>] = if self.at(TokKind::Arrow) {
            self.bump()?;
            if self.at(TokKind::LParen) {
                self.bracketed(ar, TokKind::LParen, TokKind::RParen, |p| p.type_expr(ar))?
            } else {
                let t = self.type_expr(ar)?;
                ar.alloc_slice_copy(&[t])
            }
        } else {
            &[]
        };
        let header_span = Span::new(kw.span.start, self.prev_end);
        self.eat(TokKind::LBrace)?;
        let body = self.body(ar)?;
        self.eat(TokKind::RBrace)?;
        Ok(FuncDecl { name, params, results, body, header_span })
    }

    fn const_decl<'a>(&mut self, ar: &'a Bump) -> R<ConstDecl<'a>>
    where
        's: 'a,
    {
        self.eat_kw("const")?;
        let name = self.global()?;
        self.eat(TokKind::Colon)?;
        let ty = self.type_expr(ar)?;
        self.eat(TokKind::Eq)?;
        let start = self.cur().ok_or(GiveUp)?.span.start;
        let init = if self.at(TokKind::LBracket) {
            let elems =
                self.bracketed(ar, TokKind::LBracket, TokKind::RBracket, |p| match p.cur().map(|t| t.kind) {
                    Some(TokKind::Int | TokKind::Float) => p.number().map(Elem::Num),
                    _ if p.at_kw("true") => p.bump().map(|t| Elem::Bool(true, t.span)),
                    _ if p.at_kw("false") => p.bump().map(|t| Elem::Bool(false, t.span)),
                    _ => Err(GiveUp),
                })?;
            ConstInit::List { elems, span: Span::new(start, self.prev_end) }
        } else if self.at_kw("fill") {
            self.bump()?;
            self.eat(TokKind::LParen)?;
            let n = self.number()?;
            self.eat(TokKind::RParen)?;
            ConstInit::Fill(n)
        } else {
            self.eat_kw("file")?;
            self.eat(TokKind::LParen)?;
            let s = self.string()?;
            self.eat(TokKind::RParen)?;
            ConstInit::File(s)
        };
        Ok(ConstDecl { name, ty, init })
    }

    fn kernel_decl(&mut self) -> R<KernelDecl<'s>> {
        self.eat_kw("kernel")?;
        let name = self.global()?;
        self.eat(TokKind::Eq)?;
        self.eat_kw("opencl")?;
        self.eat(TokKind::LParen)?;
        self.nls()?;
        let entry = self.string()?;
        self.eat(TokKind::Comma)?;
        self.nls()?;
        let source = if self.at(TokKind::Str) {
            KernelSource::Str(self.string()?)
        } else {
            self.eat_kw("file")?;
            self.eat(TokKind::LParen)?;
            let s = self.string()?;
            self.eat(TokKind::RParen)?;
            KernelSource::File(s)
        };
        self.nls()?;
        self.eat(TokKind::RParen)?;
        Ok(KernelDecl { name, entry, source })
    }

    /// The optional `module NAME` line; call first.
    pub fn module_name(&mut self) -> R<Option<ModuleName<'s>>> {
        self.nls()?;
        if !self.at_kw("module") {
            return Ok(None);
        }
        self.bump()?;
        let name = match self.cur().map(|t| t.kind) {
            Some(TokKind::Ident) => ModuleName::Ident(self.ident()?),
            Some(TokKind::Str) => ModuleName::Str(self.string()?),
            _ => return Err(GiveUp),
        };
        self.stmt_end()?;
        Ok(Some(name))
    }

    /// The next declaration, allocated in `ar`; `None` at the end of the input.
    pub fn next_item<'a>(&mut self, ar: &'a Bump) -> R<Option<Item<'a>>>
    where
        's: 'a,
    {
        self.nls()?;
        let Some(t) = self.cur() else { return Ok(None) };
        if t.kind != TokKind::Ident {
            return Err(GiveUp);
        }
        let item = match self.text(t) {
            "const" => Item::Const(self.const_decl(ar)?),
            "kernel" => Item::Kernel(self.kernel_decl()?),
            "func" => Item::Func(self.func(ar)?),
            _ => return Err(GiveUp),
        };
        self.stmt_end()?;
        Ok(Some(item))
    }
}

/// The whole module in one arena (what [`crate::parser::parse`] returns), for tests.
#[cfg(test)]
pub(crate) fn parse_module<'a>(src: &'a str, ar: &'a Bump) -> R<SourceModule<'a>> {
    let mut p = Parser::new(src)?;
    let name = p.module_name()?;
    let (mut consts, mut kernels, mut funcs) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(item) = p.next_item(ar)? {
        match item {
            Item::Const(c) => consts.push(c),
            Item::Kernel(k) => kernels.push(k),
            Item::Func(f) => funcs.push(f),
        }
    }
    Ok(SourceModule {
        name,
        consts: ar.alloc_slice_copy(&consts),
        kernels: ar.alloc_slice_copy(&kernels),
        funcs: ar.alloc_slice_copy(&funcs),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::lex;

    /// Every `.rxa` file of the repository: examples, test programs, invalid programs and
    /// the fuzzing corpus.
    fn corpus() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let dirs = ["examples", "tests/programs", "tests/bad", "asm/tests/programs", "fuzz/corpus/asm_text"];
        let mut out = Vec::new();
        for d in dirs {
            let Ok(rd) = std::fs::read_dir(root.join(d)) else { continue };
            for e in rd.flatten() {
                if e.path().extension().is_none_or(|x| x != "rxa") {
                    continue;
                }
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    out.push((e.path().display().to_string(), text));
                }
            }
        }
        out.sort();
        assert!(out.len() > 50, "found only {} programs", out.len());
        out
    }

    /// A small deterministic generator (64-bit LCG).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n.max(1) as u64) as usize
        }
    }

    /// Variants of `src` with small edits: a byte deleted, a line duplicated or deleted, a
    /// snippet inserted, a prefix.
    fn mutations(src: &str, rng: &mut Rng, n: usize) -> Vec<String> {
        const SNIPPETS: &[&str] = &[
            "\n",
            " ",
            ",",
            "%",
            "@",
            "-",
            "-inf",
            "nan(0x1)",
            "0x",
            "1.5e",
            "\"",
            "\\",
            ";",
            "}",
            "{",
            "(",
            ")",
            "[",
            "]",
            "->",
            ":",
            "=",
            "?",
            "none",
            "func",
            "const",
            "kernel",
            "module m\n",
            "ret\n",
            "1",
            "-7",
            "2.5",
            "%x",
            "@w",
            "é",
            "\t",
            "\r\n",
            "label:",
            "br l",
            "int",
            "f32[2]",
            "in %a at 0",
            "\"a\\\"b\"",
        ];
        let mut out = Vec::new();
        let chars: Vec<(usize, char)> = src.char_indices().collect();
        let lines: Vec<&str> = src.split_inclusive('\n').collect();
        for _ in 0..n {
            let mut s = src.to_string();
            match rng.below(5) {
                0 if !chars.is_empty() => {
                    let (i, c) = chars[rng.below(chars.len())];
                    s.replace_range(i..i + c.len_utf8(), "");
                }
                1 if !lines.is_empty() => {
                    let k = rng.below(lines.len());
                    let mut v = lines.clone();
                    if rng.below(2) == 0 {
                        v.insert(k, lines[k]);
                    } else {
                        v.remove(k);
                    }
                    s = v.concat();
                }
                2 => {
                    let at = chars.get(rng.below(chars.len() + 1)).map_or(src.len(), |c| c.0);
                    s.insert_str(at, SNIPPETS[rng.below(SNIPPETS.len())]);
                }
                3 => {
                    let at = chars.get(rng.below(chars.len() + 1)).map_or(src.len(), |c| c.0);
                    s.truncate(at);
                }
                _ => {
                    let at = chars.get(rng.below(chars.len() + 1)).map_or(src.len(), |c| c.0);
                    let snippet: String = (0..1 + rng.below(6)).map(|_| SNIPPETS[rng.below(SNIPPETS.len())]).collect();
                    s.insert_str(at, &snippet);
                }
            }
            out.push(s);
        }
        out
    }

    fn fast_tokens(src: &str) -> R<Vec<(TokKind, Span)>> {
        let mut lx = Lexer::new(src);
        let mut out = Vec::new();
        while let Some(t) = lx.next_token()? {
            out.push((t.kind, t.span));
        }
        Ok(out)
    }

    /// The lexer agrees with the `logos` lexer: same tokens, or both refuse the input.
    fn check_lexer(src: &str) {
        let reference = lex(src).map(|ts| ts.iter().map(|t| (t.kind, t.span)).collect::<Vec<_>>());
        match (reference, fast_tokens(src)) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "tokens differ for {src:?}"),
            // Giving up is always allowed (the reference lexer decides).
            (_, Err(GiveUp)) => {}
            (Err(e), Ok(b)) => panic!("only the fast lexer accepts {src:?}: {} vs {b:?}", e.message),
        }
    }

    /// Whenever the parser succeeds, the reference parser gives the same tree.
    fn check_parser(src: &str) -> bool {
        let (a1, a2) = (Bump::new(), Bump::new());
        let Ok(fast) = parse_module(src, &a1) else { return false };
        match crate::parser::parse(src, &a2) {
            Ok(reference) => assert_eq!(fast, reference, "trees differ for {src:?}"),
            Err(d) => panic!("only the fast parser accepts {src:?}: {}", d.message),
        }
        true
    }

    /// Whenever the streaming assembler succeeds, the reference path gives the same module,
    /// and it fails only where the reference path does (forward references aside).
    fn check_assembler(src: &str, name: &str) -> bool {
        let dir = std::path::Path::new(name).parent();
        let fast = crate::assemble::assemble_stream(src, name, dir);
        let reference = crate::assemble_with_map(src, name, dir).map(|(m, _)| m);
        match (fast, reference) {
            (Some(f), Ok(r)) => {
                // (Not `==`: NaN literals are not equal to themselves.)
                assert_eq!(rxvm_vm::write_module(&f), rxvm_vm::write_module(&r), "different .rxb for {src:?}");
                let (f, r) = (format!("{f:#?}"), format!("{r:#?}"));
                if f != r {
                    let at = f.lines().zip(r.lines()).position(|(a, b)| a != b).unwrap_or(0);
                    let show = |t: &str| t.lines().skip(at.saturating_sub(8)).take(16).collect::<Vec<_>>().join("\n");
                    panic!("modules differ for {src:?}:\n{}\n--- reference:\n{}", show(&f), show(&r));
                }
                true
            }
            (Some(_), Err(d)) => panic!("only the fast path assembles {src:?}:\n{}", d.render()),
            (None, _) => false,
        }
    }

    #[test]
    fn lexer_matches_logos() {
        for s in [
            "inf info inf.x -inf -info nan nan(0x1) nan(0x) nan(0x1 -nan(0xff)x nanx",
            "0x 0x1F 0X1f -0x10 00x1 0xg 1e5 1e 1e+ 1e+5 1.5 1. 1.5e3 1.5e 1.5.3 12abc 0e5 -0.5e-3 1e5.5",
            "a.b %1.2 @x.y % @ -> - -x \"a\\\"b\" \"x\\\\\" \"é\" \"\\é\" \"\\\n\" \"abc",
            "; comment é\n\t\r\x0c x ; y",
            "$ é \x0b",
            "",
        ] {
            check_lexer(s);
        }
        let mut rng = Rng(7);
        for (_, text) in corpus() {
            check_lexer(&text);
            for m in mutations(&text, &mut rng, 20) {
                check_lexer(&m);
            }
        }
        // Random strings over the token alphabet.
        let alphabet = "abfinxe_.%@-0123456789xX()[]{},:=?\"\\;\n \t>é";
        let chars: Vec<char> = alphabet.chars().collect();
        for _ in 0..20000 {
            let n = rng.below(12);
            let s: String = (0..n).map(|_| chars[rng.below(chars.len())]).collect();
            check_lexer(&s);
        }
    }

    #[test]
    fn parser_matches_nom() {
        let mut rng = Rng(11);
        let (mut ok, mut total) = (0, 0);
        for (path, text) in corpus() {
            if !path.contains("/bad/") && !path.contains("fuzz") {
                assert!(check_parser(&text), "{path} takes the fast path");
            } else {
                check_parser(&text);
            }
            for m in mutations(&text, &mut rng, 40) {
                total += 1;
                ok += usize::from(check_parser(&m));
            }
        }
        // The mutations exercise both outcomes.
        assert!(ok > total / 20 && ok < total, "{ok} of {total} mutations parsed");
    }

    #[test]
    fn assembler_matches_reference() {
        // Edge cases: empty input, a quoted module name, CRLF, tabs and comments, long and
        // hexadecimal integers, attribute and list forms, labels before instructions.
        for src in [
            "",
            "\n\n; only a comment\n",
            "module \"a \\\"b\\\"\"\r\nfunc @f() -> int {\r\n\t%x = int 999999999999999999 ; c\r\n\tret %x\r\n}\r\n",
            "func @f() -> (int, float) {\n  %a = int -9223372036854775808\n  %b = int 0x7fffffffffffffff\n  \
             %c = call @vm.iadd(%a, 1000000000000000000)\n  %d = float -nan(0x1)\n  ret %c, %d\n}\n",
            "const @w: f32[2] = [1, 2.5]\nconst @s: i64[1] = [-0x10]\nfunc @f(%x: f32[2]) {\n  \
             call @onnx.Relu(%x) -> (%x) {\n    a = [1,\n 2], b = 0.5, c = \"s\", d = []\n  }\n  ret\n}\n",
            "func @f(%n: int) {\nl0: l1:\n  br_if %n, l1, l2\nl2: ret\n}\n",
        ] {
            assert!(check_parser(src), "{src:?}");
            assert!(check_assembler(src, "t.rxa"), "{src:?}");
        }
        let mut rng = Rng(13);
        let (mut ok, mut total) = (0, 0);
        for (path, text) in corpus() {
            let fast = check_assembler(&text, &path);
            if path.contains("/examples/") || path.contains("/programs/") {
                // (`kernels.rxa` declares a kernel after its use: the reference path.)
                assert!(fast || path.ends_with("kernels.rxa"), "{path} takes the fast path");
            }
            for m in mutations(&text, &mut rng, 40) {
                total += 1;
                ok += usize::from(check_assembler(&m, &path));
            }
        }
        assert!(ok > total / 20 && ok < total, "{ok} of {total} mutations assembled");
    }

    #[test]
    fn forward_references() {
        // A call before the definition: resolved at the end (no integer literal argument).
        let src = "func @main(%x: float) -> float {\n  %y = call @f(%x, 2.5)\n  ret %y\n}\n\
                   func @f(%a: float, %b: float) -> float {\n  ret %a\n}\n";
        assert!(check_assembler(src, "t.rxa"));
        // With an integer literal argument the callee's parameter types matter: reference path.
        let src = "func @main(%x: float) -> float {\n  %y = call @f(%x, 2)\n  ret %y\n}\n\
                   func @f(%a: float, %b: float) -> float {\n  ret %a\n}\n";
        assert!(!check_assembler(src, "t.rxa"));
        assert!(crate::assemble(src, "t.rxa").is_ok());
        // A constant declared after its use: reference path.
        let src = "func @main() {\n  %c = const @w\n  ret\n}\nconst @w: f32[1] = [1.0]\n";
        assert!(!check_assembler(src, "t.rxa"));
        assert!(crate::assemble_unverified(src, "t.rxa").is_ok());
        // Never defined: the reference path reports it.
        let src = "func @main() {\n  call @g()\n  ret\n}\n";
        assert!(!check_assembler(src, "t.rxa"));
    }
}
