//! The `.rxa` parser: nom 8 combinators over the token slice produced by [`crate::lexer`].
//!
//! [`Toks`] implements nom's [`Input`] trait for a window of the token slice. Error
//! reporting uses the classic "furthest failure" rule: every primitive that fails records
//! what it expected at its token position in a [`Tracker`] shared by all copies of the
//! input; when the parse fails, the error is reported at the furthest position any parser
//! reached, listing everything that was expected there (which also covers alternatives that
//! `opt`/`many0` swallow). `cut` marks points after which alternatives are not retried.
//!
//! It is the only parser, for valid and invalid programs alike. [`parse`] reads a whole
//! file; the assembler reads one declaration at a time ([`parse_start`], [`parse_item`])
//! from a window of tokens ([`TokenStream`]): a rule that runs out of tokens before the
//! end of the source returns `nom::Err::Incomplete`, and the declaration is parsed again
//! with a larger window. The rules are written for speed on valid programs: the input is
//! two words, a rule with alternatives looks at the next token's kind (or the mnemonic's
//! opcode) instead of trying each, and failures only record what was expected.

use crate::ast::*;
use crate::diag::Diagnostic;
use crate::lexer::{lex, lex_into, Tok, TokKind};
use crate::syntax;
use bumpalo::Bump;
use nom::branch::alt;
use nom::combinator::{cut, map, opt};
use nom::error::{ErrorKind, ParseError};
use nom::sequence::{delimited, preceded, terminated};
use nom::{IResult, Input, Needed, Parser};
use rxvm_vm::bytecode::Opcode;
use rxvm_vm::types::Kind;
use smallvec::SmallVec;
use std::cell::Cell;

// ---------------------------------------------------------------- input and errors

/// Room for what is expected at one position, duplicates included (at most a few dozen).
const MAX_EXPECTED: usize = 64;

/// Shared record of the furthest failure. Holds no heap data (it lives in the arena).
pub struct Tracker {
    furthest: Cell<usize>,
    len: Cell<usize>,
    expected: [Cell<Exp>; MAX_EXPECTED],
    custom: Cell<Option<(Custom, Span)>>,
    /// The `{` of an attribute block being parsed (set after `{`, cleared after `}`), so
    /// that an error inside an unclosed block can point back at it.
    open_block: Cell<Option<Span>>,
}

/// Errors detected by the parser that are not "expected X".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Custom {
    ModuleNotFirst,
    /// A list longer than its count's encoding allows, at its first element too many.
    TooMany(Limit),
}

/// The most elements a list may have: its count is stored in `bits` bits. The parser stops
/// at the first element past it, so that a huge list costs neither the time to read the
/// rest of it nor the memory to hold it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Limit {
    what: &'static str,
    bits: u8,
}

impl Limit {
    const fn max(self) -> usize {
        (1usize << self.bits) - 1
    }
}

const DIMS: Limit = Limit { what: "dimensions", bits: 8 };
const DSTS: Limit = Limit { what: "destinations", bits: 8 };
const ARGS: Limit = Limit { what: "arguments", bits: 16 };
const RET_VALUES: Limit = Limit { what: "return values", bits: 16 };
const OP_INPUTS: Limit = Limit { what: "operator inputs", bits: 16 };
const OP_OUTPUTS: Limit = Limit { what: "operator outputs", bits: 8 };
const KERNEL_ARGS: Limit = Limit { what: "kernel arguments", bits: 16 };
const GLOBAL_SIZES: Limit = Limit { what: "global sizes", bits: 8 };

impl Default for Tracker {
    fn default() -> Tracker {
        Tracker {
            furthest: Cell::new(0),
            len: Cell::new(0),
            expected: std::array::from_fn(|_| Cell::new(Exp::Text(""))),
            custom: Cell::new(None),
            open_block: Cell::new(None),
        }
    }
}

/// Something expected: a description, or a word of the language (shown in backquotes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exp {
    Text(&'static str),
    Word(&'static str),
}

impl Exp {
    fn show(self) -> String {
        match self {
            Exp::Text(t) => t.to_string(),
            Exp::Word(w) => format!("`{w}`"),
        }
    }
}

impl From<&'static str> for Exp {
    fn from(t: &'static str) -> Exp {
        Exp::Text(t)
    }
}

impl Tracker {
    fn record(&self, pos: usize, what: impl Into<Exp>) {
        let what = what.into();
        let f = self.furthest.get();
        if pos > f || self.len.get() == 0 {
            self.furthest.set(pos);
            self.len.set(0);
        } else if pos < f {
            return;
        }
        // Duplicates are removed when the list is read: this runs on the success path too
        // (`opt`, the end of a list), the error only once.
        let n = self.len.get();
        if let Some(slot) = self.expected.get(n) {
            slot.set(what);
            self.len.set(n + 1);
        }
    }

    /// What was expected at the furthest position, each once, in the order recorded.
    fn expected(&self) -> Vec<String> {
        let mut seen: Vec<Exp> = Vec::new();
        for e in &self.expected[..self.len.get()] {
            if !seen.contains(&e.get()) {
                seen.push(e.get());
            }
        }
        seen.into_iter().map(Exp::show).collect()
    }
}

/// What every copy of the input shares: the tokens, whether they reach the end of the
/// source, and the failure record. Lives in the arena.
pub struct Cx<'a> {
    all: &'a [Tok<'a>],
    /// The tokens reach the end of the source. When they do not (the parser reads a window
    /// of a longer token stream), a rule that runs out of tokens asks for more
    /// (`nom::Err::Incomplete`) instead of failing.
    complete: bool,
    track: Tracker,
}

/// A window `all[start..end]` of the token slice; the nom input type. Two words: a pointer
/// to the shared [`Cx`] and two 32-bit indices.
#[derive(Clone, Copy)]
pub struct Toks<'a> {
    cx: &'a Cx<'a>,
    start: u32,
    end: u32,
}

impl<'a> Toks<'a> {
    fn new(cx: &'a Cx<'a>) -> Toks<'a> {
        // (Token counts are below the source length, which the lexer keeps below 4 GiB.)
        Toks { cx, start: 0, end: cx.all.len() as u32 }
    }

    fn slice(&self) -> &'a [Tok<'a>] {
        self.cx.all.get(self.start as usize..self.end as usize).unwrap_or(&[])
    }

    #[inline]
    fn first(&self) -> Option<&'a Tok<'a>> {
        if self.start < self.end {
            self.cx.all.get(self.start as usize)
        } else {
            None
        }
    }

    fn peek(&self, n: usize) -> Option<&'a Tok<'a>> {
        self.slice().get(n)
    }

    #[inline]
    fn advance(self, n: usize) -> Toks<'a> {
        Toks { start: (self.start as usize + n).min(self.end as usize) as u32, ..self }
    }

    fn pos(&self) -> usize {
        self.start as usize
    }

    fn track(&self) -> &'a Tracker {
        &self.cx.track
    }

    /// Fewer than `n` tokens are left, and more may follow in the source.
    #[inline]
    fn short(&self, n: usize) -> bool {
        (self.end - self.start) < n as u32 && !self.cx.complete
    }

    /// End of the last token consumed before this point.
    fn prev_end(&self) -> usize {
        match (self.start as usize).checked_sub(1).and_then(|i| self.cx.all.get(i)) {
            Some(t) => t.span().end,
            None => 0,
        }
    }

    /// Records that `what` was expected here and fails (recoverably); at the end of an
    /// incomplete window, asks for more tokens instead.
    #[inline]
    fn fail<T>(&self, what: impl Into<Exp>) -> PResult<'a, T> {
        if self.short(1) {
            return Err(nom::Err::Incomplete(Needed::Unknown));
        }
        self.track().record(self.pos(), what.into());
        Err(nom::Err::Error(PErr))
    }

    /// Records every item of `what` as expected here and fails (as [`Toks::fail`]).
    fn fail_all<T>(&self, what: &[Exp]) -> PResult<'a, T> {
        if self.short(1) {
            return Err(nom::Err::Incomplete(Needed::Unknown));
        }
        for w in what {
            self.track().record(self.pos(), *w);
        }
        Err(nom::Err::Error(PErr))
    }
}

impl std::fmt::Debug for Toks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.slice().iter().map(|t| t.text)).finish()
    }
}

impl<'a> Input for Toks<'a> {
    type Item = &'a Tok<'a>;
    type Iter = std::slice::Iter<'a, Tok<'a>>;
    type IterIndices = std::iter::Enumerate<std::slice::Iter<'a, Tok<'a>>>;

    fn input_len(&self) -> usize {
        (self.end - self.start) as usize
    }
    fn take(&self, index: usize) -> Self {
        Toks { end: (self.start as usize + index).min(self.end as usize) as u32, ..*self }
    }
    fn take_from(&self, index: usize) -> Self {
        self.advance(index)
    }
    fn take_split(&self, index: usize) -> (Self, Self) {
        (self.take_from(index), self.take(index))
    }
    fn position<P>(&self, predicate: P) -> Option<usize>
    where
        P: Fn(Self::Item) -> bool,
    {
        self.slice().iter().position(predicate)
    }
    fn iter_elements(&self) -> Self::Iter {
        self.slice().iter()
    }
    fn iter_indices(&self) -> Self::IterIndices {
        self.slice().iter().enumerate()
    }
    fn slice_index(&self, count: usize) -> Result<usize, Needed> {
        if count <= self.input_len() {
            Ok(count)
        } else {
            Err(Needed::new(count - self.input_len()))
        }
    }
}

/// The parse error. All information lives in the [`Tracker`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PErr;

impl<'a> ParseError<Toks<'a>> for PErr {
    fn from_error_kind(_input: Toks<'a>, _kind: ErrorKind) -> Self {
        PErr
    }
    fn append(_input: Toks<'a>, _kind: ErrorKind, other: Self) -> Self {
        other
    }
}

type PResult<'a, T> = IResult<Toks<'a>, T, PErr>;

// ---------------------------------------------------------------- primitives

fn tok<'a>(kind: TokKind, what: &'static str) -> impl Fn(Toks<'a>) -> PResult<'a, Tok<'a>> {
    move |i: Toks<'a>| match i.first() {
        Some(t) if t.kind == kind => Ok((i.advance(1), *t)),
        _ => i.fail(what),
    }
}

/// A token of kind `kind` (no closure: the hot rules call it directly).
#[inline]
fn tok_of(i: Toks<'_>, kind: TokKind) -> PResult<'_, Tok<'_>> {
    match i.first() {
        Some(t) if t.kind == kind => Ok((i.advance(1), *t)),
        _ => i.fail(kind.describe()),
    }
}

fn punct<'a>(kind: TokKind) -> impl Fn(Toks<'a>) -> PResult<'a, Tok<'a>> {
    tok(kind, kind.describe())
}

/// The keyword `word`; `what` is how it is shown, e.g. "`func`".
fn kw<'a>(word: &'static str, what: &'static str) -> impl Fn(Toks<'a>) -> PResult<'a, Tok<'a>> {
    move |i: Toks<'a>| match i.first() {
        Some(t) if t.kind == TokKind::Ident && t.text == word => Ok((i.advance(1), *t)),
        _ => i.fail(what),
    }
}

fn name_of(t: Tok<'_>, sigil: bool) -> Name<'_> {
    let text = if sigil { t.text.get(1..).unwrap_or("") } else { t.text };
    Name { text, span: t.span() }
}

#[inline]
fn reg(i: Toks<'_>) -> PResult<'_, Name<'_>> {
    let (i, t) = tok_of(i, TokKind::Reg)?;
    Ok((i, name_of(t, true)))
}

fn global<'a>(what: &'static str) -> impl Fn(Toks<'a>) -> PResult<'a, Name<'a>> {
    move |i| map(tok(TokKind::Global, what), |t| name_of(t, true)).parse(i)
}

fn ident<'a>(what: &'static str) -> impl Fn(Toks<'a>) -> PResult<'a, Name<'a>> {
    move |i| map(tok(TokKind::Ident, what), |t| name_of(t, false)).parse(i)
}

/// Any number of newlines (never fails, records nothing: blank lines are not worth
/// listing among the alternatives).
fn nls(i: Toks<'_>) -> PResult<'_, ()> {
    let n = i.slice().iter().take_while(|t| t.kind == TokKind::Newline).count();
    Ok((i.advance(n), ()))
}

fn end_of_file(i: Toks<'_>) -> PResult<'_, ()> {
    if i.input_len() == 0 && i.cx.complete {
        Ok((i, ()))
    } else {
        i.fail("end of file")
    }
}

/// The end of a statement: a newline, or the end of the file (reported as "newline").
fn stmt_end(i: Toks<'_>) -> PResult<'_, ()> {
    match i.first() {
        None if i.cx.complete => Ok((i, ())),
        Some(t) if t.kind == TokKind::Newline => Ok((i.advance(1), ())),
        _ => i.fail("newline"),
    }
}

/// Parses the text of an integer token; `None` when it does not fit an `i128`.
pub fn int_value(text: &str) -> Option<i128> {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text),
    };
    // Fast path: up to 18 decimal digits cannot overflow a u64 (one pass; anything else,
    // hexadecimal above all, takes the general loop).
    if !digits.is_empty() && digits.len() <= 18 {
        let mut v = 0u64;
        let mut decimal = true;
        for b in digits.bytes() {
            let d = b.wrapping_sub(b'0');
            decimal &= d <= 9;
            v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        }
        if decimal {
            let v = v as i128;
            return Some(if neg { -v } else { v });
        }
    }
    let (radix, digits) = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(h) => (16, h),
        None => (10, digits),
    };
    let mut v: i128 = 0;
    for c in digits.chars() {
        let d = c.to_digit(radix)? as i128;
        v = v.checked_mul(radix as i128)?.checked_add(d)?;
    }
    Some(if neg { -v } else { v })
}

/// Parses the text of a float token.
pub fn float_value(text: &str) -> FloatVal {
    let (negative, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text),
    };
    if let Some(rest) = body.strip_prefix("nan") {
        let payload = rest
            .strip_prefix("(")
            .and_then(|r| r.strip_suffix(")"))
            .map(|h| int_value(h).map_or(u64::MAX, |v| u64::try_from(v).unwrap_or(u64::MAX)));
        return FloatVal::Nan { negative, payload };
    }
    FloatVal::Num(text.parse::<f64>().unwrap_or(f64::NAN))
}

#[inline]
fn int_of(t: &Tok<'_>) -> IntLit {
    IntLit { value: int_value(t.text), span: t.span() }
}

fn float_of<'a>(t: &Tok<'a>) -> FloatLit<'a> {
    FloatLit { text: t.text, value: float_value(t.text), span: t.span() }
}

fn int_lit(i: Toks<'_>) -> PResult<'_, IntLit> {
    let (i, t) = tok(TokKind::Int, "integer")(i)?;
    Ok((i, int_of(&t)))
}

const NUMBER: [Exp; 2] = [Exp::Text("integer"), Exp::Text("float")];

/// An integer or a float (one token: the alternatives are chosen by its kind).
fn number(i: Toks<'_>) -> PResult<'_, Number<'_>> {
    match i.first() {
        Some(t) if t.kind == TokKind::Int => Ok((i.advance(1), Number::Int(int_of(t)))),
        Some(t) if t.kind == TokKind::Float => Ok((i.advance(1), Number::Float(float_of(t)))),
        _ => i.fail_all(&NUMBER),
    }
}

fn string(i: Toks<'_>) -> PResult<'_, StrLit<'_>> {
    map(tok(TokKind::Str, "string"), |t| StrLit { raw: t.text, span: t.span() }).parse(i)
}

const OPERAND: [Exp; 4] =
    [Exp::Text("`%register`"), Exp::Text("integer"), Exp::Text("float"), Exp::Text("`@constant`")];

/// An argument: register, integer, float or constant.
fn operand(i: Toks<'_>) -> PResult<'_, Operand<'_>> {
    let Some(t) = i.first() else { return i.fail_all(&OPERAND) };
    let o = match t.kind {
        TokKind::Reg => Operand::Reg(name_of(*t, true)),
        TokKind::Int => Operand::Int(int_of(t)),
        TokKind::Float => Operand::Float(float_of(t)),
        TokKind::Global => Operand::Const(name_of(*t, true)),
        _ => return i.fail_all(&OPERAND),
    };
    Ok((i.advance(1), o))
}

const INT_OPERAND: [Exp; 2] = [Exp::Text("`%register`"), Exp::Text("integer")];

/// An integer operand: register or integer literal.
#[inline]
fn int_operand(i: Toks<'_>) -> PResult<'_, Operand<'_>> {
    match i.first() {
        Some(t) if t.kind == TokKind::Reg => Ok((i.advance(1), Operand::Reg(name_of(*t, true)))),
        Some(t) if t.kind == TokKind::Int => Ok((i.advance(1), Operand::Int(int_of(t)))),
        _ => i.fail_all(&INT_OPERAND),
    }
}

/// `elem (, elem)*` with newlines allowed after each comma, appended to `out`; after a
/// comma the element is required (cut). With `allow_empty`, zero elements are accepted.
/// With a `limit`, an element past it is an error (cut), found as soon as it is read.
/// (The list is built in the caller's buffer: returning it through the combinators would
/// copy it at every level.)
fn list_into<'a, O, F>(
    elem: &mut F,
    allow_empty: bool,
    limit: Option<Limit>,
    i: Toks<'a>,
    out: &mut SmallVec<[O; 8]>,
) -> PResult<'a, ()>
where
    F: Parser<Toks<'a>, Output = O, Error = PErr>,
{
    let max = limit.map_or(usize::MAX, Limit::max);
    let mut i = match elem.parse(i) {
        Ok((rest, o)) => {
            out.push(o);
            rest
        }
        Err(nom::Err::Error(_)) if allow_empty => return Ok((i, ())),
        Err(e) => return Err(e),
    };
    loop {
        let after_comma = match tok_of(i, TokKind::Comma) {
            Ok((after, _)) => after,
            Err(nom::Err::Error(_)) => return Ok((i, ())),
            Err(e) => return Err(e),
        };
        let (after_nl, ()) = nls(after_comma)?;
        match elem.parse(after_nl) {
            Ok((rest, _)) if out.len() >= max => {
                if let (Some(l), Some(t)) = (limit, after_nl.first()) {
                    let span = Span::new(t.span().start, rest.prev_end());
                    after_nl.track().custom.set(Some((Custom::TooMany(l), span)));
                }
                return Err(nom::Err::Failure(PErr));
            }
            Ok((rest, o)) => {
                out.push(o);
                i = rest;
            }
            Err(nom::Err::Error(e)) => return Err(nom::Err::Failure(e)),
            Err(e) => return Err(e),
        }
    }
}

/// [`list_into`], copied into the arena.
fn comma_list<'a, O, F>(
    ar: &'a Bump,
    mut elem: F,
    allow_empty: bool,
    limit: Option<Limit>,
) -> impl FnMut(Toks<'a>) -> PResult<'a, &'a [O]>
where
    O: Copy,
    F: Parser<Toks<'a>, Output = O, Error = PErr>,
{
    move |i: Toks<'a>| {
        let mut out = SmallVec::new();
        let (i, ()) = list_into(&mut elem, allow_empty, limit, i, &mut out)?;
        Ok((i, &*ar.alloc_slice_copy(&out)))
    }
}

/// `open elem, elem, ... close` (possibly empty), newlines allowed inside. The element
/// list is copied into the arena.
fn bracketed<'a, O, F>(
    ar: &'a Bump,
    open: TokKind,
    elem: F,
    close: TokKind,
) -> impl FnMut(Toks<'a>) -> PResult<'a, &'a [O]>
where
    O: Copy,
    F: Parser<Toks<'a>, Output = O, Error = PErr>,
{
    bracketed_max(ar, open, elem, close, None)
}

/// [`bracketed`], with at most `limit` elements.
fn bracketed_max<'a, O, F>(
    ar: &'a Bump,
    open: TokKind,
    mut elem: F,
    close: TokKind,
    limit: Option<Limit>,
) -> impl FnMut(Toks<'a>) -> PResult<'a, &'a [O]>
where
    O: Copy,
    F: Parser<Toks<'a>, Output = O, Error = PErr>,
{
    move |i| {
        let (i, _) = tok_of(i, open)?;
        let (i, ()) = nls(i)?;
        let mut out = SmallVec::new();
        let (i, ()) = list_into(&mut elem, true, limit, i, &mut out)?;
        let (i, ()) = nls(i)?;
        let (i, _) = cut(|i| tok_of(i, close)).parse(i)?;
        Ok((i, &*ar.alloc_slice_copy(&out)))
    }
}

// ---------------------------------------------------------------- types

/// The type written `word`, when it is not a tensor type (`int`, `float`, `shape`,
/// `storage`, `tensor`): the VM's value kinds ([`syntax::type_keywords`]).
pub(crate) fn simple_type(word: &str) -> Option<TypeKind<'static>> {
    let (_, kind) = syntax::type_keywords().find(|(w, _)| *w == word)?;
    Some(match kind {
        Kind::Int => TypeKind::Int,
        Kind::Float => TypeKind::Float,
        Kind::Shape => TypeKind::Shape,
        Kind::Storage => TypeKind::Storage,
        Kind::Tensor => TypeKind::AnyTensor,
    })
}

/// Fails where a type was expected: the type keywords, or a tensor type.
fn not_a_type<T>(i: Toks<'_>) -> PResult<'_, T> {
    if !i.short(1) {
        for (word, _) in syntax::type_keywords() {
            i.track().record(i.pos(), Exp::Word(word));
        }
    }
    i.fail("tensor type (e.g. `f32[4, ?]`)")
}

const DIM: [Exp; 3] = [Exp::Text("integer"), Exp::Text("`?`"), Exp::Text("`%symbol`")];

fn dim_expr(i: Toks<'_>) -> PResult<'_, DimExpr<'_>> {
    match i.first() {
        Some(t) if t.kind == TokKind::Int => Ok((i.advance(1), DimExpr::Known(int_of(t)))),
        Some(t) if t.kind == TokKind::Question => Ok((i.advance(1), DimExpr::Any(t.span()))),
        Some(t) if t.kind == TokKind::Reg => Ok((i.advance(1), DimExpr::Sym(name_of(*t, true)))),
        _ => i.fail_all(&DIM),
    }
}

fn type_expr<'a>(ar: &'a Bump) -> impl FnMut(Toks<'a>) -> PResult<'a, TypeExpr<'a>> {
    move |i: Toks<'a>| {
        let Some(t) = i.first().filter(|t| t.kind == TokKind::Ident) else {
            return not_a_type(i);
        };
        if let Some(kind) = simple_type(t.text) {
            return Ok((i.advance(1), TypeExpr { kind, span: t.span() }));
        }
        if i.short(2) {
            return Err(nom::Err::Incomplete(Needed::Unknown));
        }
        let next_is_bracket = i.peek(1).is_some_and(|n| n.kind == TokKind::LBracket);
        if !next_is_bracket && rxvm_vm::types::DType::from_name(t.text).is_none() {
            return not_a_type(i);
        }
        let dtype = name_of(*t, false);
        let (rest, dims) =
            cut(bracketed_max(ar, TokKind::LBracket, dim_expr, TokKind::RBracket, Some(DIMS))).parse(i.advance(1))?;
        let span = Span::new(t.span().start, rest.prev_end());
        Ok((rest, TypeExpr { kind: TypeKind::Tensor { dtype, dims }, span }))
    }
}

/// `where %n <= 8, %s <= 512` after a function's results.
fn where_clause<'a>(ar: &'a Bump) -> impl FnMut(Toks<'a>) -> PResult<'a, &'a [SymBound<'a>]> {
    move |i: Toks<'a>| {
        let (i, _) = kw("where", "`where`")(i)?;
        let bound = |i: Toks<'a>| -> PResult<'a, SymBound<'a>> {
            let (i, sym) = reg(i)?;
            let (i, _) = punct(TokKind::Le)(i)?;
            let (i, max) = int_lit(i)?;
            Ok((i, SymBound { sym, max }))
        };
        cut(comma_list(ar, bound, false, None)).parse(i)
    }
}

/// `-> T` or `-> (T, ...)`.
fn results<'a>(ar: &'a Bump) -> impl FnMut(Toks<'a>) -> PResult<'a, &'a [TypeExpr<'a>]> {
    move |i| {
        preceded(
            punct(TokKind::Arrow),
            cut(alt((
                bracketed(ar, TokKind::LParen, type_expr(ar), TokKind::RParen),
                map(type_expr(ar), |t| &*ar.alloc_slice_copy(&[t])),
            ))),
        )
        .parse(i)
    }
}

// ---------------------------------------------------------------- instructions

/// A mnemonic ([`syntax::mnemonics`], from the opcode table). After `=` only the
/// value-producing ones are listed as expected, but any is accepted (the assembler explains
/// what is wrong with the destinations).
fn mnemonic(with_dsts: bool) -> impl Fn(Toks<'_>) -> PResult<'_, (Name<'_>, Opcode)> {
    move |i| {
        if let Some(t) = i.first() {
            if t.kind == TokKind::Ident {
                if let Some(m) = syntax::mnemonic(t.text) {
                    return Ok((i.advance(1), (name_of(*t, false), m.op)));
                }
            }
        }
        if i.short(1) {
            return Err(nom::Err::Incomplete(Needed::Unknown));
        }
        for m in syntax::mnemonics() {
            if m.form.writes || !with_dsts {
                i.track().record(i.pos(), Exp::Word(m.text));
            }
        }
        Err(nom::Err::Error(PErr))
    }
}

fn comma(i: Toks<'_>) -> PResult<'_, Tok<'_>> {
    punct(TokKind::Comma)(i)
}

fn label_ref(i: Toks<'_>) -> PResult<'_, Name<'_>> {
    ident("label")(i)
}

fn scope_clause(i: Toks<'_>) -> PResult<'_, Option<StrLit<'_>>> {
    opt(preceded((comma, kw("scope", "`scope`")), cut(string))).parse(i)
}

/// The operands of an instruction, by the opcode its mnemonic names (the first of those
/// that share it: all calls are written `call`).
fn operands<'a>(ar: &'a Bump, op: Opcode, i: Toks<'a>) -> PResult<'a, InstrKind<'a>> {
    match op {
        Opcode::Nop => Ok((i, InstrKind::Nop)),
        Opcode::Mov => map(reg, |src| InstrKind::Mov { src }).parse(i),
        Opcode::LoadInt => map(int_lit, |value| InstrKind::Int { value }).parse(i),
        Opcode::LoadFloat => map(number, |value| InstrKind::Float(ar.alloc(FloatOps { value }))).parse(i),
        Opcode::LoadConst => map(global("`@constant`"), |konst| InstrKind::Const { konst }).parse(i),
        Opcode::MakeShape => {
            map(bracketed_max(ar, TokKind::LBracket, int_operand, TokKind::RBracket, Some(DIMS)), |dims| {
                InstrKind::Shape { dims }
            })
            .parse(i)
        }
        Opcode::AllocStorage => {
            let (i, size) = int_operand(i)?;
            let (i, align) = opt(preceded((comma, kw("align", "`align`")), cut(int_operand))).parse(i)?;
            let (i, device) = opt(preceded((comma, kw("device", "`device`")), cut(int_lit))).parse(i)?;
            let (i, scope) = scope_clause(i)?;
            Ok((i, InstrKind::AllocStorage(ar.alloc(AllocStorageOps { size, align, device, scope }))))
        }
        Opcode::AllocTensor => {
            let (i, storage) = reg(i)?;
            let (i, offset) = preceded(comma, int_operand).parse(i)?;
            let (i, dtype) = preceded(comma, ident("dtype (e.g. `f32`)")).parse(i)?;
            let (i, dims) = bracketed_max(ar, TokKind::LBracket, int_operand, TokKind::RBracket, Some(DIMS))(i)?;
            let (i, scope) = scope_clause(i)?;
            Ok((i, InstrKind::AllocTensor(ar.alloc(AllocTensorOps { storage, offset, dtype, dims, scope }))))
        }
        Opcode::Kill => map(reg, |reg| InstrKind::Kill { reg }).parse(i),
        Opcode::Call | Opcode::CallBuiltin | Opcode::CallOp | Opcode::CallOpAlloc | Opcode::CallKernel => {
            let (i, callee) = global("`@function`")(i)?;
            if callee.text.starts_with("onnx.") {
                return op_call(ar, callee, i);
            }
            if callee.text.starts_with("cl.") {
                return kernel_call(ar, callee, i);
            }
            let (i, args) = bracketed_max(ar, TokKind::LParen, operand, TokKind::RParen, Some(ARGS))(i)?;
            Ok((i, InstrKind::Call { callee, args }))
        }
        Opcode::Ret => {
            let (i, values) = comma_list(ar, operand, true, Some(RET_VALUES))(i)?;
            Ok((i, InstrKind::Ret { values }))
        }
        Opcode::Br => map(label_ref, |target| InstrKind::Br { target }).parse(i),
        Opcode::BrIf => {
            let (i, cond) = reg(i)?;
            let (i, then_) = preceded(comma, label_ref).parse(i)?;
            let (i, else_) = preceded(comma, label_ref).parse(i)?;
            Ok((i, InstrKind::BrIf(ar.alloc(BrIfOps { cond, then_, else_ }))))
        }
    }
}

/// An operator input: register, constant or `none`.
const OP_INPUT: [Exp; 3] = [Exp::Text("`%register`"), Exp::Text("`@constant`"), Exp::Word("none")];

fn op_input(i: Toks<'_>) -> PResult<'_, Operand<'_>> {
    match i.first() {
        Some(t) if t.kind == TokKind::Reg => Ok((i.advance(1), Operand::Reg(name_of(*t, true)))),
        Some(t) if t.kind == TokKind::Global => Ok((i.advance(1), Operand::Const(name_of(*t, true)))),
        Some(t) if t.kind == TokKind::Ident && t.text == "none" => Ok((i.advance(1), Operand::None(t.span()))),
        _ => i.fail_all(&OP_INPUT),
    }
}

/// An operator output. Only registers are valid (and listed as expected); `none` and
/// constants are accepted here so that the assembler can say why they are wrong.
fn op_output(i: Toks<'_>) -> PResult<'_, Operand<'_>> {
    match i.first() {
        Some(t) if t.kind == TokKind::Reg => Ok((i.advance(1), Operand::Reg(name_of(*t, true)))),
        Some(t) if t.kind == TokKind::Global => Ok((i.advance(1), Operand::Const(name_of(*t, true)))),
        Some(t) if t.kind == TokKind::Ident && t.text == "none" => Ok((i.advance(1), Operand::None(t.span()))),
        _ => i.fail("`%register`"),
    }
}

fn attr_value<'a>(ar: &'a Bump) -> impl FnMut(Toks<'a>) -> PResult<'a, AttrExpr<'a>> {
    move |i: Toks<'a>| {
        const ATTR_VALUE: [Exp; 4] = [Exp::Text("integer"), Exp::Text("float"), Exp::Text("string"), Exp::Text("`[`")];
        let Some(t) = i.first() else { return i.fail_all(&ATTR_VALUE) };
        let v = match t.kind {
            TokKind::Int => AttrExpr::Int(int_of(t)),
            TokKind::Float => AttrExpr::Float(float_of(t)),
            TokKind::Str => AttrExpr::Str(StrLit { raw: t.text, span: t.span() }),
            TokKind::LBracket => {
                let (rest, elems) = bracketed(ar, TokKind::LBracket, number, TokKind::RBracket)(i)?;
                let span = Span::new(t.span().start, rest.prev_end());
                return Ok((rest, AttrExpr::List { elems, span }));
            }
            _ => return i.fail_all(&ATTR_VALUE),
        };
        Ok((i.advance(1), v))
    }
}

/// `name = value`
fn attr_node<'a>(ar: &'a Bump) -> impl FnMut(Toks<'a>) -> PResult<'a, AttrNode<'a>> {
    move |i| {
        let (i, name) = ident("attribute name")(i)?;
        let (i, value) = cut(preceded(punct(TokKind::Eq), attr_value(ar))).parse(i)?;
        Ok((i, AttrNode { name, value }))
    }
}

/// `{ name = value, ... }`, possibly empty; newlines allowed after `{` and `,` and before
/// `}`.
fn attr_block<'a>(ar: &'a Bump) -> impl FnMut(Toks<'a>) -> PResult<'a, AttrBlock<'a>> {
    move |i: Toks<'a>| {
        let (i, open) = punct(TokKind::LBrace)(i)?;
        i.track().open_block.set(Some(open.span()));
        let (i, ()) = nls(i)?;
        let (i, attrs) = cut(comma_list(ar, attr_node(ar), true, None)).parse(i)?;
        let (i, ()) = nls(i)?;
        let (i, _) = cut(punct(TokKind::RBrace)).parse(i)?;
        i.track().open_block.set(None);
        let span = Span::new(open.span().start, i.prev_end());
        Ok((i, AttrBlock { attrs, span }))
    }
}

/// The rest of `call @onnx.Name`: `(inputs) [-> (outputs)] [{ attributes }]`.
fn op_call<'a>(ar: &'a Bump, op: Name<'a>, i: Toks<'a>) -> PResult<'a, InstrKind<'a>> {
    let (i, inputs) = bracketed_max(ar, TokKind::LParen, op_input, TokKind::RParen, Some(OP_INPUTS))(i)?;
    let (i, outs) = opt((
        punct(TokKind::Arrow),
        cut(bracketed_max(ar, TokKind::LParen, op_output, TokKind::RParen, Some(OP_OUTPUTS))),
    ))
    .parse(i)?;
    let (i, attrs) = opt(attr_block(ar)).parse(i)?;
    let (arrow, outputs) = match outs {
        Some((a, o)) => (Some(a.span()), o),
        None => (None, &[][..]),
    };
    Ok((i, InstrKind::OpCall(ar.alloc(OpCallOps { op, inputs, outputs, arrow, attrs }))))
}

/// The rest of `call @cl.name`: `(args) global [d0, ...]`. The `global` clause is
/// optional here so that the assembler can explain a missing one.
fn kernel_call<'a>(ar: &'a Bump, kernel: Name<'a>, i: Toks<'a>) -> PResult<'a, InstrKind<'a>> {
    let (i, args) = bracketed_max(ar, TokKind::LParen, operand, TokKind::RParen, Some(KERNEL_ARGS))(i)?;
    let (i, global) = opt((
        kw("global", "`global`"),
        cut(bracketed_max(ar, TokKind::LBracket, int_operand, TokKind::RBracket, Some(GLOBAL_SIZES))),
    ))
    .parse(i)?;
    let global = global.map(|(kw_tok, dims)| GlobalClause { dims, span: Span::new(kw_tok.span().start, i.prev_end()) });
    Ok((i, InstrKind::KernelCall(ar.alloc(KernelCallOps { kernel, args, global }))))
}

/// `[%d, ... =] mnemonic operands`, allocated in the arena (an instruction node is a few
/// hundred bytes: it is built in place rather than returned by value).
fn instr<'a>(ar: &'a Bump, i: Toks<'a>) -> PResult<'a, &'a InstrNode<'a>> {
    let start = i.first().map_or(0, |t| t.start as usize);
    let (i, dsts) = opt(terminated(comma_list(ar, reg, false, Some(DSTS)), punct(TokKind::Eq))).parse(i)?;
    let (i, (mnem, op)) = match &dsts {
        Some(_) => cut(mnemonic(true)).parse(i)?,
        None => mnemonic(false)(i)?,
    };
    let (i, kind) = match operands(ar, op, i) {
        Ok(r) => r,
        // (`cut`: after the mnemonic, no alternative.)
        Err(nom::Err::Error(e)) => return Err(nom::Err::Failure(e)),
        Err(e) => return Err(e),
    };
    let dsts: &'a [Name<'a>] = dsts.unwrap_or(&[]);
    let span = Span::new(start, i.prev_end());
    Ok((i, &*ar.alloc(InstrNode { dsts, mnemonic: mnem, kind, span })))
}

/// `name:` (checks both tokens before committing, so that an unknown mnemonic is not
/// reported as a missing `:`).
fn label_def(i: Toks<'_>) -> PResult<'_, Name<'_>> {
    if i.short(2) {
        return Err(nom::Err::Incomplete(Needed::Unknown));
    }
    match (i.peek(0), i.peek(1)) {
        (Some(t), Some(c)) if t.kind == TokKind::Ident && c.kind == TokKind::Colon => {
            Ok((i.advance(2), name_of(*t, false)))
        }
        _ => i.fail("label"),
    }
}

fn body<'a>(ar: &'a Bump) -> impl FnMut(Toks<'a>) -> PResult<'a, &'a [BodyItem<'a>]> {
    move |mut i: Toks<'a>| {
        // (Most functions have a few dozen instructions.)
        let mut items: SmallVec<[BodyItem<'a>; 32]> = SmallVec::new();
        loop {
            let (rest, ()) = nls(i)?;
            i = rest;
            match label_def(i) {
                Ok((rest, l)) => {
                    items.push(BodyItem::Label(l));
                    i = rest;
                    continue;
                }
                Err(nom::Err::Error(_)) => {}
                Err(e) => return Err(e),
            }
            match instr(ar, i) {
                Ok((rest, ins)) => {
                    let (rest, ()) = cut(stmt_end).parse(rest)?;
                    items.push(BodyItem::Instr(ins));
                    i = rest;
                }
                Err(nom::Err::Error(_)) => return Ok((i, &*ar.alloc_slice_copy(&items))),
                Err(e) => return Err(e),
            }
        }
    }
}

// ---------------------------------------------------------------- declarations

/// `in %STORAGE at OFFSET` (after a parameter's type).
fn placement(i: Toks<'_>) -> PResult<'_, PlacementExpr<'_>> {
    let (i, in_kw) = kw("in", "`in`")(i)?;
    let (i, (storage, _, offset)) = cut((reg, kw("at", "`at`"), int_lit)).parse(i)?;
    Ok((i, PlacementExpr { storage, offset, span: in_kw.span().to(offset.span) }))
}

fn param<'a>(ar: &'a Bump) -> impl FnMut(Toks<'a>) -> PResult<'a, Param<'a>> {
    move |i| {
        let (i, name) = reg(i)?;
        let (i, ty) = cut(preceded(punct(TokKind::Colon), type_expr(ar))).parse(i)?;
        let (i, placement) = opt(placement).parse(i)?;
        Ok((i, Param { name, ty, placement }))
    }
}

fn func_decl<'a>(ar: &'a Bump) -> impl FnMut(Toks<'a>) -> PResult<'a, FuncDecl<'a>> {
    move |i: Toks<'a>| {
        let (i, kw_tok) = kw("func", "`func`")(i)?;
        let rest = move |i: Toks<'a>| -> PResult<'a, FuncDecl<'a>> {
            let (i, name) = global("`@name`")(i)?;
            let (i, params) = bracketed(ar, TokKind::LParen, param(ar), TokKind::RParen)(i)?;
            let (i, results) = opt(results(ar)).parse(i)?;
            let (i, bounds) = opt(where_clause(ar)).parse(i)?;
            let header_span = Span::new(kw_tok.span().start, i.prev_end());
            let (i, _) = punct(TokKind::LBrace)(i)?;
            let (i, body) = body(ar)(i)?;
            let (i, _) = punct(TokKind::RBrace)(i)?;
            let (results, bounds) = (results.unwrap_or(&[]), bounds.unwrap_or(&[]));
            Ok((i, FuncDecl { name, params, results, bounds, body, header_span }))
        };
        cut(rest).parse(i)
    }
}

fn elem(i: Toks<'_>) -> PResult<'_, Elem<'_>> {
    alt((
        map(number, Elem::Num),
        map(kw("true", "`true`"), |t| Elem::Bool(true, t.span())),
        map(kw("false", "`false`"), |t| Elem::Bool(false, t.span())),
    ))
    .parse(i)
}

fn const_init<'a>(ar: &'a Bump) -> impl FnMut(Toks<'a>) -> PResult<'a, ConstInit<'a>> {
    move |i: Toks<'a>| {
        let start = i.first().map_or(0, |t| t.start as usize);
        alt((
            map(bracketed(ar, TokKind::LBracket, elem, TokKind::RBracket), |elems| ConstInit::List {
                elems,
                span: Span::default(),
            }),
            map(
                preceded(kw("fill", "`fill`"), cut(delimited(punct(TokKind::LParen), number, punct(TokKind::RParen)))),
                ConstInit::Fill,
            ),
            map(
                preceded(kw("file", "`file`"), cut(delimited(punct(TokKind::LParen), string, punct(TokKind::RParen)))),
                ConstInit::File,
            ),
        ))
        .parse(i)
        .map(|(rest, init)| match init {
            ConstInit::List { elems, .. } => (rest, ConstInit::List { elems, span: Span::new(start, rest.prev_end()) }),
            other => (rest, other),
        })
    }
}

fn const_decl<'a>(ar: &'a Bump) -> impl FnMut(Toks<'a>) -> PResult<'a, ConstDecl<'a>> {
    move |i| {
        let (i, _) = kw("const", "`const`")(i)?;
        cut(|i| {
            let (i, name) = global("`@name`")(i)?;
            let (i, ty) = preceded(punct(TokKind::Colon), type_expr(ar)).parse(i)?;
            let (i, init) = preceded(punct(TokKind::Eq), const_init(ar)).parse(i)?;
            Ok((i, ConstDecl { name, ty, init }))
        })
        .parse(i)
    }
}

/// `"source"` or `file("path")`.
fn kernel_source(i: Toks<'_>) -> PResult<'_, KernelSource<'_>> {
    alt((
        map(string, KernelSource::Str),
        map(
            preceded(kw("file", "`file`"), cut(delimited(punct(TokKind::LParen), string, punct(TokKind::RParen)))),
            KernelSource::File,
        ),
    ))
    .parse(i)
}

/// `kernel @name = opencl("entry", source)`.
fn kernel_decl(i: Toks<'_>) -> PResult<'_, KernelDecl<'_>> {
    let (i, _) = kw("kernel", "`kernel`")(i)?;
    cut(|i| {
        let (i, name) = global("`@name`")(i)?;
        let (i, _) = (punct(TokKind::Eq), kw("opencl", "`opencl`"), punct(TokKind::LParen), nls).parse(i)?;
        let (i, entry) = string(i)?;
        let (i, _) = (punct(TokKind::Comma), nls).parse(i)?;
        let (i, source) = kernel_source(i)?;
        let (i, _) = (nls, punct(TokKind::RParen)).parse(i)?;
        Ok((i, KernelDecl { name, entry, source }))
    })
    .parse(i)
}

fn module_name(i: Toks<'_>) -> PResult<'_, ModuleName<'_>> {
    alt((map(ident("module name"), ModuleName::Ident), map(string, ModuleName::Str))).parse(i)
}

/// A `module` line that is not the first declaration.
fn misplaced_module(i: Toks<'_>) -> PResult<'_, ()> {
    match i.first() {
        Some(t) if t.kind == TokKind::Ident && t.text == "module" => {
            i.track().custom.set(Some((Custom::ModuleNotFirst, t.span())));
            Err(nom::Err::Failure(PErr))
        }
        _ => Err(nom::Err::Error(PErr)),
    }
}

/// A declaration at the top level of a module.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Item<'a> {
    Const(ConstDecl<'a>),
    Kernel(KernelDecl<'a>),
    Func(FuncDecl<'a>),
}

/// The optional `module NAME` line, after blank lines.
fn module_header(i: Toks<'_>) -> PResult<'_, Option<ModuleName<'_>>> {
    let (i, ()) = nls(i)?;
    opt(preceded(kw("module", "`module`"), cut(terminated(module_name, stmt_end)))).parse(i)
}

/// Blank lines, then a declaration and the end of its line, or the end of the file
/// (`None`).
fn next_item<'a>(ar: &'a Bump, i: Toks<'a>) -> PResult<'a, Option<Item<'a>>> {
    let (i, ()) = nls(i)?;
    let item = match i.first().filter(|t| t.kind == TokKind::Ident).map(|t| t.text) {
        // One alternative by keyword; any other token fails all of them (recording what
        // each expected).
        Some("const") => map(const_decl(ar), Item::Const).parse(i),
        Some("kernel") => map(kernel_decl, Item::Kernel).parse(i),
        Some("func") => map(func_decl(ar), Item::Func).parse(i),
        _ => alt((
            map(const_decl(ar), Item::Const),
            map(kernel_decl, Item::Kernel),
            map(func_decl(ar), Item::Func),
            map(misplaced_module, |()| unreachable_item()),
        ))
        .parse(i),
    };
    match item {
        Ok((rest, item)) => {
            let (rest, ()) = cut(stmt_end).parse(rest)?;
            Ok((rest, Some(item)))
        }
        Err(nom::Err::Error(_)) => {
            let (i, ()) = end_of_file(i)?;
            Ok((i, None))
        }
        Err(e) => Err(e),
    }
}

/// `misplaced_module` never succeeds; this gives its (absent) result a type.
#[cold]
fn unreachable_item<'a>() -> Item<'a> {
    Item::Const(ConstDecl {
        name: Name { text: "", span: Span::default() },
        ty: TypeExpr { kind: TypeKind::Int, span: Span::default() },
        init: ConstInit::List { elems: &[], span: Span::default() },
    })
}

/// The result of parsing a part of a token stream.
pub enum Step<T> {
    /// Parsed, using this many tokens.
    Done(usize, T),
    /// The tokens end before the part does: give more (the source has more).
    More,
}

/// Runs `rule` on `toks` (the whole source's tokens when `complete`, else a prefix of
/// them); the error is the diagnostic of the furthest failure.
fn run<'a, T>(
    src: &str,
    toks: &'a [Tok<'a>],
    complete: bool,
    ar: &'a Bump,
    rule: impl FnOnce(Toks<'a>) -> PResult<'a, T>,
) -> Result<Step<T>, Diagnostic> {
    let cx: &'a Cx<'a> = ar.alloc(Cx { all: toks, complete, track: Tracker::default() });
    match rule(Toks::new(cx)) {
        Ok((rest, v)) => Ok(Step::Done(rest.pos(), v)),
        Err(nom::Err::Incomplete(_)) => Ok(Step::More),
        Err(_) => Err(error_from_tracker(src, toks, &cx.track)),
    }
}

/// The start of a source: the optional `module NAME` line and the first declaration (as
/// [`parse_item`]; one rule, so that an error at the first declaration also lists
/// `module` as expected).
#[allow(clippy::type_complexity)]
pub fn parse_start<'a>(
    src: &str,
    toks: &'a [Tok<'a>],
    complete: bool,
    ar: &'a Bump,
) -> Result<Step<(Option<ModuleName<'a>>, Option<Item<'a>>)>, Diagnostic> {
    run(src, toks, complete, ar, |i| {
        let (i, name) = module_header(i)?;
        let (i, item) = next_item(ar, i)?;
        Ok((i, (name, item)))
    })
}

/// The next declaration in `toks`, `None` at the end of the source. `toks` are the tokens
/// from where the previous declaration (or the header) ended; when they do not reach the
/// end of the source (`complete` false) and the declaration may continue past them, the
/// answer is [`Step::More`]. Nodes are allocated in `ar`.
pub fn parse_item<'a>(
    src: &str,
    toks: &'a [Tok<'a>],
    complete: bool,
    ar: &'a Bump,
) -> Result<Step<Option<Item<'a>>>, Diagnostic> {
    run(src, toks, complete, ar, |i| next_item(ar, i))
}

/// The start of a function too long for the token window: the optional `module NAME`
/// line (when `first`), blank lines, and `func @name(params) [-> results] {` with the end
/// of its line. The function is returned with an empty body, which [`parse_body_chunk`]
/// reads a piece at a time. `None` when the next declaration is not a function (or not
/// one this rule reads: the caller parses it with [`parse_start`] or [`parse_item`], which
/// also give the diagnostics).
#[allow(clippy::type_complexity)]
pub fn parse_func_head<'a>(
    src: &str,
    toks: &'a [Tok<'a>],
    complete: bool,
    ar: &'a Bump,
    first: bool,
) -> Result<Step<Option<(Option<ModuleName<'a>>, FuncDecl<'a>)>>, Diagnostic> {
    run(src, toks, complete, ar, |i0| {
        let (i, name) = if first { module_header(i0)? } else { (i0, None) };
        let (i, ()) = nls(i)?;
        if !i.first().is_some_and(|t| t.kind == TokKind::Ident && t.text == "func") {
            return Ok((i0, None));
        }
        let (i, kw_tok) = kw("func", "`func`")(i)?;
        let (i, fname) = global("`@name`")(i)?;
        let (i, params) = bracketed(ar, TokKind::LParen, param(ar), TokKind::RParen)(i)?;
        let (i, results) = opt(results(ar)).parse(i)?;
        let (i, bounds) = opt(where_clause(ar)).parse(i)?;
        let header_span = Span::new(kw_tok.span().start, i.prev_end());
        let (i, _) = punct(TokKind::LBrace)(i)?;
        let (results, bounds) = (results.unwrap_or(&[]), bounds.unwrap_or(&[]));
        let f = FuncDecl { name: fname, params, results, bounds, body: &[], header_span };
        Ok((i, Some((name, f))))
    })
}

/// Up to `max` items of a function body (after [`parse_func_head`]), and whether the body
/// ended: its `}` and the end of that line were read. Stops before an item the tokens do
/// not reach the end of ([`Step::More`] only when not even one item is there).
#[allow(clippy::type_complexity)]
pub fn parse_body_chunk<'a>(
    src: &str,
    toks: &'a [Tok<'a>],
    complete: bool,
    ar: &'a Bump,
    max: usize,
) -> Result<Step<(&'a [BodyItem<'a>], bool)>, Diagnostic> {
    run(src, toks, complete, ar, |mut i: Toks<'a>| {
        let mut items: Vec<BodyItem<'a>> = Vec::with_capacity(max.min(1024));
        loop {
            let at = i;
            let step = (|| {
                let (i, ()) = nls(at)?;
                match label_def(i) {
                    Ok((rest, l)) => return Ok((rest, Some(BodyItem::Label(l)))),
                    Err(nom::Err::Error(_)) => {}
                    Err(e) => return Err(e),
                }
                match instr(ar, i) {
                    Ok((rest, ins)) => {
                        let (rest, ()) = cut(stmt_end).parse(rest)?;
                        Ok((rest, Some(BodyItem::Instr(ins))))
                    }
                    Err(nom::Err::Error(_)) => {
                        let (i, _) = cut(punct(TokKind::RBrace)).parse(i)?;
                        let (i, ()) = cut(stmt_end).parse(i)?;
                        Ok((i, None))
                    }
                    Err(e) => Err(e),
                }
            })();
            match step {
                Ok((rest, Some(item))) => {
                    items.push(item);
                    i = rest;
                    if items.len() >= max {
                        return Ok((i, (&*ar.alloc_slice_copy(&items), false)));
                    }
                }
                Ok((rest, None)) => return Ok((rest, (&*ar.alloc_slice_copy(&items), true))),
                Err(nom::Err::Incomplete(_)) if !items.is_empty() => {
                    return Ok((at, (&*ar.alloc_slice_copy(&items), false)));
                }
                Err(e) => return Err(e),
            }
        }
    })
}

/// The tokens of a source read a window at a time: [`parse_start`] and [`parse_item`]
/// parse the window, [`TokenStream::consume`] drops what they used and
/// [`TokenStream::more`] lexes further. (For a large program, a token array and a parse
/// tree of the whole file take more memory than the module, and their page faults more
/// time than parsing.)
pub struct TokenStream<'s> {
    lexer: crate::lexer::Lexer<'s>,
    toks: Vec<Tok<'s>>,
    at: usize,
    /// Tokens lexed ahead ([`WINDOW`]; less in tests).
    window: usize,
}

/// Tokens lexed ahead of the parser.
pub(crate) const WINDOW: usize = 8192;

impl<'s> TokenStream<'s> {
    /// Lexes the first window of `src`; line starts are recorded (see
    /// [`TokenStream::take_line_starts`]).
    pub fn new(src: &'s str) -> Result<TokenStream<'s>, Diagnostic> {
        TokenStream::with_window(src, WINDOW)
    }

    /// As [`TokenStream::new`], lexing `window` tokens ahead.
    pub fn with_window(src: &'s str, window: usize) -> Result<TokenStream<'s>, Diagnostic> {
        let window = window.max(1);
        let mut t = TokenStream {
            lexer: crate::lexer::Lexer::new(src)?.with_line_starts(),
            toks: Vec::with_capacity(2 * window),
            at: 0,
            window,
        };
        t.fill(window)?;
        Ok(t)
    }

    fn fill(&mut self, n: usize) -> Result<(), Diagnostic> {
        if !self.lexer.is_done() {
            self.lexer.fill(&mut self.toks, n)?;
        }
        Ok(())
    }

    /// The tokens not yet consumed, and whether they reach the end of the source.
    pub fn window(&self) -> (&[Tok<'s>], bool) {
        (self.toks.get(self.at..).unwrap_or(&[]), self.lexer.is_done())
    }

    /// Drops `n` tokens from the front of the window, and tops it up.
    pub fn consume(&mut self, n: usize) -> Result<(), Diagnostic> {
        self.at += n;
        // Refilled when nearly empty, so that few tokens are moved to the front.
        if self.toks.len() - self.at.min(self.toks.len()) < self.window.div_ceil(8) && !self.lexer.is_done() {
            self.toks.drain(..self.at.min(self.toks.len()));
            self.at = 0;
            self.fill(self.window)?;
        }
        Ok(())
    }

    /// Doubles the window (after [`Step::More`]).
    pub fn more(&mut self) -> Result<(), Diagnostic> {
        let n = (self.toks.len() - self.at.min(self.toks.len())).max(self.window);
        self.fill(n)
    }

    /// Moves the line starts lexed so far to `into`.
    pub fn take_line_starts(&mut self, into: &mut Vec<usize>) {
        into.append(&mut self.lexer.line_starts);
    }

    /// Lexes the rest of the source: the error of a parse stopped early must give way to
    /// a lexical error further on, as when the whole file is lexed first.
    pub fn check_rest(&mut self) -> Result<(), Diagnostic> {
        self.lexer.check_rest()
    }
}

/// Lexes and parses `src`. All nodes are allocated in `ar`.
pub fn parse<'a>(src: &'a str, ar: &'a Bump) -> Result<SourceModule<'a>, Diagnostic> {
    let toks = lex(src)?;
    let all: &'a [Tok<'a>] = ar.alloc_slice_copy(&toks);
    drop(toks);
    parse_tokens(src, all, ar)
}

/// As [`parse`], with the tokens in `toks` (cleared first) instead of copied into the arena:
/// the caller keeps the token array alive as long as the parse tree.
pub fn parse_with<'a>(src: &'a str, ar: &'a Bump, toks: &'a mut Vec<Tok<'a>>) -> Result<SourceModule<'a>, Diagnostic> {
    toks.clear();
    lex_into(src, toks)?;
    parse_tokens(src, toks, ar)
}

/// The whole module: the header, then every declaration, with the same rules as
/// [`parse_item`].
fn parse_tokens<'a>(src: &'a str, all: &'a [Tok<'a>], ar: &'a Bump) -> Result<SourceModule<'a>, Diagnostic> {
    let mut consts = Vec::new();
    let mut kernels = Vec::new();
    let mut funcs = Vec::new();
    // (The tokens are complete: never `Step::More`.)
    let (mut at, name, mut item) = match parse_start(src, all, true, ar)? {
        Step::Done(n, (name, item)) => (n, name, item),
        Step::More => (all.len(), None, None),
    };
    while let Some(it) = item {
        match it {
            Item::Const(c) => consts.push(c),
            Item::Kernel(k) => kernels.push(k),
            Item::Func(f) => funcs.push(f),
        }
        item = match parse_item(src, all.get(at..).unwrap_or(&[]), true, ar)? {
            Step::Done(n, it) => {
                at += n;
                it
            }
            Step::More => None,
        };
    }
    Ok(SourceModule {
        name,
        consts: ar.alloc_slice_copy(&consts),
        kernels: ar.alloc_slice_copy(&kernels),
        funcs: ar.alloc_slice_copy(&funcs),
    })
}

/// Whether the failure at token `pos` is inside a parameter's `in %STORAGE at OFFSET`:
/// right after `in`, `in %STORAGE` or `in %STORAGE at`.
fn in_placement(all: &[Tok<'_>], pos: usize) -> bool {
    let is_kw = |i: usize, w: &str| all.get(i).is_some_and(|t| t.kind == TokKind::Ident && t.text == w);
    let is_reg = |i: usize| all.get(i).is_some_and(|t| t.kind == TokKind::Reg);
    (pos >= 1 && is_kw(pos - 1, "in"))
        || (pos >= 2 && is_kw(pos - 2, "in") && is_reg(pos - 1))
        || (pos >= 3 && is_kw(pos - 3, "in") && is_reg(pos - 2) && is_kw(pos - 1, "at"))
}

fn error_from_tracker(src: &str, all: &[Tok<'_>], track: &Tracker) -> Diagnostic {
    match track.custom.get() {
        Some((Custom::ModuleNotFirst, span)) => {
            return Diagnostic::new(span, "the `module` declaration must come first")
                .with_label("misplaced `module` declaration")
                .with_note("write `module NAME` before every `const` and `func`");
        }
        Some((Custom::TooMany(l), span)) => {
            let max = l.max();
            return Diagnostic::new(span, format!("too many {}: more than {max}", l.what))
                .with_label(format!("the encoding allows at most {max}"))
                .with_note(format!("the count is stored in {} bits", l.bits));
        }
        None => {}
    }
    let pos = track.furthest.get();
    let (span, found) = match all.get(pos) {
        // A newline is shown as a point at the end of its line.
        Some(t) if t.kind == TokKind::Newline => (Span::new(t.span().start, t.span().start), t.describe()),
        Some(t) => (t.span(), t.describe()),
        None => (Span::new(src.len(), src.len()), "end of file".to_string()),
    };
    let mut d = Diagnostic::expected(span, track.expected(), found);
    if let Some(open) = track.open_block.get() {
        d = d.with_secondary(open, "attribute block opened here");
        if d.expected.iter().any(|e| e == "`}`") {
            d = d.with_note(
                "an attribute block ends with `}`; attributes are separated by `,`, and the block may \
                 continue on the next line after `{` or `,`",
            );
        }
    }
    if in_placement(all, pos) {
        d = d.with_note("a parameter is placed in a storage parameter with `in %STORAGE at OFFSET`");
    }
    if let Some(t) = all.get(pos) {
        if t.kind == TokKind::Ident
            && d.expected.iter().any(|e| e == "`nop`" || e == "`mov`")
            && syntax::mnemonic(t.text).is_none()
        {
            d = d.with_note(format!("`{}` is not an instruction", t.text));
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok<'a>(src: &'a str, ar: &'a Bump) -> SourceModule<'a> {
        match parse(src, ar) {
            Ok(m) => m,
            Err(e) => panic!("parse failed: {e:?}"),
        }
    }

    fn parse_err(src: &str) -> Diagnostic {
        let ar = Bump::new();
        match parse(src, &ar) {
            Ok(m) => panic!("expected an error, parsed {m:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn toks_implements_nom_input() {
        let ar = Bump::new();
        let toks = lex("a b c").expect("lexes");
        let all = ar.alloc_slice_copy(&toks);
        let cx = ar.alloc(Cx { all, complete: true, track: Tracker::default() });
        let t = Toks::new(cx);
        assert_eq!(t.input_len(), 3);
        let (rest, first) = t.take_split(1);
        assert_eq!(first.input_len(), 1);
        assert_eq!(rest.iter_elements().map(|t| t.text).collect::<Vec<_>>(), vec!["b", "c"]);
        assert_eq!(t.position(|t| t.text == "c"), Some(2));
        assert_eq!(t.slice_index(5), Err(Needed::new(2)));
        // A stock nom combinator runs on it.
        let r: PResult<'_, Toks<'_>> = nom::bytes::complete::take(2usize).parse(t);
        let (rest, taken) = r.expect("take");
        assert_eq!((taken.input_len(), rest.input_len()), (2, 1));
    }

    #[test]
    fn parses_a_module() {
        let ar = Bump::new();
        let src = "module tiny\n\nconst @w: f32[2] = [1.0, 2]\nconst @z: i8[2, 3] = fill(1)\n\
                   const @f: u8[4] = file(\"x.bin\")\n\
                   func @main(%x: f32[?, 4], %n: int) -> (f32[4], tensor) {\n\
                   entry: %a, %b = call @f(%x, 1, 2.5, @w)\n  ret %a, %b\n}\n";
        let m = parse_ok(src, &ar);
        assert!(matches!(m.name, Some(ModuleName::Ident(Name { text: "tiny", .. }))));
        assert_eq!(m.consts.len(), 3);
        assert!(matches!(m.consts[1].init, ConstInit::Fill(Number::Int(IntLit { value: Some(1), .. }))));
        assert!(matches!(m.consts[2].init, ConstInit::File(StrLit { raw: "\"x.bin\"", .. })));
        let f = &m.funcs[0];
        assert_eq!(f.name.text, "main");
        assert_eq!(f.params.len(), 2);
        assert!(matches!(f.params[0].ty.kind, TypeKind::Tensor { dims: [DimExpr::Any(_), DimExpr::Known(_)], .. }));
        assert_eq!(f.results.len(), 2);
        assert_eq!(&src[f.header_span.range()], "func @main(%x: f32[?, 4], %n: int) -> (f32[4], tensor)");
        assert!(matches!(f.body[0], BodyItem::Label(Name { text: "entry", .. })));
        let BodyItem::Instr(call) = f.body[1] else { panic!("not an instruction") };
        assert_eq!(call.dsts.len(), 2);
        assert_eq!(&src[call.span.range()], "%a, %b = call @f(%x, 1, 2.5, @w)");
        let InstrKind::Call { callee, args } = call.kind else { panic!("not a call") };
        assert_eq!(callee.text, "f");
        assert!(matches!(args, [Operand::Reg(_), Operand::Int(_), Operand::Float(_), Operand::Const(_)]));
    }

    #[test]
    fn parses_every_instruction_form() {
        let ar = Bump::new();
        let src = "func @f(%c: int) {\n\
                   %a = mov %c\n %b = int -0x10\n %d = float 2\n %e = const @w\n\
                   %s = shape [1, %c,\n 4]\n\
                   %st = alloc_storage 64, align 16, device 1, scope \"global\"\n\
                   %st2 = alloc_storage %c\n\
                   %t = alloc_tensor %st, 0, f32[1, %c], scope \"global.texture\"\n\
                   kill %t\n call @vm.nop()\n nop\n br l1\n l1:\n br_if %c, l1, l2\n l2: ret\n}";
        let m = parse_ok(src, &ar);
        let kinds: Vec<&str> = m.funcs[0]
            .body
            .iter()
            .filter_map(|b| match b {
                BodyItem::Instr(i) => Some(i.mnemonic.text),
                BodyItem::Label(_) => None,
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                "mov",
                "int",
                "float",
                "const",
                "shape",
                "alloc_storage",
                "alloc_storage",
                "alloc_tensor",
                "kill",
                "call",
                "nop",
                "br",
                "br_if",
                "ret"
            ]
        );
        let BodyItem::Instr(st) = m.funcs[0].body[5] else { panic!() };
        assert!(matches!(
            st.kind,
            InstrKind::AllocStorage(AllocStorageOps {
                align: Some(Operand::Int(_)),
                device: Some(_),
                scope: Some(_),
                ..
            })
        ));
    }

    #[test]
    fn expected_lists_every_alternative() {
        let e = parse_err("func @f() {\n  call @g(%a, )\n}\n");
        assert_eq!(e.expected, vec!["`%register`", "integer", "float", "`@constant`"]);
        assert_eq!(e.found.as_deref(), Some("`)`"));

        let e = parse_err("func @f() {\n  ret %a %b\n}\n");
        assert_eq!(e.expected, vec!["`,`", "newline"]);

        let e = parse_err("func @f() {\n  %x = mov\n}\n");
        assert_eq!(e.expected, vec!["`%register`"]);
        assert_eq!(e.found.as_deref(), Some("newline"));

        let e = parse_err("func @f() {\n  frob %x\n}\n");
        assert!(e.expected.contains(&"label".to_string()), "{:?}", e.expected);
        assert!(e.expected.contains(&"`br_if`".to_string()));
        assert!(e.expected.contains(&"`}`".to_string()));
        assert!(e.notes.iter().any(|n| n.contains("not an instruction")));

        let e = parse_err("func @f() {\n  %x mov %y\n}\n");
        assert_eq!(e.expected, vec!["`,`", "`=`"]);

        let e = parse_err("func @f(");
        assert_eq!(e.found.as_deref(), Some("end of file"));

        let e = parse_err("func @f() {\n %s = alloc_storage 4, frob 3\n}\n");
        assert_eq!(e.expected, vec!["`align`", "`device`", "`scope`"]);
    }

    #[test]
    fn parses_operator_calls() {
        let ar = Bump::new();
        let src = "func @f(%x: f32[4]) {\n\
                   call @onnx.Conv(%x, @w, none) -> (%y) { strides = [2, 2], alpha = 0.5, s = \"x\",\n\
                   \x20  fs = [1, 2.5], e = [] }\n\
                   call @onnx.Relu(%x) -> (%a, none)\n\
                   %d = call @onnx.Relu(%x)\n\
                   call @onnx.Relu() -> () {\n}\n ret\n}";
        let m = parse_ok(src, &ar);
        let ins: Vec<&InstrNode<'_>> = m.funcs[0]
            .body
            .iter()
            .filter_map(|b| match b {
                BodyItem::Instr(i) => Some(*i),
                BodyItem::Label(_) => None,
            })
            .collect();
        let InstrKind::OpCall(&OpCallOps { op, inputs, outputs, arrow, attrs: Some(block) }) = ins[0].kind else {
            panic!("not an operator call with attributes: {:?}", ins[0].kind)
        };
        assert_eq!(op.text, "onnx.Conv");
        assert!(matches!(inputs, [Operand::Reg(_), Operand::Const(_), Operand::None(_)]));
        assert!(matches!(outputs, [Operand::Reg(Name { text: "y", .. })]));
        assert!(arrow.is_some());
        let names: Vec<&str> = block.attrs.iter().map(|a| a.name.text).collect();
        assert_eq!(names, ["strides", "alpha", "s", "fs", "e"]);
        assert!(matches!(block.attrs[0].value, AttrExpr::List { elems: [Number::Int(_), Number::Int(_)], .. }));
        assert!(matches!(block.attrs[1].value, AttrExpr::Float(_)));
        assert!(matches!(block.attrs[2].value, AttrExpr::Str(_)));
        assert!(matches!(block.attrs[3].value, AttrExpr::List { elems: [Number::Int(_), Number::Float(_)], .. }));
        assert!(matches!(block.attrs[4].value, AttrExpr::List { elems: [], .. }));
        assert_eq!(&src[block.attrs[3].span().range()], "fs = [1, 2.5]");
        assert!(src[block.span.range()].starts_with("{ strides") && src[block.span.range()].ends_with("e = [] }"));
        assert!(matches!(
            ins[1].kind,
            InstrKind::OpCall(OpCallOps { outputs: [Operand::Reg(_), Operand::None(_)], .. })
        ));
        // A destination parses (the assembler explains it); `->` is optional.
        assert!(matches!(ins[2].kind, InstrKind::OpCall(OpCallOps { arrow: None, outputs: [], attrs: None, .. })));
        assert_eq!(ins[2].dsts.len(), 1);
        assert!(matches!(
            ins[3].kind,
            InstrKind::OpCall(OpCallOps { inputs: [], outputs: [], attrs: Some(AttrBlock { attrs: [], .. }), .. })
        ));
    }

    #[test]
    fn operator_call_errors() {
        let e = parse_err("func @f() {\n  call @onnx.Relu(1) -> (%y)\n}\n");
        assert_eq!(e.expected, vec!["`%register`", "`@constant`", "`none`", "`)`"]);
        let e = parse_err("func @f() {\n  call @onnx.Relu(%x) -> (1)\n}\n");
        assert_eq!(e.expected, vec!["`%register`", "`)`"]);
        let e = parse_err("func @f() {\n  call @onnx.Relu(%x) %y\n}\n");
        assert_eq!(e.expected, vec!["`->`", "`{`", "newline"]);
        let e = parse_err("func @f() {\n  call @onnx.Relu(%x) -> (%y) { a 1 }\n}\n");
        assert_eq!(e.expected, vec!["`=`"]);
        assert_eq!(e.secondary.len(), 1, "points back at the block");
        let e = parse_err("func @f() {\n  call @onnx.Relu(%x) -> (%y) { a = [1, \"s\"] }\n}\n");
        assert_eq!(e.expected, vec!["integer", "float"]);
        let e = parse_err("func @f() {\n  call @onnx.Relu(%x) -> (%y) { a = 1 b = 2 }\n}\n");
        assert_eq!(e.expected, vec!["`,`", "`}`"]);
        // `none` is not an operand elsewhere.
        let e = parse_err("func @f() {\n  call @vm.print(none)\n}\n");
        assert!(!e.expected.contains(&"`none`".to_string()), "{:?}", e.expected);
        // Not an operator call: no `->` or attributes.
        let e = parse_err("func @f() {\n  call @g(%x) -> (%y)\n}\n");
        assert_eq!(e.expected, vec!["newline"]);
    }

    #[test]
    fn parses_kernels() {
        let ar = Bump::new();
        let src = "kernel @a = opencl(\"a\", \"src\")\nfunc @f() {\n call @cl.a(%x, 1, 2.5, @w) global [4, %n]\n \
                   call @cl.a()\n ret\n}\nkernel @b = opencl(\n  \"b\",\n  file(\"b.cl\")\n)\n";
        let m = parse_ok(src, &ar);
        assert_eq!(m.kernels.len(), 2);
        assert!(matches!(m.kernels[0].source, KernelSource::Str(StrLit { raw: "\"src\"", .. })));
        assert!(matches!(m.kernels[1].source, KernelSource::File(StrLit { raw: "\"b.cl\"", .. })));
        let BodyItem::Instr(call) = m.funcs[0].body[0] else { panic!() };
        let InstrKind::KernelCall(&KernelCallOps { kernel, args, global: Some(g) }) = call.kind else {
            panic!("{:?}", call.kind)
        };
        assert_eq!(kernel.text, "cl.a");
        assert_eq!(args.len(), 4);
        assert_eq!(&src[g.span.range()], "global [4, %n]");
        let BodyItem::Instr(call) = m.funcs[0].body[1] else { panic!() };
        assert!(matches!(call.kind, InstrKind::KernelCall(KernelCallOps { args: [], global: None, .. })));
        let e = parse_err("func @f() {\n  call @cl.a(%x) global [1.5]\n}\n");
        assert_eq!(e.expected, vec!["`%register`", "integer", "`]`"]);
        let e = parse_err("kernel @a = opencl(\"a\")\n");
        assert_eq!(e.expected, vec!["`,`"]);
    }

    #[test]
    fn parses_parameter_placements() {
        let ar = Bump::new();
        let src = "func @f(%x: f32[1, 3, 4, 4] in %arena at 4096, %arena: storage, %y: f32[2] in %arena at 0x10,\n\
                   %n: int) {\n  ret\n}\n";
        let m = parse_ok(src, &ar);
        let ps = m.funcs[0].params;
        let pl = ps[0].placement.expect("%x is placed");
        assert_eq!((pl.storage.text, pl.offset.value), ("arena", Some(4096)));
        assert_eq!(&src[pl.span.range()], "in %arena at 4096");
        assert!(ps[1].placement.is_none());
        assert_eq!(ps[2].placement.map(|p| p.offset.value), Some(Some(16)));
        assert!(ps[3].placement.is_none());

        // `in` is a keyword only after a parameter's type: a register may still be `%in`.
        let ar = Bump::new();
        let m = parse_ok("func @f(%in: storage, %at: f32[1] in %in at 0) {\n  ret\n}\n", &ar);
        assert_eq!(m.funcs[0].params[1].placement.map(|p| p.storage.text), Some("in"));
    }

    #[test]
    fn placement_errors() {
        let e = parse_err("func @f(%x: f32[4] in %a, %a: storage) {\n  ret\n}\n");
        assert_eq!((e.expected.as_slice(), e.found.as_deref()), (&["`at`".to_string()][..], Some("`,`")));
        assert!(e.notes.iter().any(|n| n.contains("in %STORAGE at OFFSET")), "{:?}", e.notes);
        let e = parse_err("func @f(%x: f32[4] in %a at, %a: storage) {\n  ret\n}\n");
        assert_eq!(e.expected, vec!["integer"]);
        assert!(e.notes.iter().any(|n| n.contains("in %STORAGE at OFFSET")), "{:?}", e.notes);
        let e = parse_err("func @f(%x: f32[4] in %a at %o, %a: storage) {\n  ret\n}\n");
        assert_eq!((e.expected.as_slice(), e.found.as_deref()), (&["integer".to_string()][..], Some("`%o`")));
        let e = parse_err("func @f(%x: f32[4] in 0 at 0) {\n  ret\n}\n");
        assert_eq!(e.expected, vec!["`%register`"]);
        let e = parse_err("func @f(%x: f32[4] at 0) {\n  ret\n}\n");
        assert_eq!(e.expected, vec!["`in`", "`,`", "`)`"]);
        assert!(e.notes.is_empty(), "{:?}", e.notes);
    }

    #[test]
    fn module_must_come_first() {
        let e = parse_err("func @f() {\n}\nmodule m\n");
        assert_eq!(e.message, "the `module` declaration must come first");
    }

    #[test]
    fn int_and_float_values() {
        assert_eq!(int_value("-0x8000000000000000"), Some(i64::MIN as i128));
        assert_eq!(int_value("18446744073709551615"), Some(u64::MAX as i128));
        assert_eq!(int_value("999999999999999999999999999999999999999999"), None);
        assert_eq!(float_value("-inf"), FloatVal::Num(f64::NEG_INFINITY));
        assert_eq!(float_value("nan"), FloatVal::Nan { negative: false, payload: None });
        assert_eq!(float_value("-nan(0x1f)"), FloatVal::Nan { negative: true, payload: Some(0x1f) });
        assert!(matches!(float_value("-0.0"), FloatVal::Num(v) if v.to_bits() == (-0.0f64).to_bits()));
    }
}
