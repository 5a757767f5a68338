//! Diagnostics: errors with byte spans, rendered with `codespan-reporting`.
//!
//! Spans are byte offsets into the source; lines and columns are computed only when
//! rendering. Columns count Unicode scalar values, 1-based (the same convention as the
//! `SourceLoc`s the assembler writes into modules).

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::{Error as FilesError, Files, SimpleFile};
use codespan_reporting::term::termcolor::{Buffer, ColorChoice, NoColor, StandardStream, WriteColor};
use codespan_reporting::term::{self, Config};
use std::fmt;
use std::ops::Range;

/// One error: where, what, and what would have been accepted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostic {
    /// Byte offsets of the primary location.
    pub span: Range<usize>,
    /// The headline.
    pub message: String,
    /// Text shown at the primary location (may be empty).
    pub label: String,
    /// For parse errors: every alternative that would have been accepted.
    pub expected: Vec<String>,
    /// For parse errors: the offending token (`` `text` ``, `newline` or `end of file`).
    pub found: Option<String>,
    pub notes: Vec<String>,
    /// Related locations, each with its own text.
    pub secondary: Vec<(Range<usize>, String)>,
}

impl Diagnostic {
    pub fn new(span: impl Into<Range<usize>>, message: impl Into<String>) -> Diagnostic {
        Diagnostic { span: span.into(), message: message.into(), ..Diagnostic::default() }
    }

    pub fn with_label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    pub fn with_found(mut self, found: impl Into<String>) -> Diagnostic {
        self.found = Some(found.into());
        self
    }

    pub fn with_secondary(mut self, span: impl Into<Range<usize>>, text: impl Into<String>) -> Diagnostic {
        self.secondary.push((span.into(), text.into()));
        self
    }

    /// A parse error: "expected one of: A, B, found X".
    pub fn expected(span: impl Into<Range<usize>>, expected: Vec<String>, found: String) -> Diagnostic {
        let message = format!("{}, found {found}", expected_phrase(&expected));
        let label = match found.as_str() {
            "end of file" => "the file ends here".to_string(),
            _ => format!("unexpected {found}"),
        };
        Diagnostic {
            span: span.into(),
            message,
            label,
            expected,
            found: Some(found),
            notes: Vec::new(),
            secondary: Vec::new(),
        }
    }

    fn to_codespan(&self, src: &str, with_source: bool) -> CsDiagnostic<()> {
        self.to_codespan_mapped(src, with_source, |r| r)
    }

    /// With each (clamped) span passed through `map`.
    fn to_codespan_mapped(
        &self,
        src: &str,
        with_source: bool,
        map: impl Fn(Range<usize>) -> Range<usize>,
    ) -> CsDiagnostic<()> {
        let mut d = CsDiagnostic::error().with_message(&self.message).with_notes(self.notes.clone());
        if with_source {
            let mut labels = vec![Label::primary((), map(clamp(src, &self.span))).with_message(&self.label)];
            for (s, t) in &self.secondary {
                labels.push(Label::secondary((), map(clamp(src, s))).with_message(t));
            }
            d = d.with_labels(labels);
        }
        d
    }

    /// The spans of the diagnostic, primary first, clamped to `src`.
    fn spans(&self, src: &str) -> Vec<Range<usize>> {
        std::iter::once(&self.span).chain(self.secondary.iter().map(|(s, _)| s)).map(|s| clamp(src, s)).collect()
    }
}

/// "expected X" or "expected one of: X, Y, Z".
pub fn expected_phrase(expected: &[String]) -> String {
    match expected {
        [] => "unexpected input".to_string(),
        [one] => format!("expected {one}"),
        many => format!("expected one of: {}", many.join(", ")),
    }
}

/// Makes a span safe to hand to codespan: inside the source and on char boundaries.
fn clamp(src: &str, r: &Range<usize>) -> Range<usize> {
    let floor = |mut i: usize| {
        i = i.min(src.len());
        while i > 0 && !src.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = floor(r.start);
    let end = floor(r.end.max(r.start));
    start..end.max(start)
}

/// Source lines longer than this many bytes are shown clipped: a window of
/// [`CLIP_BEFORE`] bytes before the error and [`CLIP_AFTER`] from it, with `…` for the rest.
pub const MAX_SHOWN_LINE: usize = 240;
const CLIP_BEFORE: usize = 60;
const CLIP_AFTER: usize = 120;

/// One shown line of a [`Clipped`] source.
struct ClipLine {
    /// 1-based line number in the real source.
    number: usize,
    /// Where the line is in [`Clipped::text`] (without its newline).
    shown: Range<usize>,
    /// Bytes of the `…` before the kept text (0 when the line is shown from its start).
    prefix: usize,
    /// The kept bytes of the real source.
    kept: Range<usize>,
    /// Characters of the real line before `kept.start`.
    col0: usize,
}

/// The lines a diagnostic touches, long ones clipped to a window around their labels, as a
/// codespan file: line and column numbers are the real source's, so that a 100 MB line
/// costs a few hundred bytes of output.
struct Clipped<'a> {
    name: &'a str,
    text: String,
    lines: Vec<ClipLine>,
}

impl<'a> Clipped<'a> {
    /// `None` when every line `spans` touch is short enough to show whole.
    fn new(name: &'a str, src: &str, spans: &[Range<usize>]) -> Option<Clipped<'a>> {
        let line_of = |o: usize| {
            let start = src[..o].rfind('\n').map_or(0, |i| i + 1);
            let end = src[o..].find('\n').map_or(src.len(), |i| o + i);
            start..end
        };
        // Each touched line with the offsets of the labels on it (the primary's first).
        let mut touched: Vec<(Range<usize>, Vec<usize>)> = Vec::new();
        for s in spans {
            for o in [s.start, s.end] {
                let l = line_of(o);
                match touched.iter_mut().find(|(t, _)| *t == l) {
                    Some((_, at)) => at.push(o),
                    None => touched.push((l, vec![o])),
                }
            }
        }
        if touched.iter().all(|(l, _)| l.len() <= MAX_SHOWN_LINE) {
            return None;
        }
        touched.sort_by_key(|(l, _)| l.start);
        let floor = |mut i: usize| {
            while !src.is_char_boundary(i) {
                i -= 1;
            }
            i
        };
        let mut text = String::new();
        let mut lines = Vec::new();
        // Line numbers, counted once from the start to the last touched line.
        let (mut number, mut counted) = (1usize, 0usize);
        for (l, at) in touched {
            number += src.as_bytes()[counted..l.start].iter().filter(|&&b| b == b'\n').count();
            counted = l.start;
            let kept = if l.len() <= MAX_SHOWN_LINE {
                l.clone()
            } else {
                let anchor = at[0];
                let start = floor(anchor.saturating_sub(CLIP_BEFORE).max(l.start));
                let end = floor((anchor + CLIP_AFTER).min(l.end)).max(start);
                start..end
            };
            let shown_start = text.len();
            let prefix = if kept.start > l.start { "…" } else { "" };
            text.push_str(prefix);
            text.push_str(&src[kept.clone()]);
            let shown_end = text.len();
            if kept.end < l.end {
                text.push('…');
            }
            text.push('\n');
            let col0 = src[l.start..kept.start].chars().count();
            lines.push(ClipLine { number, shown: shown_start..shown_end, prefix: prefix.len(), kept, col0 });
        }
        Some(Clipped { name, text, lines })
    }

    /// Where a real source offset is shown (clamped to the kept text of its line).
    fn map(&self, r: Range<usize>) -> Range<usize> {
        let one = |o: usize| {
            let Some(l) = self.lines.iter().find(|l| l.kept.start <= o && o <= l.kept.end).or_else(|| {
                // Outside the kept window: the nearest end of the window of its line.
                self.lines.iter().min_by_key(|l| if o < l.kept.start { l.kept.start - o } else { o - l.kept.end })
            }) else {
                return 0;
            };
            l.shown.start + l.prefix + (o.clamp(l.kept.start, l.kept.end) - l.kept.start)
        };
        let (a, b) = (one(r.start), one(r.end));
        a..b.max(a)
    }
}

impl<'a> Files<'a> for Clipped<'a> {
    type FileId = ();
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, (): ()) -> Result<&'a str, FilesError> {
        Ok(self.name)
    }

    fn source(&'a self, (): ()) -> Result<&'a str, FilesError> {
        Ok(&self.text)
    }

    fn line_index(&'a self, (): (), byte_index: usize) -> Result<usize, FilesError> {
        Ok(self.lines.partition_point(|l| l.shown.start <= byte_index).saturating_sub(1))
    }

    fn line_number(&'a self, (): (), line_index: usize) -> Result<usize, FilesError> {
        self.lines
            .get(line_index)
            .map(|l| l.number)
            .ok_or(FilesError::LineTooLarge { given: line_index, max: self.lines.len().saturating_sub(1) })
    }

    fn column_number(&'a self, (): (), line_index: usize, byte_index: usize) -> Result<usize, FilesError> {
        let l = self
            .lines
            .get(line_index)
            .ok_or(FilesError::LineTooLarge { given: line_index, max: self.lines.len().saturating_sub(1) })?;
        let from = l.shown.start + l.prefix;
        let to = byte_index.clamp(from, l.shown.end);
        Ok(l.col0 + self.text.get(from..to).map_or(0, |t| t.chars().count()) + 1)
    }

    fn line_range(&'a self, (): (), line_index: usize) -> Result<Range<usize>, FilesError> {
        match self.lines.get(line_index) {
            // With its `…` and newline, as a line of a plain file.
            Some(l) => Ok(l.shown.start..self.lines.get(line_index + 1).map_or(self.text.len(), |n| n.shown.start)),
            None => Err(FilesError::LineTooLarge { given: line_index, max: self.lines.len().saturating_sub(1) }),
        }
    }
}

/// One or more diagnostics about one source file.
#[derive(Clone, PartialEq, Eq)]
pub struct Diagnostics {
    file_name: String,
    source: String,
    /// False when the source could not be read: diagnostics are shown without a snippet.
    has_source: bool,
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub fn new(file_name: impl Into<String>, source: impl Into<String>, items: Vec<Diagnostic>) -> Diagnostics {
        Diagnostics { file_name: file_name.into(), source: source.into(), has_source: true, items }
    }

    /// Diagnostics about a file whose text is not available (e.g. it could not be read).
    pub fn without_source(file_name: impl Into<String>, items: Vec<Diagnostic>) -> Diagnostics {
        Diagnostics { file_name: file_name.into(), source: String::new(), has_source: false, items }
    }

    pub fn items(&self) -> &[Diagnostic] {
        &self.items
    }

    pub fn into_items(self) -> Vec<Diagnostic> {
        self.items
    }

    pub fn file_name(&self) -> &str {
        &self.file_name
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Writes every diagnostic to `w` (colours as the writer supports). Source lines
    /// longer than [`MAX_SHOWN_LINE`] bytes are clipped around the error.
    pub fn emit(&self, w: &mut dyn WriteColor) -> std::io::Result<()> {
        let config = Config::default();
        let mut file = None;
        for d in &self.items {
            let src = self.source.as_str();
            let clipped = if self.has_source { Clipped::new(&self.file_name, src, &d.spans(src)) } else { None };
            if let Some(c) = clipped {
                let cs = d.to_codespan_mapped(src, true, |r| c.map(r));
                term::emit(w, &config, &c, &cs).map_err(std::io::Error::other)?;
                continue;
            }
            let file = file.get_or_insert_with(|| SimpleFile::new(self.file_name.as_str(), src));
            let cs = d.to_codespan(src, self.has_source);
            term::emit(w, &config, &*file, &cs).map_err(std::io::Error::other)?;
        }
        Ok(())
    }

    /// Plain text, no colour: deterministic, suitable for snapshots.
    pub fn render(&self) -> String {
        let mut w = NoColor::new(Vec::new());
        if let Err(e) = self.emit(&mut w) {
            return format!("{}: error: {e}\n", self.file_name);
        }
        String::from_utf8_lossy(&w.into_inner()).into_owned()
    }

    /// With ANSI colour codes.
    pub fn render_color(&self) -> String {
        let mut w = Buffer::ansi();
        if let Err(e) = self.emit(&mut w) {
            return format!("{}: error: {e}\n", self.file_name);
        }
        String::from_utf8_lossy(w.as_slice()).into_owned()
    }

    /// Prints to standard error, coloured when `choice` allows it.
    pub fn eprint(&self, choice: ColorChoice) -> std::io::Result<()> {
        let stream = StandardStream::stderr(choice);
        let mut lock = stream.lock();
        self.emit(&mut lock)
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl fmt::Debug for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Diagnostics").field("file_name", &self.file_name).field("items", &self.items).finish()
    }
}

impl std::error::Error for Diagnostics {}

/// Byte offset of 1-based `line` and `col` (col counts chars). `None` when `line` is 0 or
/// past the end; a column past the end of its line clamps to the line's end.
pub fn offset_of(source: &str, line: u32, col: u32) -> Option<usize> {
    if line == 0 {
        return None;
    }
    let mut start = 0usize;
    for _ in 1..line {
        start += source.get(start..)?.find('\n')? + 1;
    }
    let text = &source[start..];
    let line_end = text.find('\n').unwrap_or(text.len());
    let line_text = &text[..line_end];
    let skip = col.saturating_sub(1) as usize;
    let off = line_text.char_indices().nth(skip).map_or(line_end, |(i, _)| i);
    Some(start + off)
}

/// 1-based (line, col) of a byte offset; col counts chars.
pub fn line_col(source: &str, offset: usize) -> (u32, u32) {
    let mut off = offset.min(source.len());
    while off > 0 && !source.is_char_boundary(off) {
        off -= 1;
    }
    let before = &source[..off];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (u32::try_from(line).unwrap_or(u32::MAX), u32::try_from(col).unwrap_or(u32::MAX))
}

/// The diagnostic for a VM runtime error reported at `line`:`col` of `source`: the span runs
/// from that position to the end of the instruction's text on that line (comments and
/// trailing blanks excluded). With `line == 0` (unknown) it has no location.
pub fn runtime_diagnostic(source: &str, line: u32, col: u32, message: &str, notes: &[String]) -> Diagnostic {
    let mut d = Diagnostic::new(0..0, message);
    d.notes = notes.to_vec();
    if let Some(start) = offset_of(source, line, col) {
        let rest = &source[start..];
        let mut end = rest.find('\n').unwrap_or(rest.len());
        if let Some(c) = rest[..end].find(';') {
            end = c;
        }
        let text = rest[..end].trim_end();
        d.span = start..start + text.len();
    }
    d
}

/// Renders a VM runtime error that carries a source position with the same look as the
/// assembler's diagnostics (no colour).
pub fn render_runtime_error(source: &str, file: &str, line: u32, col: u32, message: &str, notes: &[String]) -> String {
    runtime_diagnostics(source, file, line, col, message, notes).render()
}

/// As [`render_runtime_error`], written to a colour-capable writer.
pub fn emit_runtime_error(
    w: &mut dyn WriteColor,
    source: &str,
    file: &str,
    line: u32,
    col: u32,
    message: &str,
    notes: &[String],
) -> std::io::Result<()> {
    runtime_diagnostics(source, file, line, col, message, notes).emit(w)
}

fn runtime_diagnostics(source: &str, file: &str, line: u32, col: u32, message: &str, notes: &[String]) -> Diagnostics {
    let d = runtime_diagnostic(source, line, col, message, notes);
    if line == 0 || offset_of(source, line, col).is_none() {
        Diagnostics::without_source(file, vec![d])
    } else {
        Diagnostics::new(file, source, vec![d])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_and_offset_invert() {
        let src = "ab\nçd  e\n\nx";
        for (i, _) in src.char_indices() {
            let (l, c) = line_col(src, i);
            assert_eq!(offset_of(src, l, c), Some(i), "offset {i}");
        }
        assert_eq!(offset_of(src, 9, 1), None);
        assert_eq!(offset_of(src, 0, 1), None);
        assert_eq!(offset_of(src, 2, 99), Some(src.find("\n\n").unwrap_or(0)));
    }

    #[test]
    fn runtime_error_rendering() {
        let src = "func @main() {\n  %x = int 1 ; one\n  ret %x\n}\n";
        let out = render_runtime_error(src, "t.rxa", 2, 3, "boom", &["a note".to_string()]);
        assert!(out.contains("error: boom"), "{out}");
        assert!(out.contains("t.rxa:2:3"), "{out}");
        assert!(out.contains("^^^^^^^^^^"), "{out}");
        assert!(out.contains("= a note"), "{out}");
        let out = render_runtime_error(src, "t.rxa", 0, 0, "no position", &[]);
        assert!(out.contains("error: no position"), "{out}");
    }

    /// Long lines are clipped around each label, on every line a label touches; the
    /// header's line and column are the real ones; short lines are shown whole.
    #[test]
    fn long_lines_are_clipped_around_each_label() {
        let long = "x".repeat(5000);
        let src = format!("short line\n{long}é{long}\nmiddle\n{long}\n");
        let at = src.find('é').unwrap_or(0);
        let second = src.rfind('x').unwrap_or(0);
        let d = Diagnostic::new(at..at + 2, "primary")
            .with_label("here")
            .with_secondary(second..second + 1, "and the end of line 4")
            .with_secondary(0..5, "and a short line");
        let out = Diagnostics::new("f.rxa", src.as_str(), vec![d]).render();
        assert!(out.contains("f.rxa:2:5001"), "{out}");
        assert!(out.len() < 1500, "{} bytes:\n{out}", out.len());
        assert!(out.contains("short line") && out.contains("…xxx") && out.contains('é'), "{out}");
        assert!(out.contains("4 │") && out.contains("and the end of line 4"), "{out}");
        // At the very start and end of a long line, and past the end of the source.
        for span in [12..13, src.len() - 1..src.len(), src.len() + 5..src.len() + 9] {
            let out = Diagnostics::new("f.rxa", src.as_str(), vec![Diagnostic::new(span, "x")]).render();
            assert!(out.len() < 1000, "{out}");
        }
    }

    #[test]
    fn clamping_never_panics() {
        let d = Diagnostics::new("f", "é", vec![Diagnostic::new(1..99, "x")]);
        assert!(d.render().contains("error: x"));
    }
}
