//! Files named in the text: `file("...")` constants and kernel sources, read relative to
//! the `.rxa` file, and OpenCL kernel declarations.

use super::consts::*;
use super::state::*;

/// The largest kernel source `file("...")` reads.
pub(super) const MAX_KERNEL_SOURCE: u64 = 16 << 20;

/// At most `limit + 1` bytes of a regular file. Devices, FIFOs and directories are refused:
/// their size says nothing (`/dev/zero` has size 0 and never ends).
pub(super) fn read_regular(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut v = Vec::new();
    f.take(limit.saturating_add(1)).read_to_end(&mut v)?;
    Ok(v)
}

impl Asm<'_> {
    pub(super) fn file_bytes(&mut self, s: StrLit<'_>, nbytes: Option<u64>, type_text: &str) -> Option<Vec<u8>> {
        let rel = match decode_string(s) {
            Ok(p) => p,
            Err(d) => {
                self.err(d);
                return None;
            }
        };
        let path = match self.base_dir {
            Some(b) => b.join(&rel),
            None => Path::new(&rel).to_path_buf(),
        };
        // Check the size before reading, so a wrong path to a huge file fails fast.
        let meta_len = std::fs::metadata(&path).map(|m| m.len());
        let bytes = match meta_len {
            Ok(len) if Some(len) != nbytes => Err(len),
            Ok(len) => match read_regular(&path, len) {
                Ok(b) => Ok(b),
                Err(e) => {
                    self.err(file_error(s, &rel, &path, &e));
                    return None;
                }
            },
            Err(e) => {
                self.err(file_error(s, &rel, &path, &e));
                return None;
            }
        };
        match bytes {
            Ok(b) if Some(b.len() as u64) == nbytes => Some(b),
            Ok(b) => {
                self.err(size_error(s, &rel, b.len() as u64, nbytes, type_text));
                None
            }
            Err(len) => {
                self.err(size_error(s, &rel, len, nbytes, type_text));
                None
            }
        }
    }
}

impl Asm<'_> {
    pub(super) fn kernel(&mut self, k: &KernelDecl<'_>) -> UserKernel {
        let name = k.name.text.to_string();
        let entry = decode_string(k.entry).unwrap_or_else(|d| {
            self.err(d);
            String::new()
        });
        let source = match k.source {
            KernelSource::Str(s) => decode_string(s),
            KernelSource::File(s) => self.file_text(s),
        }
        .unwrap_or_else(|d| {
            self.err(d);
            String::new()
        });
        UserKernel { name, entry, source }
    }

    /// The text of `file("path")`, relative to the `.rxa` file.
    pub(super) fn file_text(&self, s: StrLit<'_>) -> Result<String, Diagnostic> {
        let rel = decode_string(s)?;
        let path = match self.base_dir {
            Some(b) => b.join(&rel),
            None => Path::new(&rel).to_path_buf(),
        };
        let bytes = read_regular(&path, MAX_KERNEL_SOURCE).map_err(|e| file_error(s, &rel, &path, &e))?;
        if bytes.len() as u64 > MAX_KERNEL_SOURCE {
            return Err(Diagnostic::new(s.span, format!("`{rel}` is larger than {MAX_KERNEL_SOURCE} bytes"))
                .with_label("kernel source too large"));
        }
        String::from_utf8(bytes).map_err(|e| {
            Diagnostic::new(s.span, format!("`{rel}` is not UTF-8 text"))
                .with_label("not OpenCL C source")
                .with_note(format!("invalid UTF-8 at byte {}", e.utf8_error().valid_up_to()))
        })
    }
}

pub(super) fn file_error(s: StrLit<'_>, rel: &str, path: &Path, e: &std::io::Error) -> Diagnostic {
    Diagnostic::new(s.span, format!("cannot read `{rel}`: {e}"))
        .with_label("file not readable")
        .with_note(format!("looked for {}", path.display()))
        .with_note("paths are relative to the directory of the .rxa file")
}

pub(super) fn size_error(s: StrLit<'_>, rel: &str, len: u64, nbytes: Option<u64>, type_text: &str) -> Diagnostic {
    Diagnostic::new(s.span, format!("`{rel}` has the wrong size"))
        .with_label(format!("this file has {len} bytes"))
        .with_note(match nbytes {
            Some(n) => format!("{type_text} needs exactly {n} bytes (raw little-endian elements)"),
            None => format!("{type_text} is too large"),
        })
}
