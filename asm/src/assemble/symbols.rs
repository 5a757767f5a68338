//! Dimension symbols of function signatures (`%n` in `f32[%n, 3]`) and their `where`
//! bounds.

use crate::ast::*;
use crate::diag::Diagnostic;
use rxvm_vm::types::Dim;

/// The dimension symbols of a function signature (`%n` in `f32[%n, 3]`): each is the
/// register after the parameters', in order of first appearance in the parameter types,
/// with the bound its `where` clause gives.
pub(crate) struct SymTable<'a> {
    names: Vec<&'a str>,
    bounds: Vec<Option<i64>>,
    params: Vec<&'a str>,
}

impl<'a> SymTable<'a> {
    pub(crate) fn new(f: &FuncDecl<'a>) -> SymTable<'a> {
        let params: Vec<&str> = f.params.iter().map(|p| p.name.text).collect();
        let mut names: Vec<&str> = Vec::new();
        for p in f.params {
            if let TypeKind::Tensor { dims, .. } = p.ty.kind {
                for d in dims {
                    if let DimExpr::Sym(n) = d {
                        if !params.contains(&n.text) && !names.contains(&n.text) {
                            names.push(n.text);
                        }
                    }
                }
            }
        }
        let bounds = names
            .iter()
            .map(|n| {
                let b = f.bounds.iter().find(|b| b.sym.text == *n)?;
                b.max.value.and_then(|v| i64::try_from(v).ok()).filter(|v| *v >= 0)
            })
            .collect();
        SymTable { names, bounds, params }
    }

    /// The symbols in the order of their registers (after the parameters').
    pub(crate) fn names(&self) -> &[&'a str] {
        &self.names
    }

    pub(crate) fn resolve(&self, n: &Name<'_>) -> Result<Dim, Diagnostic> {
        if let Some(k) = self.names.iter().position(|s| *s == n.text) {
            return Ok(Dim::Sym { reg: (self.params.len() + k) as u32, max: self.bounds[k] });
        }
        Err(if self.params.contains(&n.text) {
            Diagnostic::new(n.span, format!("`%{}` is a parameter, not a dimension symbol", n.text))
                .with_label("a dimension symbol needs a name of its own")
        } else {
            Diagnostic::new(n.span, format!("the symbol `%{}` is bound by no parameter", n.text))
                .with_label("not in any parameter type")
                .with_note("a result's dimension symbols must appear in a parameter type, which binds them at entry")
        })
    }

    /// What is wrong with the `where` clause: a bound of an unknown symbol, a repeated
    /// or an invalid bound.
    pub(crate) fn bound_errors(&self, f: &FuncDecl<'_>) -> Vec<Diagnostic> {
        let mut errs = Vec::new();
        for (k, b) in f.bounds.iter().enumerate() {
            if !self.names.contains(&b.sym.text) {
                errs.push(
                    Diagnostic::new(
                        b.sym.span,
                        format!("`%{}` is not a dimension symbol of @{}", b.sym.text, f.name.text),
                    )
                    .with_label("bounded here")
                    .with_note("a `where` clause bounds symbols used in the parameter types, e.g. `f32[%n, 3]`"),
                );
            } else if let Some(first) = f.bounds[..k].iter().find(|c| c.sym.text == b.sym.text) {
                errs.push(
                    Diagnostic::new(b.sym.span, format!("`%{}` is bounded twice", b.sym.text))
                        .with_label("bounded again here")
                        .with_secondary(first.sym.span, "first bounded here"),
                );
            }
            if b.max.value.and_then(|v| i64::try_from(v).ok()).filter(|v| *v >= 0).is_none() {
                errs.push(
                    Diagnostic::new(b.max.span, "a symbol's bound must be a non-negative i64")
                        .with_label("invalid bound"),
                );
            }
        }
        errs
    }
}
