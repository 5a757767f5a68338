//! The `.rxa` lexer: a [`logos`] automaton producing tokens with byte spans.
//!
//! Whitespace (other than newlines) and `;` comments are skipped. Newlines are tokens:
//! every declaration and instruction ends at the end of its line (the parser lets lists in
//! `(...)` and `[...]`, and operator attribute blocks `{...}`, continue over several lines).

use crate::ast::Span;
use crate::diag::Diagnostic;
use logos::Logos;

/// The kind of a token.
#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[logos(skip r"[ \t\r\f]+")]
#[logos(skip r";[^\n]*")]
pub enum TokKind {
    #[token("\n")]
    Newline,
    /// A bare identifier: keywords, mnemonics, dtype names, labels.
    #[regex(r"[A-Za-z_][A-Za-z0-9_.]*")]
    Ident,
    /// `%name`
    #[regex(r"%[A-Za-z0-9_.]+")]
    Reg,
    /// `@name`
    #[regex(r"@[A-Za-z0-9_.]+")]
    Global,
    /// A decimal or hexadecimal integer, optionally negative.
    #[regex(r"-?[0-9]+")]
    #[regex(r"-?0[xX][0-9a-fA-F]+")]
    Int,
    /// A float: it has a fraction or an exponent, or is `inf`, `-inf`, `nan`, `-nan`,
    /// `nan(0xPAYLOAD)`.
    #[regex(r"-?[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?")]
    #[regex(r"-?[0-9]+[eE][+-]?[0-9]+")]
    #[regex(r"-?inf", priority = 10)]
    #[regex(r"-?nan", priority = 10)]
    #[regex(r"-?nan\(0[xX][0-9a-fA-F]+\)")]
    Float,
    /// A string in double quotes, on one line.
    #[regex(r#""([^"\\\n]|\\[^\n])*""#)]
    Str,
    /// A string that reaches the end of its line without its closing quote.
    #[regex(r#""([^"\\\n]|\\[^\n])*"#)]
    UnterminatedStr,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    #[token("=")]
    Eq,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("->")]
    Arrow,
    #[token("<=")]
    Le,
    #[token("?")]
    Question,
}

impl TokKind {
    /// How the token kind is named in "expected ..." messages.
    pub fn describe(self) -> &'static str {
        match self {
            TokKind::Newline => "newline",
            TokKind::Ident => "identifier",
            TokKind::Reg => "`%register`",
            TokKind::Global => "`@name`",
            TokKind::Int => "integer",
            TokKind::Float => "float",
            TokKind::Str | TokKind::UnterminatedStr => "string",
            TokKind::Comma => "`,`",
            TokKind::Colon => "`:`",
            TokKind::Eq => "`=`",
            TokKind::LParen => "`(`",
            TokKind::RParen => "`)`",
            TokKind::LBracket => "`[`",
            TokKind::RBracket => "`]`",
            TokKind::LBrace => "`{`",
            TokKind::RBrace => "`}`",
            TokKind::Arrow => "`->`",
            TokKind::Le => "`<=`",
            TokKind::Question => "`?`",
        }
    }
}

/// A token: its text (borrowed from the source), where it starts, and its kind. 24 bytes:
/// the parser reads tokens from a window of a few thousand, which stays in cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tok<'a> {
    pub text: &'a str,
    pub start: u32,
    pub kind: TokKind,
}

impl Tok<'_> {
    /// The token's byte span in the source.
    #[inline]
    pub fn span(&self) -> Span {
        let start = self.start as usize;
        Span::new(start, start + self.text.len())
    }

    /// How the token is shown in "found ..." messages.
    pub fn describe(&self) -> String {
        match self.kind {
            TokKind::Newline => "newline".to_string(),
            _ => {
                let mut t: String = self.text.chars().take(40).collect();
                if t.len() < self.text.len() {
                    t.push('…');
                }
                format!("`{t}`")
            }
        }
    }
}

/// Splits `src` into tokens. Stops at the first invalid character or unterminated string.
pub fn lex(src: &str) -> Result<Vec<Tok<'_>>, Diagnostic> {
    let mut out = Vec::new();
    lex_into(src, &mut out)?;
    Ok(out)
}

/// As [`lex`], appending to `out` (reserving room first: compiled programs have a token
/// every 3 bytes or so, so growing from small would copy the array several times).
pub fn lex_into<'a>(src: &'a str, out: &mut Vec<Tok<'a>>) -> Result<(), Diagnostic> {
    out.reserve(src.len() / 3 + 16);
    let mut lx = Lexer::new(src)?;
    while lx.fill(out, usize::MAX)? {}
    Ok(())
}

/// The tokens of a source, a batch at a time (see [`Lexer::fill`]).
pub struct Lexer<'s> {
    inner: logos::Lexer<'s, TokKind>,
    done: bool,
    /// With [`Lexer::with_line_starts`], the start of every line after a newline lexed so
    /// far (to turn offsets into line numbers without scanning the source again).
    pub line_starts: Vec<usize>,
    lines: bool,
}

impl<'s> Lexer<'s> {
    /// A lexer of `src`; a source of 4 GiB or more is refused (token offsets are 32-bit).
    pub fn new(src: &'s str) -> Result<Lexer<'s>, Diagnostic> {
        if u32::try_from(src.len()).is_err() {
            return Err(Diagnostic::new(0..0, format!("the source is too large: {} bytes", src.len()))
                .with_note("the assembler reads sources of less than 4 GiB"));
        }
        Ok(Lexer { inner: TokKind::lexer(src), done: false, line_starts: Vec::new(), lines: false })
    }

    /// Also records [`Lexer::line_starts`].
    pub fn with_line_starts(mut self) -> Lexer<'s> {
        self.lines = true;
        self
    }

    /// Whether every token has been lexed.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Appends up to `n` tokens to `out`; `false` once the source is exhausted. An invalid
    /// character or an unterminated string is an error.
    pub fn fill(&mut self, out: &mut Vec<Tok<'s>>, n: usize) -> Result<bool, Diagnostic> {
        for _ in 0..n {
            let Some(r) = self.inner.next() else {
                self.done = true;
                return Ok(false);
            };
            let range = self.inner.span();
            match r {
                Ok(TokKind::UnterminatedStr) => {
                    self.done = true;
                    return Err(Diagnostic::new(range, "unterminated string")
                        .with_label("this string has no closing `\"`")
                        .with_note("a string ends with `\"` on the line where it starts"));
                }
                Ok(kind) => {
                    if kind == TokKind::Newline && self.lines {
                        self.line_starts.push(range.end);
                    }
                    // (`new` checked that offsets fit.)
                    out.push(Tok { text: self.inner.slice(), start: range.start as u32, kind });
                }
                Err(()) => {
                    self.done = true;
                    return Err(invalid_char(self.inner.slice(), range.start));
                }
            }
        }
        Ok(true)
    }

    /// Lexes the rest of the source without keeping the tokens: whether it has an error.
    pub fn check_rest(&mut self) -> Result<(), Diagnostic> {
        let mut sink = Vec::with_capacity(1024);
        while !self.done {
            sink.clear();
            self.fill(&mut sink, 1024)?;
        }
        Ok(())
    }
}

#[cold]
fn invalid_char(text: &str, start: usize) -> Diagnostic {
    let c = text.chars().next().unwrap_or('?');
    let span = Span::new(start, start + c.len_utf8());
    let shown = if c.is_control() || c.is_whitespace() { format!("{:?}", c) } else { format!("`{c}`") };
    Diagnostic::new(span, format!("invalid character {shown}"))
        .with_label("not valid here")
        .with_found(shown)
        .with_note(
            "tokens are `%register`, `@name`, identifiers, numbers, strings, \
             comments (`;` to end of line) and `, : = ( ) [ ] { } -> ?`",
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(TokKind, &str)> {
        lex(src).expect("lexes").into_iter().map(|t| (t.kind, t.text)).collect()
    }

    #[test]
    fn lexes_every_token_kind() {
        use TokKind::*;
        assert_eq!(
            kinds("func @vm.add(%x: f32[?, 4]) -> (int) { } , = \"s\" ; comment\n"),
            vec![
                (Ident, "func"),
                (Global, "@vm.add"),
                (LParen, "("),
                (Reg, "%x"),
                (Colon, ":"),
                (Ident, "f32"),
                (LBracket, "["),
                (Question, "?"),
                (Comma, ","),
                (Int, "4"),
                (RBracket, "]"),
                (RParen, ")"),
                (Arrow, "->"),
                (LParen, "("),
                (Ident, "int"),
                (RParen, ")"),
                (LBrace, "{"),
                (RBrace, "}"),
                (Comma, ","),
                (Eq, "="),
                (Str, "\"s\""),
                (Newline, "\n"),
            ]
        );
    }

    #[test]
    fn numbers() {
        use TokKind::*;
        assert_eq!(
            kinds("42 -7 0x1F -0x10 1.5 -0.0 1e-7 2E+10 inf -inf nan -nan nan(0x1) info"),
            vec![
                (Int, "42"),
                (Int, "-7"),
                (Int, "0x1F"),
                (Int, "-0x10"),
                (Float, "1.5"),
                (Float, "-0.0"),
                (Float, "1e-7"),
                (Float, "2E+10"),
                (Float, "inf"),
                (Float, "-inf"),
                (Float, "nan"),
                (Float, "-nan"),
                (Float, "nan(0x1)"),
                (Ident, "info"),
            ]
        );
    }

    #[test]
    fn spans_are_byte_offsets() {
        let t = lex("  %é_x = mov %y").map(|t| t.len());
        assert!(t.is_err(), "é is not an identifier character");
        let toks = lex("ab  %cd\n@e").expect("lexes");
        let spans: Vec<_> = toks.iter().map(|t| (t.span().start, t.span().end)).collect();
        assert_eq!(spans, vec![(0, 2), (4, 7), (7, 8), (8, 10)]);
    }

    #[test]
    fn strings_and_escapes() {
        let toks = lex(r#""a \"b\" c" "x\\""#).expect("lexes");
        assert_eq!(toks.len(), 2);
        assert_eq!(toks[0].text, r#""a \"b\" c""#);
        assert_eq!(toks[1].text, r#""x\\""#);
    }

    #[test]
    fn errors() {
        let e = lex("%x = int 4 $").expect_err("bad char");
        assert_eq!((e.span.start, e.span.end), (11, 12));
        assert_eq!(e.message, "invalid character `$`");
        let e = lex("scope \"global\n").expect_err("unterminated");
        assert_eq!((e.span.start, e.span.end), (6, 13));
        assert_eq!(e.message, "unterminated string");
        let e = lex("a\u{1F600}").expect_err("emoji");
        assert_eq!((e.span.start, e.span.end), (1, 5));
    }
}
