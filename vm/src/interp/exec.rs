//! Builtin implementations on the host device, and moving tensor bytes between views and
//! host memory (honouring image row pitch).

use crate::ir::builtins::Builtin;
use crate::ir::host_tensor::{format_nested, load_f64, load_i64, store_f64, store_i64, HostTensor};
use crate::ir::types::{DType, Scope};
use crate::runtime::backend::Scalar;
use crate::runtime::memory::DeviceState;
use crate::runtime::memory::View;
use crate::runtime::shared::Shared;
use crate::runtime::value::Value;
use smallvec::SmallVec;
use std::io::Write;

/// A builtin's failure: the message (the interpreter adds where).
pub type Fail = Box<String>;

#[cold]
fn fail<T>(msg: String) -> Result<T, Fail> {
    Err(Box::new(msg))
}

/// Copies a view's elements, row-major and without padding, into a new host tensor.
pub fn read_view(v: &View) -> Result<HostTensor, Fail> {
    read_view_into(v, Vec::new())
}

/// [`read_view`] into `buf`'s memory (its contents are replaced): callers that read many
/// tensors recycle their buffers instead of faulting in fresh pages for each.
pub fn read_view_into(v: &View, mut buf: Vec<u8>) -> Result<HostTensor, Fail> {
    v.check_coherent_read().map_err(Box::new)?;
    let es = v.dtype.size();
    let n = v.numel();
    let len = n as usize * es;
    let (run, _) = v.runs();
    buf.clear();
    if v.handle.is_none() && run as usize * es == len && len > 0 {
        // One contiguous run on the host: copy without zero-filling first.
        // SAFETY: view creation checked that the run lies inside the storage.
        let src = unsafe { std::slice::from_raw_parts(v.storage.host_ptr().add(v.offset as usize), len) };
        buf.extend_from_slice(src);
        return Ok(HostTensor { dtype: v.dtype, shape: v.shape.to_vec(), data: buf });
    }
    buf.resize(len, 0);
    let mut data = buf;
    if let (Some(dev), Some(h)) = (v.storage.device_state().device(), v.handle) {
        dev.read(&h, v.image.as_ref(), &mut data).map_err(Box::new)?;
        return Ok(HostTensor { dtype: v.dtype, shape: v.shape.to_vec(), data });
    }
    let (run, stride) = v.runs();
    if run > 0 {
        let run_bytes = run as usize * es;
        for (r, chunk) in data.chunks_mut(run_bytes).enumerate() {
            let src = v.offset as usize + r * stride as usize;
            // SAFETY: view creation checked that every run lies inside the storage.
            unsafe { std::ptr::copy_nonoverlapping(v.storage.host_ptr().add(src), chunk.as_mut_ptr(), chunk.len()) }
        }
    }
    Ok(HostTensor { dtype: v.dtype, shape: v.shape.to_vec(), data })
}

/// Writes row-major element bytes into a view (same element count and dtype, checked);
/// refuses constants.
pub fn write_view(v: &View, data: &[u8]) -> Result<(), Fail> {
    if v.storage.is_constant() {
        return fail("cannot write to a constant".into());
    }
    store_bytes(v, data)
}

/// Writes row-major element bytes into any view, constants included (for loading them).
pub fn store_bytes(v: &View, data: &[u8]) -> Result<(), Fail> {
    let es = v.dtype.size();
    if data.len() as u64 != v.numel() * es as u64 {
        return fail(format!("expected {} bytes for the view, found {}", v.numel() * es as u64, data.len()));
    }
    if let (Some(dev), Some(h)) = (v.storage.device_state().device(), v.handle) {
        dev.write(&h, v.image.as_ref(), data).map_err(Box::new)?;
        v.record_write();
        return Ok(());
    }
    let (run, stride) = v.runs();
    if run > 0 {
        for (r, chunk) in data.chunks(run as usize * es).enumerate() {
            let dst = v.offset as usize + r * stride as usize;
            // SAFETY: as in `read_view`; `data` is host memory apart from any storage.
            unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), v.storage.host_ptr().add(dst), chunk.len()) }
        }
    }
    Ok(())
}

/// Bytes of the pattern a device fill writes per transfer (1 MiB).
const FILL_CHUNK: usize = 1 << 20;

/// Writes `pattern` (one element's bytes) into every element of a view, constants included
/// (for loading a `fill` constant), in place: no host buffer the size of the view. With
/// `fresh_zeroed` (a storage fresh from the host's zeroed memory), an all-zero pattern
/// writes nothing, so its pages stay untouched until read.
pub fn fill_view(v: &View, pattern: &[u8], fresh_zeroed: bool) -> Result<(), Fail> {
    let es = v.dtype.size();
    if pattern.len() != es {
        return fail(format!("expected a {es}-byte element to fill the view with, found {} bytes", pattern.len()));
    }
    let total = usize::try_from(v.numel() * es as u64).map_err(|e| Box::new(e.to_string()))?;
    if let (Some(dev), Some(h)) = (v.storage.device_state().device(), v.handle) {
        if v.image.is_some() || h.kind != crate::runtime::backend::ViewKind::Buffer {
            return store_bytes(v, &pattern.repeat(total / es));
        }
        // The buffer in pieces of at most FILL_CHUNK bytes of one repeated pattern.
        let chunk = pattern.repeat((FILL_CHUNK / es).min(total / es).max(1));
        let mut done = 0;
        while done < total {
            let n = chunk.len().min(total - done);
            let at = crate::runtime::backend::ViewHandle { offset: h.offset + done as u64, ..h };
            dev.write(&at, None, &chunk[..n]).map_err(Box::new)?;
            done += n;
        }
        v.record_write();
        return Ok(());
    }
    if fresh_zeroed && pattern.iter().all(|&b| b == 0) {
        return Ok(());
    }
    let (run, stride) = v.runs();
    let run_bytes = run as usize * es;
    if run_bytes == 0 {
        return Ok(());
    }
    for r in 0..total / run_bytes {
        let at = v.offset as usize + r * stride as usize;
        // SAFETY: view creation checked that every run lies inside the storage; the
        // storage's memory is not otherwise borrowed while the view is written.
        let dst = unsafe { std::slice::from_raw_parts_mut(v.storage.host_ptr().add(at), run_bytes) };
        fill_repeating(dst, pattern);
    }
    Ok(())
}

/// Fills `dst` with copies of `pattern` (whose length divides `dst`'s): a `memset` when
/// the pattern is one repeated byte, else one copy doubled in place, in pieces of at
/// most [`FILL_CHUNK`] bytes so that the source stays in cache.
fn fill_repeating(dst: &mut [u8], pattern: &[u8]) {
    let Some(&first) = pattern.first() else { return };
    if pattern.iter().all(|&b| b == first) {
        dst.fill(first);
        return;
    }
    let head = pattern.len().min(dst.len());
    dst[..head].copy_from_slice(&pattern[..head]);
    let cap = (FILL_CHUNK / pattern.len()).max(1) * pattern.len();
    let mut filled = head;
    while filled < dst.len() {
        let n = filled.min(cap).min(dst.len() - filled);
        dst.copy_within(..n, filled);
        filled += n;
    }
}

/// The device all `views` live on; an error if they live on different devices.
fn same_device<'a>(name: &str, views: &[&'a View]) -> Result<&'a DeviceState, Fail> {
    let first = &views[0].storage;
    for v in &views[1..] {
        if v.storage.device != first.device {
            return fail(format!(
                "@vm.{name}: tensors on different devices ({} and {}); copy them to one device first",
                first.device_state().caps.name,
                v.storage.device_state().caps.name
            ));
        }
    }
    Ok(first.device_state())
}

/// Runs builtin `b` as a device kernel when its tensors (output last) live on a device,
/// and says whether it did; checks that they share one device either way. The host loops
/// that run otherwise address host memory, so a device without the builtin's kernel
/// refuses it here.
fn ran_on_device(name: &str, b: Builtin, dtype: DType, views: &[&View], scalars: &[Scalar]) -> Result<bool, Fail> {
    let state = same_device(name, views)?;
    let Some(dev) = state.device() else { return Ok(false) };
    let (out, ins) = views.split_last().ok_or_else(|| Box::new(format!("@vm.{name}: no operands")))?;
    for v in ins {
        v.check_coherent_read().map_err(Box::new)?;
    }
    let mut operands: SmallVec<[_; 4]> = SmallVec::new();
    for v in views {
        operands.push(v.operand().ok_or_else(|| Box::new("internal: a device view without a handle".to_string()))?);
    }
    dev.call_builtin(b, dtype, &operands, scalars)
        .map_err(|e| Box::new(format!("@vm.{name} on device `{}`: {e}", state.caps.name)))?;
    out.record_write();
    Ok(true)
}

#[inline]
fn get(v: &View, i: u64) -> [u8; 8] {
    let mut b = [0u8; 8];
    // SAFETY: `i < numel`, and the element lies inside the storage.
    unsafe { std::ptr::copy_nonoverlapping(v.elem_ptr(i), b.as_mut_ptr(), v.dtype.size()) };
    b
}

#[inline]
fn put(v: &View, i: u64, b: &[u8; 8]) {
    // SAFETY: as in `get`; raw copies stay sound when views alias.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), v.elem_ptr(i), v.dtype.size()) };
}

fn writable<'a>(name: &str, v: &'a Shared<View>) -> Result<&'a Shared<View>, Fail> {
    if v.storage.is_constant() {
        return fail(format!("@vm.{name} cannot write to a constant tensor"));
    }
    Ok(v)
}

fn same_dtype(name: &str, views: &[&View]) -> Result<DType, Fail> {
    let d = views[0].dtype;
    if let Some(o) = views.iter().find(|v| v.dtype != d) {
        return fail(format!("@vm.{name}: dtypes differ: {d} and {}", o.dtype));
    }
    Ok(d)
}

fn shape_str(v: &View) -> String {
    format!("{}{:?}", v.dtype, &v.shape[..])
}

fn as_int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        _ => 0,
    }
}

fn as_float(v: &Value) -> f64 {
    match v {
        Value::Float(f) => *f,
        Value::Int(i) => *i as f64,
        _ => 0.0,
    }
}

fn as_tensor(v: &Value) -> Result<&Shared<View>, Fail> {
    match v {
        Value::Tensor(t) => Ok(t),
        other => fail(format!("expected a tensor, found {}", other.describe())),
    }
}

fn int_op(name: &str, a: i64, b: i64, r: Option<i64>) -> Result<Option<Value>, Fail> {
    match r {
        Some(v) => Ok(Some(Value::Int(v))),
        None if b == 0 && matches!(name, "idiv" | "irem") => fail(format!("@vm.{name}: division by zero ({a} / 0)")),
        None => fail(format!("@vm.{name}: integer overflow with {a} and {b}")),
    }
}

/// Runs a builtin. The verifier has checked arity and argument kinds.
pub fn call_builtin(b: Builtin, args: &[Value], out: &mut dyn Write) -> Result<Option<Value>, Fail> {
    let i = |k: usize| as_int(&args[k]);
    let f = |k: usize| as_float(&args[k]);
    let cmp = |c: bool| Ok(Some(Value::Int(c as i64)));
    match b {
        Builtin::Nop => Ok(None),
        Builtin::IAdd => int_op("iadd", i(0), i(1), i(0).checked_add(i(1))),
        Builtin::ISub => int_op("isub", i(0), i(1), i(0).checked_sub(i(1))),
        Builtin::IMul => int_op("imul", i(0), i(1), i(0).checked_mul(i(1))),
        Builtin::IDiv => int_op("idiv", i(0), i(1), i(0).checked_div(i(1))),
        Builtin::IRem => int_op("irem", i(0), i(1), i(0).checked_rem(i(1))),
        Builtin::IMin => Ok(Some(Value::Int(i(0).min(i(1))))),
        Builtin::IMax => Ok(Some(Value::Int(i(0).max(i(1))))),
        Builtin::IEq => cmp(i(0) == i(1)),
        Builtin::INe => cmp(i(0) != i(1)),
        Builtin::ILt => cmp(i(0) < i(1)),
        Builtin::ILe => cmp(i(0) <= i(1)),
        Builtin::IGt => cmp(i(0) > i(1)),
        Builtin::IGe => cmp(i(0) >= i(1)),
        Builtin::FAdd => Ok(Some(Value::Float(f(0) + f(1)))),
        Builtin::FSub => Ok(Some(Value::Float(f(0) - f(1)))),
        Builtin::FMul => Ok(Some(Value::Float(f(0) * f(1)))),
        Builtin::FDiv => Ok(Some(Value::Float(f(0) / f(1)))),
        Builtin::IToF => Ok(Some(Value::Float(i(0) as f64))),
        Builtin::FToI => {
            let v = f(0);
            if v.is_nan() || v < i64::MIN as f64 || v >= i64::MAX as f64 {
                return fail(format!("@vm.ftoi: {v:?} has no integer value"));
            }
            Ok(Some(Value::Int(v as i64)))
        }
        Builtin::ShapeOf => {
            let t = as_tensor(&args[0])?;
            Ok(Some(Value::Shape(t.shape.iter().copied().collect())))
        }
        Builtin::Dim => {
            let Value::Shape(s) = &args[0] else {
                return fail("@vm.dim expects a shape".into());
            };
            let k = i(1);
            let idx = if k < 0 { k + s.len() as i64 } else { k };
            match usize::try_from(idx).ok().and_then(|x| s.get(x)) {
                Some(d) => Ok(Some(Value::Int(*d))),
                None => fail(format!("@vm.dim: index {k} is out of range for a shape of rank {}", s.len())),
            }
        }
        Builtin::Rank => match &args[0] {
            Value::Shape(s) => Ok(Some(Value::Int(s.len() as i64))),
            _ => fail("@vm.rank expects a shape".into()),
        },
        Builtin::Numel => Ok(Some(Value::Int(as_tensor(&args[0])?.numel() as i64))),
        Builtin::NBytes => {
            let t = as_tensor(&args[0])?;
            Ok(Some(Value::Int((t.numel() * t.dtype.size() as u64) as i64)))
        }
        Builtin::Fill => {
            let t = writable("fill", as_tensor(&args[0])?)?;
            if ran_on_device("fill", b, t.dtype, &[t], &[Scalar::Compute(f(1))])? {
                return Ok(None);
            }
            let mut b = [0u8; 8];
            store_f64(t.dtype, f(1), &mut b);
            for k in 0..t.numel() {
                put(t, k, &b);
            }
            Ok(None)
        }
        Builtin::Iota => {
            let t = writable("iota", as_tensor(&args[0])?)?;
            let (start, step) = (f(1), f(2));
            if ran_on_device("iota", b, t.dtype, &[t], &[Scalar::Compute(start), Scalar::Compute(step)])? {
                return Ok(None);
            }
            for k in 0..t.numel() {
                let mut b = [0u8; 8];
                store_f64(t.dtype, start + k as f64 * step, &mut b);
                put(t, k, &b);
            }
            Ok(None)
        }
        Builtin::Copy => {
            let (src, dst) = (as_tensor(&args[0])?, writable("copy", as_tensor(&args[1])?)?);
            same_dtype("copy", &[src, dst])?;
            if src.numel() != dst.numel() {
                return fail(format!(
                    "@vm.copy: source {} and destination {} have different element counts",
                    shape_str(src),
                    shape_str(dst)
                ));
            }
            if ran_on_device("copy", b, src.dtype, &[src, dst], &[])? {
                return Ok(None);
            }
            // Through a temporary, so overlapping views copy as if simultaneously.
            let tmp = read_view(src)?;
            write_view(dst, &tmp.data)?;
            Ok(None)
        }
        Builtin::Add | Builtin::Sub | Builtin::Mul => {
            let name = b.sig().name;
            let (a, bb, o) = (as_tensor(&args[0])?, as_tensor(&args[1])?, writable(name, as_tensor(&args[2])?)?);
            let dtype = same_dtype(name, &[a, bb, o])?;
            let n = a.numel();
            if o.numel() != n || (bb.numel() != n && bb.numel() != 1) {
                return fail(format!(
                    "@vm.{name}: shapes do not match: a is {}, b is {}, out is {} (b may also have one element)",
                    shape_str(a),
                    shape_str(bb),
                    shape_str(o)
                ));
            }
            let bstep = (bb.numel() != 1) as u64;
            if ran_on_device(name, b, dtype, &[a, bb, o], &[Scalar::U64(bstep)])? {
                return Ok(None);
            }
            for k in 0..n {
                let (x, y) = (get(a, k), get(bb, k * bstep));
                let mut r = [0u8; 8];
                if dtype.is_float() {
                    let (x, y) = (load_f64(dtype, &x), load_f64(dtype, &y));
                    let v = match b {
                        Builtin::Add => x + y,
                        Builtin::Sub => x - y,
                        _ => x * y,
                    };
                    store_f64(dtype, v, &mut r);
                } else {
                    let (x, y) = (load_i64(dtype, &x), load_i64(dtype, &y));
                    let v = match b {
                        Builtin::Add => x.wrapping_add(y),
                        Builtin::Sub => x.wrapping_sub(y),
                        _ => x.wrapping_mul(y),
                    };
                    store_i64(dtype, v, &mut r);
                }
                put(o, k, &r);
            }
            Ok(None)
        }
        Builtin::Relu => {
            let (x, o) = (as_tensor(&args[0])?, writable("relu", as_tensor(&args[1])?)?);
            let dtype = same_dtype("relu", &[x, o])?;
            if x.numel() != o.numel() {
                return fail(format!("@vm.relu: x is {} but out is {}", shape_str(x), shape_str(o)));
            }
            if ran_on_device("relu", b, dtype, &[x, o], &[])? {
                return Ok(None);
            }
            for k in 0..x.numel() {
                let mut r = [0u8; 8];
                store_f64(dtype, load_f64(dtype, &get(x, k)).max(0.0), &mut r);
                put(o, k, &r);
            }
            Ok(None)
        }
        Builtin::MatMul => {
            let (a, bb, o) = (as_tensor(&args[0])?, as_tensor(&args[1])?, writable("matmul", as_tensor(&args[2])?)?);
            let dtype = same_dtype("matmul", &[a, bb, o])?;
            let ok = a.shape.len() == 2 && bb.shape.len() == 2 && o.shape.len() == 2;
            if !ok || a.shape[1] != bb.shape[0] || o.shape[0] != a.shape[0] || o.shape[1] != bb.shape[1] {
                return fail(format!(
                    "@vm.matmul: expected a[M, K], b[K, N], out[M, N]; found a {}, b {}, out {}",
                    shape_str(a),
                    shape_str(bb),
                    shape_str(o)
                ));
            }
            let (m, k, n) = (a.shape[0] as u64, a.shape[1] as u64, bb.shape[1] as u64);
            if ran_on_device("matmul", b, dtype, &[a, bb, o], &[Scalar::U64(k), Scalar::U64(n)])? {
                return Ok(None);
            }
            let av: Vec<f64> = (0..m * k).map(|e| load_f64(dtype, &get(a, e))).collect();
            let bv: Vec<f64> = (0..k * n).map(|e| load_f64(dtype, &get(bb, e))).collect();
            let mut acc = vec![0f64; (m * n) as usize];
            for r in 0..m as usize {
                for kk in 0..k as usize {
                    let x = av[r * k as usize + kk];
                    let brow = &bv[kk * n as usize..][..n as usize];
                    for (c, y) in acc[r * n as usize..][..n as usize].iter_mut().zip(brow) {
                        *c += x * y;
                    }
                }
            }
            for (e, v) in acc.iter().enumerate() {
                let mut r = [0u8; 8];
                store_f64(dtype, *v, &mut r);
                put(o, e as u64, &r);
            }
            Ok(None)
        }
        Builtin::Sum => {
            // Summed on the host in f64, in element order, on every device.
            let h = read_view(as_tensor(&args[0])?)?;
            Ok(Some(Value::Float(h.to_f64().iter().sum())))
        }
        Builtin::Item => {
            let t = as_tensor(&args[0])?;
            if t.dtype.is_float() || t.numel() != 1 {
                return fail(format!(
                    "@vm.item: the tensor must hold one bool or integer element, found {} with {} elements",
                    t.dtype,
                    t.numel()
                ));
            }
            let h = read_view(t)?;
            match h.to_i64().first() {
                Some(&v) => Ok(Some(Value::Int(v))),
                None => fail("@vm.item: the tensor holds no element".into()),
            }
        }
        Builtin::ToBlocked | Builtin::FromBlocked => {
            let name = b.sig().name;
            let (src, dst) = (as_tensor(&args[0])?, writable(name, as_tensor(&args[1])?)?);
            convert_blocked(name, src, dst, b == Builtin::ToBlocked).map(|_| None)
        }
        Builtin::Print => {
            let mut line = String::new();
            for (k, a) in args.iter().enumerate() {
                if k > 0 {
                    line.push(' ');
                }
                format_value(a, &mut line)?;
            }
            line.push('\n');
            if let Err(e) = out.write_all(line.as_bytes()) {
                return fail(format!("@vm.print: cannot write output: {e}"));
            }
            Ok(None)
        }
    }
}

/// `@vm.to_blocked` (`to` = true) and `@vm.from_blocked`: layout conversion between a plain
/// `[N, C, spatial...]` tensor and the blocked `[N, ceil(C/4), spatial..., 4]` one (a
/// `global.texture` view or a buffer view in that element order).
fn convert_blocked(name: &str, src: &View, dst: &View, to: bool) -> Result<(), Fail> {
    use crate::ops::blocked;
    let dtype = same_dtype(name, &[src, dst])?;
    let (plain, blk) = if to { (src, dst) } else { (dst, src) };
    let want = blocked::blocked_shape(&plain.shape);
    if plain.shape.len() < 3 || blk.shape[..] != want[..] {
        return fail(format!(
            "@vm.{name}: the plain tensor is {} and must be [N, C, spatial...]; its blocked form is {dtype}{want:?}, \
             found {}",
            shape_str(plain),
            shape_str(blk)
        ));
    }
    if plain.scope.is_texture() {
        return fail(format!(
            "@vm.{name}: the plain [N, C, spatial...] tensor must be a buffer view, found scope `{}`",
            plain.scope
        ));
    }
    if blk.scope.is_texture() && blk.scope != Scope::Texture {
        return fail(format!(
            "@vm.{name}: the blocked tensor is a buffer or a `global.texture` view, found scope `{}`",
            blk.scope
        ));
    }
    let state = same_device(name, &[src, dst])?;
    if let Some(dev) = state.device() {
        src.check_coherent_read().map_err(Box::new)?;
        let (Some(p), Some(k)) = (plain.operand(), blk.operand()) else {
            return fail("internal: a device view without a handle".into());
        };
        dev.convert_blocked(p, k, to).map_err(|e| Box::new(format!("@vm.{name}: {e}")))?;
        dst.record_write();
        return Ok(());
    }
    let h = read_view(src)?;
    let out = if to { blocked::block(&h) } else { blocked::unblock(&h, plain.shape[1]) };
    let out = out.map_err(|e| Box::new(format!("@vm.{name}: {e}")))?;
    write_view(dst, &out.data)
}

/// Appends the printed form of a value.
pub fn format_value(v: &Value, s: &mut String) -> Result<(), Fail> {
    match v {
        Value::Int(i) => s.push_str(&i.to_string()),
        Value::Float(f) => s.push_str(&format!("{f:?}")),
        Value::Shape(sh) => s.push_str(&format!("{:?}", &sh[..])),
        Value::Tensor(t) => {
            let h = read_view(t)?;
            format_nested(h.dtype, &h.shape, &h.data, s);
        }
        other => s.push_str(&other.describe()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::fill_repeating;

    #[test]
    fn fill_repeating_writes_every_element() {
        for (len, pattern) in [(0usize, &[1u8, 2][..]), (2, &[7, 8]), (6, &[1, 2, 3]), (4 << 20, &[1, 2, 3, 4])] {
            let mut dst = vec![0xAAu8; len];
            fill_repeating(&mut dst, pattern);
            assert!(dst.chunks(pattern.len()).all(|c| c == pattern), "{len} bytes of {pattern:?}");
        }
        let mut one = vec![0u8; 3 << 20];
        fill_repeating(&mut one, &[5, 5]);
        assert!(one.iter().all(|&b| b == 5));
    }
}
