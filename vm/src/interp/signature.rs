//! What an invocation checks of a function's signature, remembered between invocations.
//!
//! An embedding calls the same function over and over with tensors of the same type. Each
//! call checks every argument against its declared type and every result against its
//! declared result type (`type_admits`: the dtype and each dimension); and binding looks
//! at every tensor argument for a storage or a placement it must honour. For a small
//! model with every kernel a no-op, that was a tenth of an inference.
//!
//! [`Signatures`] keeps, per parameter and per result, the type it last admitted as one
//! word: a view's (dtype, shape) id in the VM's runtime ([`crate::runtime::memory::ViewClass`]) or
//! a slice's geometry number. Whether a type admits a value depends only on the value's
//! dtype and shape, and both ids fix them, so a value with the remembered id is admitted
//! without looking at its dims. Ids are per runtime: a view of another runtime has no key
//! and is checked in full, as are values without one (a texture, a scalar).

use crate::ir::bytecode::Reg;
use crate::ir::module::{Function, Module};
use crate::ir::types::Type;
use crate::runtime::memory::Runtime;
use crate::runtime::value::Value;
use std::cell::Cell;
use std::rc::Rc;

/// No remembered type (a key is never 0: type ids start at 1 and slice keys have a tag).
const NONE: u32 = 0;
/// Tags a slice's geometry number, so it cannot equal a view's type id.
const SLICE: u32 = 1 << 31;

/// Per function of a module, what its invocations last admitted.
pub(crate) struct Signatures {
    funcs: Box<[FuncSignature]>,
}

struct FuncSignature {
    /// The symbolic dimensions of the parameters, in order.
    syms: Box<[SymUse]>,
    /// Some result type has a symbolic dimension.
    result_syms: bool,
    /// One per parameter, then one per result.
    admitted: Box<[Cell<u32>]>,
    params: usize,
    /// No storage parameter and no placed tensor parameter: binding has nothing to do
    /// for arguments of this VM's runtime.
    binds_nothing: bool,
}

impl Signatures {
    pub(crate) fn new(module: &Module) -> Signatures {
        let cells = |n: usize| (0..n).map(|_| Cell::new(NONE)).collect();
        let funcs = module
            .funcs
            .values()
            .map(|f| FuncSignature {
                syms: sym_uses(f),
                result_syms: f.results.iter().any(|t| t.symbols().next().is_some()),
                admitted: cells(f.params.len() + f.results.len()),
                params: f.params.len(),
                binds_nothing: f.placements.is_empty() && !f.params.iter().any(|t| matches!(t, Type::Storage)),
            })
            .collect();
        Signatures { funcs }
    }

    /// Checks `v` against `t`, the declared type of slot `slot` of function `func`:
    /// parameter `i` is slot `i`; result `i` is [`Signatures::result_slot`].
    #[inline]
    pub(crate) fn check(&self, rt: &Rc<Runtime>, func: usize, slot: usize, v: &Value, t: &Type) -> Result<(), String> {
        match self.funcs.get(func).and_then(|s| s.admitted.get(slot)) {
            Some(memo) => admit(memo, rt, v, t),
            None => check_type(v, t),
        }
    }

    /// The symbolic dimensions of `func`'s parameters (empty for most functions).
    #[inline(always)]
    pub(crate) fn syms(&self, func: usize) -> &[SymUse] {
        self.funcs.get(func).map_or(&[], |s| &s.syms)
    }

    /// True when a result type of `func` has a symbolic dimension.
    #[inline(always)]
    pub(crate) fn result_syms(&self, func: usize) -> bool {
        self.funcs.get(func).is_some_and(|s| s.result_syms)
    }

    /// The slot of result `i` of function `func`: after its parameters.
    #[inline]
    pub(crate) fn result_slot(&self, func: usize, i: usize) -> usize {
        self.funcs.get(func).map_or(usize::MAX, |s| s.params.saturating_add(i))
    }

    /// True when binding the (type-checked) arguments `args` of `func` does nothing: the
    /// function has no storage or placed parameters and every tensor argument lives in
    /// `rt`, so none needs a copy.
    #[inline]
    pub(crate) fn binds_nothing(&self, rt: &Rc<Runtime>, func: usize, args: &[Value]) -> bool {
        self.funcs.get(func).is_some_and(|s| s.binds_nothing)
            && args.iter().all(|a| match a {
                Value::Tensor(v) => v.storage.in_runtime(rt),
                _ => true,
            })
    }
}

/// One symbolic dimension of a parameter: dimension `dim` of parameter `param` binds (or,
/// after its first occurrence `first`, must equal) the `int` register `reg`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SymUse {
    param: u32,
    dim: u32,
    reg: u32,
    max: Option<i64>,
    /// The index in the list of this symbol's first use; `None` for the first itself.
    first: Option<u32>,
}

fn sym_uses(f: &Function) -> Box<[SymUse]> {
    let mut out: Vec<SymUse> = Vec::new();
    for (p, t) in f.params.iter().enumerate() {
        for (d, reg, max) in t.symbols() {
            let first = out.iter().position(|u| u.reg == reg).map(|i| i as u32);
            out.push(SymUse { param: p as u32, dim: d as u32, reg, max, first });
        }
    }
    out.into_boxed_slice()
}

/// The size of dimension `d` of a tensor value.
fn dim_of(v: &Value, d: usize) -> Option<i64> {
    match v {
        Value::Tensor(view) => view.shape.get(d).copied(),
        Value::Slice(..) => match v.materialized() {
            Ok(Value::Tensor(view)) => view.shape.get(d).copied(),
            _ => None,
        },
        _ => None,
    }
}

/// Binds the symbols of `f` (its [`Signatures::syms`] `uses`) from the type-checked
/// arguments `arg(i)`, calling `set(reg, size)` once per symbol. An argument whose size
/// breaks a relation (another occurrence of the symbol) or a bound is refused with the
/// argument, the dimension and the relation.
pub(crate) fn bind_symbols<'v>(
    f: &Function,
    uses: &[SymUse],
    arg: impl Fn(usize) -> Option<&'v Value>,
    mut set: impl FnMut(u32, i64),
) -> Result<(), String> {
    let size = |u: &SymUse| arg(u.param as usize).and_then(|v| dim_of(v, u.dim as usize));
    let argument = |u: &SymUse| format!("argument {} (%{}) of @{}", u.param + 1, f.reg_name(Reg(u.param)), f.name);
    for u in uses {
        let Some(v) = size(u) else { continue }; // not a tensor: refused by its type check
        let sym = format!("%{}", f.reg_name(Reg(u.reg)));
        match u.first.and_then(|k| uses.get(k as usize)) {
            None => {
                if let Some(max) = u.max.filter(|m| v > *m) {
                    return Err(format!(
                        "{}: dimension {} is {v}, over the bound of {sym} ({sym} <= {max})",
                        argument(u),
                        u.dim
                    ));
                }
                set(u.reg, v);
            }
            Some(first) => {
                let w = size(first).unwrap_or(v);
                if v != w {
                    return Err(format!(
                        "{}: dimension {} is {v}, but {sym} = {w} (dimension {} of argument {} (%{}))",
                        argument(u),
                        u.dim,
                        first.dim,
                        first.param + 1,
                        f.reg_name(Reg(first.param))
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Checks the symbolic dimensions of result value `v` against the symbols' values
/// (`value(reg)`).
pub(crate) fn check_result_symbols(
    f: &Function,
    t: &Type,
    v: &Value,
    value: impl Fn(u32) -> Option<i64>,
) -> Result<(), String> {
    for (d, reg, _) in t.symbols() {
        if let (Some(got), Some(want)) = (dim_of(v, d), value(reg)) {
            if got != want {
                return Err(format!(
                    "dimension {d} is {got}, but its type {} says %{} = {want}",
                    f.type_text(t),
                    f.reg_name(Reg(reg))
                ));
            }
        }
    }
    Ok(())
}

/// The remembered key of `v`, if it has one in runtime `rt`.
#[inline(always)]
fn key(rt: &Rc<Runtime>, v: &Value) -> u32 {
    match v {
        Value::Tensor(view) if view.storage.in_runtime(rt) => view.class.type_id(),
        Value::Slice(g, st) if *g < SLICE && st.in_runtime(rt) => SLICE | g,
        _ => NONE,
    }
}

#[inline(always)]
fn admit(memo: &Cell<u32>, rt: &Rc<Runtime>, v: &Value, t: &Type) -> Result<(), String> {
    let k = key(rt, v);
    if k != NONE && memo.get() == k {
        return Ok(());
    }
    check_type(v, t)?;
    memo.set(k);
    Ok(())
}

/// Checks a value against a declared type (kinds, and dtype/shape for typed tensors).
pub(crate) fn check_type(v: &Value, t: &Type) -> Result<(), String> {
    match (v, t) {
        (Value::Tensor(view), Type::Tensor { .. }) => {
            if crate::ir::verify::type_admits(t, view.dtype, &view.shape) {
                Ok(())
            } else {
                Err(format!("expected {t}, found {}{:?}", view.dtype, &view.shape[..]))
            }
        }
        (Value::Slice(..), Type::Tensor { .. }) => check_type(&v.materialized()?, t),
        (v, t) if v.kind() == Some(t.kind()) => Ok(()),
        (v, t) => Err(format!("expected {t}, found {}", v.describe())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::types::{DType, Dim};
    use crate::{DeviceCaps, HostTensor, HostValue, Vm};
    use std::sync::Arc;

    fn module(params: Vec<Type>) -> Module {
        let mut mb = crate::ir::builder::ModuleBuilder::new("sig");
        let mut f = mb.function("main", params, vec![]);
        f.ret(&[]);
        mb.add_function(f);
        mb.build().expect("a module")
    }

    fn f32_dims(dims: &[i64]) -> Type {
        Type::Tensor { dtype: DType::F32, dims: dims.iter().map(|&d| Dim::Known(d)).collect() }
    }

    #[test]
    fn a_remembered_type_admits_only_the_same_dtype_and_shape() {
        let t = f32_dims(&[2, 3]);
        let vm = Vm::new(Arc::new(module(vec![t.clone()])), vec![DeviceCaps::host()]).expect("a VM");
        let sig = Signatures::new(vm.module());
        let upload = |dtype, shape: &[i64]| {
            let n: i64 = shape.iter().product();
            let h = HostTensor::zeros(dtype, shape).expect("a tensor");
            assert_eq!(h.data.len() as i64, n * 4);
            vm.to_value(&HostValue::Tensor(h)).expect("uploaded")
        };
        let rt = vm.runtime();
        let good = upload(DType::F32, &[2, 3]);
        assert_eq!(sig.check(rt, 0, 0, &good, &t), Ok(()));
        assert_ne!(sig.funcs[0].admitted[0].get(), NONE, "the admitted type is remembered");
        assert_eq!(sig.check(rt, 0, 0, &good, &t), Ok(()));
        // A different shape or dtype is checked in full, and refused.
        for (dtype, shape) in [(DType::F32, &[3, 2][..]), (DType::I32, &[2, 3][..]), (DType::F32, &[6][..])] {
            let bad = upload(dtype, shape);
            let e = sig.check(rt, 0, 0, &bad, &t).expect_err("refused");
            assert!(e.starts_with("expected f32[2, 3]"), "{e}");
        }
        // ... and what was remembered still admits the good type.
        assert_eq!(sig.check(rt, 0, 0, &good, &t), Ok(()));
    }

    #[test]
    fn a_view_of_another_runtime_is_checked_in_full() {
        let t = f32_dims(&[4]);
        let m = Arc::new(module(vec![t.clone()]));
        let vm = Vm::new(m.clone(), vec![DeviceCaps::host()]).expect("a VM");
        let other = Vm::new(m, vec![DeviceCaps::host()]).expect("another VM");
        let sig = Signatures::new(vm.module());
        let h = HostTensor::zeros(DType::F32, &[4]).expect("a tensor");
        let foreign = other.to_value(&HostValue::Tensor(h)).expect("uploaded");
        assert_eq!(sig.check(vm.runtime(), 0, 0, &foreign, &t), Ok(()));
        assert_eq!(sig.funcs[0].admitted[0].get(), NONE, "another runtime's type id means nothing here");
        assert!(!sig.binds_nothing(vm.runtime(), 0, std::slice::from_ref(&foreign)), "it may need a copy");
    }
}
