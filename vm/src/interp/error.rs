//! Run-time errors: what went wrong, where (function, instruction, source line) and the
//! values involved.

use crate::ir::module::SourceLoc;
use std::fmt;

/// One frame of the call stack at the time of an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameLoc {
    pub func: String,
    pub pc: usize,
    pub loc: SourceLoc,
}

/// An error raised while running a program, or when invoking it through the API. Boxed:
/// every `Result` on the invocation path carries it, and one pointer keeps those results
/// small on the success path; the fields are reached through `Deref`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmError(Box<VmErrorData>);

/// What a [`VmError`] holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmErrorData {
    pub message: String,
    pub notes: Vec<String>,
    /// Innermost frame first; empty for errors outside any function (bad API arguments).
    pub stack: Vec<FrameLoc>,
    pub source_file: Option<String>,
}

impl std::ops::Deref for VmError {
    type Target = VmErrorData;
    fn deref(&self) -> &VmErrorData {
        &self.0
    }
}

impl std::ops::DerefMut for VmError {
    fn deref_mut(&mut self) -> &mut VmErrorData {
        &mut self.0
    }
}

impl From<VmErrorData> for VmError {
    #[cold]
    fn from(d: VmErrorData) -> VmError {
        VmError(Box::new(d))
    }
}

impl VmError {
    #[cold]
    pub fn api(message: impl Into<String>) -> VmError {
        VmErrorData { message: message.into(), notes: vec![], stack: vec![], source_file: None }.into()
    }

    /// The error's parts, by value.
    pub fn into_data(self) -> VmErrorData {
        *self.0
    }

    /// Where the error happened: `file:line:col` or `@func instruction N`.
    pub fn location(&self) -> Option<String> {
        let top = self.stack.first()?;
        let file = self.source_file.as_deref().unwrap_or("<module>");
        Some(if top.loc.line > 0 {
            format!("{file}:{}:{} (in @{}, instruction {})", top.loc.line, top.loc.col, top.func, top.pc)
        } else {
            format!("@{} instruction {}", top.func, top.pc)
        })
    }
}

/// The message, then the location, notes and callers on their own lines. Without an
/// `error: ` prefix: whoever prints the error adds it (as for every other error), so that
/// it is never doubled.
impl fmt::Display for VmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(l) = self.location() {
            write!(f, "\n  --> {l}")?;
        }
        for n in &self.notes {
            write!(f, "\n  = note: {n}")?;
        }
        const SHOWN: usize = 4;
        let callers = self.stack.len().saturating_sub(1);
        for fr in self.stack.iter().skip(1).take(SHOWN) {
            if fr.loc.line > 0 {
                write!(f, "\n  called from @{} at line {}", fr.func, fr.loc.line)?;
            } else {
                write!(f, "\n  called from @{} instruction {}", fr.func, fr.pc)?;
            }
        }
        if callers > SHOWN {
            write!(f, "\n  ... and {} more callers", callers - SHOWN)?;
        }
        Ok(())
    }
}

impl std::error::Error for VmError {}
