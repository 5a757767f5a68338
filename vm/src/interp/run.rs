//! The dispatch loop: frames on one register stack, one `match` per instruction, register
//! access, builtins, calls and returns. Allocation instructions are in `alloc.rs`,
//! operator calls in `call_op.rs`.

use super::sites::*;
use super::state::*;
use super::vm::Vm;
use crate::interp::error::{FrameLoc, VmError, VmErrorData};
use crate::interp::exec::call_builtin;
use crate::interp::invoke::named;
use crate::interp::signature::{bind_symbols, check_result_symbols, check_type};
use crate::interp::specialize::Op;
use crate::ir::builtins::Builtin;
use crate::ir::bytecode::EntityRef;
use crate::ir::bytecode::{Arg, ArgKind, FuncId, Instr, Reg};
use crate::ir::module::{Function, Literal, Module};
use crate::runtime::memory::{Storage, View};
use crate::runtime::shared::Shared;
use crate::runtime::value::Value;
use smallvec::SmallVec;
use std::io::Write;
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};

/// The fast path of a specialised int builtin ([`crate::interp::specialize`]) with register
/// operands: both ints and no overflow, the result is written in place; anything else runs
/// the original instruction ([`Vm::general_builtin`]), which reports the error.
macro_rules! int_rr {
    ($vm:ident, $m:ident, $f:ident, $base:ident, $at:ident, $x:ident, $b:ident) => {
        match ($vm.reg($base, $x.a), $vm.reg($base, $x.b)) {
            (Value::Int(a), Value::Int(b)) => match crate::interp::specialize::int_builtin(Builtin::$b, *a, *b) {
                Some(r) => {
                    $vm.set_int($base, $x.dst, r);
                    Ok(())
                }
                None => $vm.general_builtin($m, $f, $base, $at),
            },
            _ => $vm.general_builtin($m, $f, $base, $at),
        }
    };
}

/// [`int_rr`] with an immediate second operand.
macro_rules! int_ri {
    ($vm:ident, $m:ident, $f:ident, $base:ident, $at:ident, $x:ident, $b:ident) => {
        match $vm.reg($base, $x.a) {
            Value::Int(a) => match crate::interp::specialize::int_builtin(Builtin::$b, *a, $x.b as i64) {
                Some(r) => {
                    $vm.set_int($base, $x.dst, r);
                    Ok(())
                }
                None => $vm.general_builtin($m, $f, $base, $at),
            },
            _ => $vm.general_builtin($m, $f, $base, $at),
        }
    };
}

/// The view object of slice `g` of `st` as a value (out of line: `read_reg` is inlined
/// into `exec`).
#[inline(never)]
pub(crate) fn slice_value(g: u32, st: &Shared<Storage>) -> Step<Value> {
    View::of_slice(g, st).map(Value::Tensor).or_else(fault)
}

/// The error of a run stopped by its interrupt flag or its timeout.
#[cold]
#[inline(never)]
fn stop_fault(why: Stopped) -> Fault {
    let note = match why {
        Stopped::Interrupted => "the run was interrupted (Ctrl-C or Interrupt::raise) before this instruction",
        Stopped::TimedOut(_) => "raise it with --timeout or Limits::timeout",
    };
    Fault { message: why.to_string(), notes: vec![note.into()] }
}

/// Function `fid` of `m` and its code in `ops`, without bounds checks.
///
/// # Safety
/// `fid` is below `m.funcs.len()`, and `ops` has one entry per function of `m`.
#[inline(always)]
pub(crate) unsafe fn func_code<'a>(m: &'a Module, ops: &'a [Box<[Op]>], fid: usize) -> (&'a Function, &'a [Op]) {
    debug_assert!(fid < m.funcs.len() && ops.len() == m.funcs.len());
    // SAFETY: the caller's promise.
    unsafe { (m.funcs.as_values_slice().get_unchecked(fid), ops.get_unchecked(fid)) }
}

impl Vm {
    #[cold]
    pub(crate) fn error_at(&self, m: &Module, fid: usize, pc: usize, f: Fault) -> VmError {
        let mut stack = Vec::new();
        let at = |func: usize, pc: usize| {
            let func_ref = &m.funcs[FuncId::new(func)];
            FrameLoc { func: func_ref.name.clone(), pc, loc: func_ref.loc(pc) }
        };
        stack.push(at(fid, pc));
        // Callers resume after their call instruction.
        for fr in self.frames.iter().rev().skip(1) {
            stack.push(at(fr.func as usize, fr.pc.saturating_sub(1)));
        }
        VmErrorData { message: f.message, notes: f.notes, stack, source_file: m.source_file.clone() }.into()
    }

    #[inline]
    pub(crate) fn run(&mut self, m: &Module, entry: FuncId, args: Vec<Value>) -> Result<(), VmError> {
        let depth0 = self.frames.len();
        self.push_entry(m, entry, args);
        self.run_from(m, depth0)
    }

    /// Runs the frame just pushed above depth `depth0` to its return; its values wait in
    /// `returned`.
    #[inline(always)]
    pub(crate) fn run_from(&mut self, m: &Module, depth0: usize) -> Result<(), VmError> {
        // Without an instruction limit, a timeout or an interrupt flag the loop skips its
        // per-instruction check.
        let exit = if self.limits.checked() {
            self.run_checked(m, depth0)
        } else {
            self.exec::<false, false, _>(m, depth0, |_| false)
        };
        match exit {
            Ok(Exit::Returned) => Ok(()),
            Ok(Exit::Paused) => Err(VmError::api("internal: a run paused without a debugger")),
            Err(e) => Err(e),
        }
    }

    /// [`Vm::exec`]'s checked instance, with the interrupt flag and timeout timer of
    /// [`Limits`] set up around it. Out of line: the unchecked path stays as it was.
    #[inline(never)]
    pub(crate) fn run_checked(&mut self, m: &Module, depth0: usize) -> Result<Exit, VmError> {
        let outer = self.start_watch()?;
        let r = self.exec::<false, true, _>(m, depth0, |_| false);
        self.watch = outer;
        r
    }

    /// Starts the [`Watch`] of a checked run when it has a timeout or an interrupt flag;
    /// returns the one of an enclosing run, if any, for the caller to put back when the
    /// run ends (its flag stays alive meanwhile: the enclosing `exec` points into it).
    pub(crate) fn start_watch(&mut self) -> Result<Option<Watch>, VmError> {
        let outer = self.watch.take();
        if self.limits.timeout.is_some() || self.limits.interrupt.is_some() {
            match Watch::start(&self.limits) {
                Ok(w) => self.watch = Some(w),
                Err(e) => {
                    self.watch = outer;
                    return Err(VmError::api(e));
                }
            }
        }
        Ok(outer)
    }

    /// The stop a checked run found raised, taken from its watch.
    #[cold]
    #[inline(never)]
    fn take_stop(&self) -> Option<Stopped> {
        self.watch.as_ref().and_then(|w| w.flag.take(self.limits.timeout))
    }

    /// Pushes the frame of `entry` with its arguments in its first registers.
    /// The emptied argument buffer becomes `returned`, which the return values fill: one
    /// buffer per invocation, not one for the arguments and one for the results.
    #[inline]
    pub(crate) fn push_entry(&mut self, m: &Module, entry: FuncId, mut args: Vec<Value>) {
        let base = self.push_frame(m, entry);
        if args.is_empty() {
            // Nothing to drop: skip the call into the drop loop.
            std::mem::forget(args);
            return;
        }
        for (slot, v) in self.regs[base..].iter_mut().zip(args.drain(..)) {
            // The frame's registers are new: `Null`, nothing to drop.
            std::mem::forget(std::mem::replace(slot, v));
        }
        let syms = self.signatures.syms(entry.index());
        if !syms.is_empty() {
            self.bind_entry_symbols(m, entry, base);
        }
        if self.returned.capacity() == 0 {
            self.returned = args;
        }
    }

    /// Writes the symbols of `entry`'s frame at `base` from its arguments (checked by
    /// `check_args` before every entry).
    #[cold]
    #[inline(never)]
    fn bind_entry_symbols(&mut self, m: &Module, entry: FuncId, base: usize) {
        let f = &m.funcs[entry];
        let mut vals: SmallVec<[(u32, i64); 4]> = SmallVec::new();
        let regs = &self.regs[base..];
        let _ = bind_symbols(f, self.signatures.syms(entry.index()), |i| regs.get(i), |r, v| vals.push((r, v)));
        for (r, v) in vals {
            if let Some(slot) = self.regs.get_mut(base + r as usize) {
                *slot = Value::Int(v);
            }
        }
    }

    /// Binds the symbols of a callee's frame at `base` from its arguments.
    #[cold]
    #[inline(never)]
    fn bind_callee_symbols(&mut self, callee: &Function, fid: usize, base: usize) -> Step<()> {
        let mut vals: SmallVec<[(u32, i64); 4]> = SmallVec::new();
        let regs = &self.regs[base..];
        if let Err(msg) = bind_symbols(callee, self.signatures.syms(fid), |i| regs.get(i), |r, v| vals.push((r, v))) {
            return fault(msg);
        }
        for (r, v) in vals {
            if let Some(slot) = self.regs.get_mut(base + r as usize) {
                *slot = Value::Int(v);
            }
        }
        Ok(())
    }

    /// Pushes the frame of `entry` with its registers null; returns its base.
    #[inline(always)]
    pub(crate) fn push_frame(&mut self, m: &Module, entry: FuncId) -> usize {
        let f = &m.funcs[entry];
        let base = self.regs.len();
        // The guard skips a `resize` that does nothing: an empty invocation is a few dozen
        // instructions, and each no-op call was a tenth more.
        if f.num_regs > 0 {
            self.regs.resize_with(base + f.num_regs as usize, || Value::Null);
        }
        self.frames.push(Frame { func: entry.0, pc: 0, base, ret_list: 0, ret_ndst: 0 });
        base
    }

    /// Runs from the top frame's `pc` until the frame at depth `depth0` returns. With
    /// `DEBUG`, `stop` is asked before each instruction and a `true` pauses there (the top
    /// frame keeps its `pc`; on an error too, so a debugger can inspect the state). Without
    /// it, the check compiles away.
    pub(crate) fn exec<const DEBUG: bool, const LIMITED: bool, S: FnMut(&crate::interp::debug::PausePoint) -> bool>(
        &mut self,
        m: &Module,
        depth0: usize,
        mut stop: S,
    ) -> Result<Exit, VmError> {
        let Some(top) = self.frames.last() else {
            return Err(VmError::api("internal: no frame to run"));
        };
        let mut fid = top.func as usize;
        // SAFETY: as for `module_ptr`: `ops` is private, set only by the constructors and
        // never reassigned, so the slices live as long as `self`; `ops` does not outlive
        // this call. (An `Rc` clone here was a twentieth of an empty invocation.)
        let ops: &[Box<[Op]>] = unsafe { &*Rc::as_ptr(&self.ops) };
        // Checked once here: `ops` has one entry per function, and every later function
        // index is a verified call target (below the function count) or a frame's.
        if fid >= m.funcs.len() || ops.len() != m.funcs.len() {
            return Err(VmError::api("internal: the frame's function is not in the module"));
        }
        // SAFETY: just checked.
        let (mut f, mut code) = unsafe { func_code(m, ops, fid) };
        let mut base = top.base;
        let mut pc = top.pc;
        let mut count: u64 = 0;
        let limit = self.limits.max_instructions.unwrap_or(u64::MAX);
        // The interrupt flag of a checked run ([`Vm::run_checked`] holds it in `watch`), or
        // one never raised.
        static NEVER: AtomicU8 = AtomicU8::new(0);
        let flag: *const AtomicU8 =
            if LIMITED { self.watch.as_ref().map_or(&NEVER, |w| w.flag.flag()) } else { &NEVER };
        // Every entry into `exec` has applied `Limits::max_live_bytes` (see `apply_live_limit`).
        let result: Result<Exit, (usize, Box<Fault>)> = loop {
            // SAFETY: `flag` is `NEVER` or in `self.watch`, which only the callers of `exec`
            // set and clear, around it.
            if LIMITED && unsafe { &*flag }.load(Ordering::Relaxed) != 0 {
                if let Some(why) = self.take_stop() {
                    if DEBUG {
                        if let Some(top) = self.frames.last_mut() {
                            top.pc = pc;
                        }
                        if let Some(r) = &mut self.debug {
                            r.stopped = Some(why);
                        }
                        break Ok(Exit::Paused);
                    }
                    break Err((pc, Box::new(stop_fault(why))));
                }
            }
            if DEBUG {
                let point = crate::interp::debug::PausePoint {
                    func: FuncId(fid as u32),
                    pc,
                    depth: self.frames.len().saturating_sub(depth0 + 1),
                    instr: f.code[pc],
                    executed: count,
                    next_storage: self.rt.objects.next_storage_id(),
                };
                if stop(&point) {
                    if let Some(top) = self.frames.last_mut() {
                        top.pc = pc;
                    }
                    break Ok(Exit::Paused);
                }
            }
            count += 1;
            if LIMITED && count > limit {
                break Err((
                    pc,
                    Box::new(Fault {
                        message: format!("instruction limit of {limit} reached"),
                        notes: vec!["raise it with --max-instructions or Limits::max_instructions".into()],
                    }),
                ));
            }
            let at = pc;
            pc += 1;
            debug_assert!(at < code.len());
            // SAFETY: the verifier (run on every module a `Vm` holds) proves `at` in bounds:
            // a function is non-empty and ends in `ret`, `br` or `br_if`, so a step past a
            // non-terminator stays inside; branch targets are checked; a call resumes its
            // caller after the call, which is not the last instruction; a paused frame
            // resumes where it stopped. (The bounds check was a twentieth of a `nop`.)
            let step: Step<()> = match *unsafe { code.get_unchecked(at) } {
                Op::IAddRR(x) => int_rr!(self, m, f, base, at, x, IAdd),
                Op::IAddRI(x) => int_ri!(self, m, f, base, at, x, IAdd),
                Op::ISubRR(x) => int_rr!(self, m, f, base, at, x, ISub),
                Op::ISubRI(x) => int_ri!(self, m, f, base, at, x, ISub),
                Op::IMulRR(x) => int_rr!(self, m, f, base, at, x, IMul),
                Op::IMulRI(x) => int_ri!(self, m, f, base, at, x, IMul),
                Op::IMinRR(x) => int_rr!(self, m, f, base, at, x, IMin),
                Op::IMinRI(x) => int_ri!(self, m, f, base, at, x, IMin),
                Op::IMaxRR(x) => int_rr!(self, m, f, base, at, x, IMax),
                Op::IMaxRI(x) => int_ri!(self, m, f, base, at, x, IMax),
                Op::IEqRR(x) => int_rr!(self, m, f, base, at, x, IEq),
                Op::IEqRI(x) => int_ri!(self, m, f, base, at, x, IEq),
                Op::INeRR(x) => int_rr!(self, m, f, base, at, x, INe),
                Op::INeRI(x) => int_ri!(self, m, f, base, at, x, INe),
                Op::ILtRR(x) => int_rr!(self, m, f, base, at, x, ILt),
                Op::ILtRI(x) => int_ri!(self, m, f, base, at, x, ILt),
                Op::ILeRR(x) => int_rr!(self, m, f, base, at, x, ILe),
                Op::ILeRI(x) => int_ri!(self, m, f, base, at, x, ILe),
                Op::IGtRR(x) => int_rr!(self, m, f, base, at, x, IGt),
                Op::IGtRI(x) => int_ri!(self, m, f, base, at, x, IGt),
                Op::IGeRR(x) => int_rr!(self, m, f, base, at, x, IGe),
                Op::IGeRI(x) => int_ri!(self, m, f, base, at, x, IGe),
                Op::Nop {} => Ok(()),
                Op::Mov { dst, src } => self.read_reg(f, base, src).map(|v| self.set(base, dst, v)),
                Op::LoadInt { dst, value } => {
                    self.set(base, dst, Value::Int(value));
                    Ok(())
                }
                Op::LoadFloat { dst, value } => {
                    self.set(base, dst, Value::Float(value));
                    Ok(())
                }
                Op::LoadConst { dst, konst } => {
                    let v = Value::Tensor(self.consts[konst].clone());
                    self.set(base, dst, v);
                    Ok(())
                }
                Op::MakeShape { dst, dims, ndim } => {
                    self.make_shape(m, f, base, dims, ndim).map(|v| self.set(base, dst, v))
                }
                Op::AllocStorage { dst, size, align, device, scope } => self
                    .alloc_storage(m, f, base, size, align, device, scope, self.site(fid, at))
                    .map(|v| self.set(base, dst, v)),
                Op::AllocStorageConst(x) => {
                    if self.alloc_storage_const(base, x, fid, at) {
                        Ok(())
                    } else {
                        self.general_alloc_storage(m, f, base, fid, at)
                    }
                }
                Op::AllocTensor { dst, storage, args, dtype, scope, ndim } => self
                    .alloc_tensor(m, f, base, storage, args, dtype, scope, ndim, self.site(fid, at))
                    .map(|v| self.set(base, dst, v)),
                Op::AllocBufferConst(x) => {
                    if self.alloc_buffer_const(base, x, fid, at) {
                        Ok(())
                    } else {
                        self.general_alloc_tensor(m, f, base, fid, at)
                    }
                }
                Op::AllocImageConst(x) => {
                    if self.alloc_image_const(base, x, fid, at) {
                        Ok(())
                    } else {
                        self.general_alloc_tensor(m, f, base, fid, at)
                    }
                }
                Op::Kill { reg } => match self.reg(base, reg) {
                    Value::Null | Value::Killed(_) => self.read_reg(f, base, reg).map(|_| ()),
                    _ => {
                        *self.reg_mut(base, reg) = Value::Killed(at as u32);
                        Ok(())
                    }
                },
                Op::CallBuiltin { builtin, list, ndst, nargs } => {
                    if builtin.0 == Builtin::Nop as u32 || self.scalar_builtin(m, f, base, builtin.0, list) {
                        Ok(())
                    } else {
                        self.builtin(m, f, base, builtin.0, list, ndst, nargs)
                    }
                }
                Op::Call { func, list, ndst, nargs } => {
                    // SAFETY: the verifier checks a call's target against the function count.
                    let (callee, callee_code) = unsafe { func_code(m, ops, func.index()) };
                    match self.enter(m, f, base, callee, func.index(), list, ndst, nargs) {
                        Ok(new_base) => {
                            if let Some(top) = self.frames.last_mut() {
                                top.pc = pc;
                            }
                            self.frames.push(Frame {
                                func: func.0,
                                pc: 0,
                                base: new_base,
                                ret_list: list,
                                ret_ndst: ndst,
                            });
                            fid = func.index();
                            f = callee;
                            code = callee_code;
                            base = new_base;
                            pc = 0;
                            Ok(())
                        }
                        Err(e) => Err(e),
                    }
                }
                // The entry frame's return: its values go straight into `returned`,
                // whose buffer is the arguments' (`push_entry`).
                Op::Ret { list, nvals } if self.frames.len() == depth0 + 1 => {
                    match if nvals == 0 { Ok(()) } else { self.return_values(m, f, fid, base, list, nvals) } {
                        Ok(()) => {
                            self.truncate_regs(base);
                            self.frames.pop();
                            break Ok(Exit::Returned);
                        }
                        Err(e) => Err(e),
                    }
                }
                Op::Ret { list, nvals } => {
                    match if nvals == 0 {
                        Ok(SmallVec::new())
                    } else {
                        self.collect_results(m, f, fid, base, list, nvals)
                    } {
                        Err(e) => Err(e),
                        Ok(vals) => {
                            self.truncate_regs(base);
                            // Not the entry frame (above): a caller's frame is below.
                            let done = self.frames.pop();
                            match (done, self.frames.last()) {
                                (Some(done), Some(top)) => {
                                    fid = top.func as usize;
                                    base = top.base;
                                    pc = top.pc;
                                    // SAFETY: `fid` is a frame's function, checked when it was pushed.
                                    (f, code) = unsafe { func_code(m, ops, fid) };
                                    let dsts = &f.args[done.ret_list as usize..][..done.ret_ndst as usize];
                                    for (d, v) in dsts.iter().zip(vals) {
                                        if let ArgKind::Reg(r) = d.kind() {
                                            self.set(base, r, v);
                                        }
                                    }
                                    Ok(())
                                }
                                _ => fault("internal: a return with no frame to return to".into()),
                            }
                        }
                    }
                }
                Op::CallOpSite(site) => {
                    // With no-op kernels, a call its site's memo covers has nothing left to
                    // do: decided here, before `op_call`'s large frame is set up.
                    if self.kernels == Kernels::Noop && (self.site_passed(site) || self.memo_covers_site(base, site)) {
                        Ok(())
                    } else {
                        self.op_call_at(m, f, base, at, site)
                    }
                }
                // (Specialised to `CallOpSite`; a call without a site has no memo.)
                Op::CallOp { op, list, attrs, nout, nin } => {
                    self.op_call(m, f, base, u32::MAX, op, list, attrs, nout, nin)
                }
                Op::CallOpAlloc { op, list, attrs, ndst, nin } => {
                    match self.op_call_alloc(m, f, base, self.site(fid, at), op, list, attrs, ndst, nin) {
                        Ok(outputs) => {
                            for (d, v) in f.args[list as usize..][..ndst as usize].iter().zip(outputs) {
                                if let ArgKind::Reg(r) = d.kind() {
                                    self.set(base, r, Value::Tensor(v));
                                }
                            }
                            Ok(())
                        }
                        Err(e) => Err(e),
                    }
                }
                Op::CallKernel { kernel, list, ndims, nargs } => {
                    self.kernel_call(m, f, base, kernel, list, ndims, nargs)
                }
                Op::Br { target } => {
                    pc = target.index();
                    Ok(())
                }
                Op::BrIf { cond, then_, else_ } => match self.reg(base, cond) {
                    Value::Int(c) => {
                        pc = if *c != 0 { then_.index() } else { else_.index() };
                        Ok(())
                    }
                    _ => self.read_reg(f, base, cond).map(|_| ()),
                },
            };
            if let Err(e) = step {
                break Err((at, e));
            }
        };
        let n = &self.rt.counters.instructions;
        n.set(n.get() + count);
        match result {
            Ok(exit) => Ok(exit),
            Err((pc, e)) => Err(self.exec_error(DEBUG, m, fid, pc, *e)),
        }
    }

    /// The values the last run returned ([`Exit::Returned`]).
    #[inline(always)]
    pub(crate) fn take_returned(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.returned)
    }

    /// The error of a fault at instruction `pc` of function `fid`; `debug` keeps the top
    /// frame there for a debugger to inspect. Out of line: the common exit builds nothing.
    #[cold]
    #[inline(never)]
    pub(crate) fn exec_error(&mut self, debug: bool, m: &Module, fid: usize, pc: usize, e: Fault) -> VmError {
        if debug {
            if let Some(top) = self.frames.last_mut() {
                top.pc = pc;
            }
        }
        self.error_at(m, fid, pc, e)
    }

    /// Hands [`Limits::max_live_bytes`] to the devices, which check it on every allocation
    /// (the field is public, so it is read again at every entry into the VM).
    #[inline]
    pub(crate) fn apply_live_limit(&self) {
        self.rt.set_live_limit(self.limits.max_live_bytes.unwrap_or(u64::MAX));
    }

    /// `regs.truncate(base)`, without the call into the drop loop when nothing is above `base`.
    #[inline(always)]
    pub(crate) fn truncate_regs(&mut self, base: usize) {
        if self.regs.len() > base {
            // By a frame's end most registers own nothing (killed, ints): only the others
            // go through the drop glue, not every register through a call.
            for v in &mut self.regs[base..] {
                if !v.owns_nothing() {
                    *v = Value::Null;
                }
            }
            // SAFETY: `base` is within the length, and every value from `base` on owns
            // nothing now, so forgetting them (rather than dropping them) leaks nothing.
            unsafe { self.regs.set_len(base) }
        }
    }

    /// Register `r` of the frame at `base`, without a bounds check: for the handlers of
    /// `exec`'s hot instructions (a register access was a third of an `iadd`).
    #[inline(always)]
    pub(crate) fn reg(&self, base: usize, r: Reg) -> &Value {
        debug_assert!(base + (r.index()) < self.regs.len(), "register r{} outside the frame", r.0);
        // SAFETY: every register a verified function names is below its `num_regs`
        // (`verify::check_reg`), and while a frame runs `regs` holds all of its registers:
        // `push_frame` and `enter` grow `regs` to `base + num_regs`, and only the return of
        // a frame above it (whose base is at least this frame's end) shrinks it.
        unsafe { self.regs.get_unchecked(base + r.index()) }
    }

    /// [`Vm::reg`], mutably.
    #[inline(always)]
    pub(crate) fn reg_mut(&mut self, base: usize, r: Reg) -> &mut Value {
        debug_assert!(base + (r.index()) < self.regs.len(), "register r{} outside the frame", r.0);
        // SAFETY: as for `reg`.
        unsafe { self.regs.get_unchecked_mut(base + r.index()) }
    }

    // Always inlined: an out-of-line call passes the value through memory, and the callee's
    // wide load of the caller's narrow stores stalls on store forwarding (a third of an
    // `iadd`'s time).
    #[inline(always)]
    pub(crate) fn set(&mut self, base: usize, r: Reg, v: Value) {
        self.regs[base + r.index()] = v;
    }

    /// [`Vm::set`] that drops an old value owning nothing (most often a killed register)
    /// in line, without the call into `Value`'s drop glue. For the out-of-line fast paths
    /// of the allocating instructions: in `exec` the branch cost more than it saved.
    #[inline(always)]
    pub(crate) fn set_fresh(&mut self, base: usize, r: Reg, v: Value) {
        let slot = self.reg_mut(base, r);
        if slot.owns_nothing() {
            std::mem::forget(std::mem::replace(slot, v));
        } else {
            *slot = v;
        }
    }

    /// A specialised builtin call that its fast path cannot finish (an operand that is not
    /// an int, an overflow): the original instruction, through the general path, which
    /// reports the error as it always has.
    #[cold]
    #[inline(never)]
    pub(crate) fn general_builtin(&mut self, m: &Module, f: &Function, base: usize, at: usize) -> Step<()> {
        match f.code[at] {
            Instr::CallBuiltin { builtin, list, ndst, nargs } => self.builtin(m, f, base, builtin.0, list, ndst, nargs),
            other => fault(format!("internal: instruction {other:?} was specialised as a builtin call")),
        }
    }

    /// Writes an int, in place when the register holds one: no drop of the old value.
    #[inline(always)]
    pub(crate) fn set_int(&mut self, base: usize, r: Reg, x: i64) {
        match self.reg_mut(base, r) {
            Value::Int(v) => *v = x,
            slot => *slot = Value::Int(x),
        }
    }

    #[inline]
    pub(crate) fn read_reg(&self, f: &Function, base: usize, r: Reg) -> Step<Value> {
        match &self.regs[base + r.index()] {
            Value::Null => fault(format!("%{} is used before it is defined", f.reg_name(r))),
            Value::Killed(at) => {
                let l = f.loc(*at as usize);
                Err(Box::new(Fault {
                    message: format!("use of %{} after `kill`", f.reg_name(r)),
                    notes: vec![if l.line > 0 {
                        format!("%{} was killed at line {}", f.reg_name(r), l.line)
                    } else {
                        format!("%{} was killed at instruction {at}", f.reg_name(r))
                    }],
                }))
            }
            Value::Slice(g, st) => slice_value(*g, st),
            v => Ok(v.clone()),
        }
    }

    #[inline]
    pub(crate) fn read(&self, m: &Module, f: &Function, base: usize, a: Arg) -> Step<Value> {
        match a.kind() {
            ArgKind::Reg(r) => self.read_reg(f, base, r),
            ArgKind::Imm(v) => Ok(Value::Int(v as i64)),
            ArgKind::Lit(i) => Ok(match m.literals[i as usize] {
                Literal::Int(v) => Value::Int(v),
                Literal::Float(v) => Value::Float(v),
            }),
            ArgKind::Const(c) => Ok(Value::Tensor(self.consts[c].clone())),
            ArgKind::None => fault("`none` used as a value".into()),
        }
    }

    /// With no-op kernels: true when the [`QuickCheck`]s of operator call site `site` cover
    /// the views now in its registers, so the call has nothing left to do. The views are
    /// compared where they are, without cloning them (reference counts touched and dropped
    /// were a third of a no-op call): a view object by its [`crate::runtime::memory::ViewClass`] or
    /// (a constant) its id, a slice by its geometry number and device; the call's constants
    /// and omitted inputs are the same at every run. Whatever this cannot decide (a texture, an input whose value inference
    /// reads, a constant output, a non-tensor) answers `false`, and the general path
    /// decides and reports. Out of line, so that `exec` stays small; the common case, a
    /// fixed site that has passed, is [`Vm::site_passed`], in line.
    #[inline(never)]
    pub(crate) fn memo_covers_site(&self, base: usize, site: u32) -> bool {
        let Some(s) = self.quick_sites.get(site as usize) else { return false };
        // A passed site never gets here: `exec` asks `site_passed` first, in line.
        debug_assert!(s.len.get() != QuickSite::PASSED, "site {site} passed: exec checks that first");
        let Some(checks) = self.quick_checks.get(s.start as usize..).and_then(|c| c.get(..s.len.get() as usize)) else {
            return false;
        };
        checks.iter().all(|c| {
            let c = c.get();
            self.regs.get(base + c.reg as usize).is_some_and(|v| c.key.covers(v))
        })
    }

    /// True when operator call site `site` is fixed and has passed its check
    /// ([`QuickSite::PASSED`]): in line in `exec`, the no-op path of most of a compiled
    /// model's calls makes no call.
    #[inline(always)]
    pub(crate) fn site_passed(&self, site: u32) -> bool {
        self.quick_sites.get(site as usize).is_some_and(|s| s.len.get() == QuickSite::PASSED)
    }

    /// An int operand; the common case (an int is there) is inlined, errors are not.
    #[inline(always)]
    pub(crate) fn read_int(&self, m: &Module, f: &Function, base: usize, a: Arg) -> Step<i64> {
        match self.int_operand(m, base, a) {
            Some(v) => Ok(v),
            None => self.read_int_slow(m, f, base, a),
        }
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn read_int_slow(&self, m: &Module, f: &Function, base: usize, a: Arg) -> Step<i64> {
        match self.read(m, f, base, a)? {
            Value::Int(v) => Ok(v),
            v => fault(format!("expected an int, found {}", v.describe())),
        }
    }

    pub(crate) fn arg_name(&self, f: &Function, a: Arg, v: i64) -> String {
        match a.kind() {
            ArgKind::Reg(r) => format!("%{} = {v}", f.reg_name(r)),
            _ => v.to_string(),
        }
    }

    pub(crate) fn make_shape(&self, m: &Module, f: &Function, base: usize, dims: u32, ndim: u8) -> Step<Value> {
        let mut out: SmallVec<[i64; 4]> = SmallVec::new();
        for a in &f.args[dims as usize..][..ndim as usize] {
            let v = self.read_int(m, f, base, *a)?;
            if v < 0 {
                return fault(format!("a shape dimension must be >= 0, found {}", self.arg_name(f, *a, v)));
            }
            out.push(v);
        }
        Ok(Value::Shape(out.into_iter().collect()))
    }

    /// The fast path of the two-operand integer builtins (`iadd`, `ilt`, ...): both operands
    /// already ints, the result fits, one register to write. Anything else (an error to
    /// report, another builtin) returns `false` and takes the general path.
    #[inline(always)]
    pub(crate) fn scalar_builtin(&mut self, m: &Module, f: &Function, base: usize, id: u32, list: u32) -> bool {
        // `iadd` ..= `ige` are consecutive ids, all `(int, int) -> int`: one compare picks
        // them, and the verifier has checked their one destination and two operands.
        const FIRST: u32 = Builtin::IAdd as u32;
        let k = id.wrapping_sub(FIRST);
        if k > Builtin::IGe as u32 - FIRST {
            return false;
        }
        let Some(&[d, a, b]) = f.args.get(list as usize..list as usize + 3) else { return false };
        let Some(d) = d.as_reg() else { return false };
        let (Some(x), Some(y)) = (self.int_operand(m, base, a), self.int_operand(m, base, b)) else {
            return false;
        };
        let Some(&builtin) = Builtin::ALL.get(id as usize) else { return false };
        // `idiv`, `irem`: division by zero and overflow are reported by the general path.
        let r = crate::interp::specialize::int_builtin(builtin, x, y);
        let (Some(r), Some(slot)) = (r, self.regs.get_mut(base + d.index())) else { return false };
        // Overwrite an int in place: no drop of the old value, no temporary on the stack.
        match slot {
            Value::Int(v) => *v = r,
            _ => *slot = Value::Int(r),
        }
        true
    }

    /// An int operand without cloning or error reporting (`None`: not an int right now).
    #[inline(always)]
    pub(crate) fn int_operand(&self, m: &Module, base: usize, a: Arg) -> Option<i64> {
        // Registers and immediates first, one compare each; `kind` decodes every tag.
        if let Some(r) = a.as_reg() {
            return match self.regs.get(base + r.index()) {
                Some(Value::Int(v)) => Some(*v),
                _ => None,
            };
        }
        if let Some(v) = a.as_imm() {
            return Some(v as i64);
        }
        match a.kind() {
            ArgKind::Lit(i) => match m.literals.get(i as usize) {
                Some(Literal::Int(v)) => Some(*v),
                _ => None,
            },
            _ => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn builtin(
        &mut self,
        m: &Module,
        f: &Function,
        base: usize,
        id: u32,
        list: u32,
        ndst: u8,
        nargs: u16,
    ) -> Step<()> {
        let b = Builtin::ALL[id as usize];
        let items = &f.args[list as usize..][..ndst as usize + nargs as usize];
        let mut args: SmallVec<[Value; 4]> = SmallVec::new();
        for a in &items[ndst as usize..] {
            args.push(self.read(m, f, base, *a)?);
        }
        let out: &mut dyn Write = match &mut self.output {
            Output::Stdout => &mut std::io::stdout(),
            Output::Buffer(b) => b,
        };
        let r = call_builtin(b, &args, out).map_err(|e| Box::new(Fault { message: *e, notes: vec![] }))?;
        if let (Some(v), Some(d)) = (r, items.first()) {
            if let ArgKind::Reg(d) = d.kind() {
                self.set(base, d, v);
            }
        }
        Ok(())
    }

    /// Sets up a callee frame; returns its base.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn enter(
        &mut self,
        m: &Module,
        f: &Function,
        base: usize,
        callee: &Function,
        fid: usize,
        list: u32,
        ndst: u8,
        nargs: u16,
    ) -> Step<usize> {
        if self.frames.len() >= self.limits.max_call_depth {
            return Err(self.depth_fault(callee));
        }
        let new_base = self.regs.len();
        let args = &f.args[list as usize + ndst as usize..][..nargs as usize];
        self.regs.resize(new_base + callee.num_regs as usize, Value::Null);
        for (i, a) in args.iter().enumerate() {
            let v = match self.read(m, f, base, *a) {
                Ok(v) => v,
                Err(e) => {
                    self.regs.truncate(new_base);
                    return Err(e);
                }
            };
            if let Err(msg) = check_type(&v, &callee.params[i]) {
                self.regs.truncate(new_base);
                return fault(format!(
                    "argument {} of @{}: {}",
                    i + 1,
                    callee.name,
                    named(msg, callee, &callee.params[i])
                ));
            }
            self.regs[new_base + i] = v;
        }
        if !self.signatures.syms(fid).is_empty() {
            if let Err(e) = self.bind_callee_symbols(callee, fid, new_base) {
                self.regs.truncate(new_base);
                return Err(e);
            }
        }
        if !callee.placements.is_empty() {
            if let Err(e) = self.check_placements(callee, new_base) {
                self.regs.truncate(new_base);
                return Err(e);
            }
        }
        Ok(new_base)
    }

    /// A call inside the module passes its arguments as they are (no copy, unlike a call
    /// from the host), so a placed parameter must already be the view its placement
    /// names: a view of the storage argument at that offset. Anything else would let the
    /// callee's own views of the storage overlap its input.
    #[cold]
    #[inline(never)]
    fn check_placements(&self, callee: &Function, base: usize) -> Step<()> {
        for p in &callee.placements {
            let (Some(Value::Tensor(x)), Some(Value::Storage(st))) =
                (self.regs.get(base + p.param as usize), self.regs.get(base + p.storage as usize))
            else {
                continue; // the types were checked when the arguments were bound
            };
            let (name, storage) =
                (format!("%{}", callee.reg_name(Reg(p.param))), format!("%{}", callee.reg_name(Reg(p.storage))));
            let place = format!("parameter {name} of @{} is placed in {storage} at byte {}", callee.name, p.offset);
            if !Shared::ptr_eq(&x.storage, st) {
                return fault(format!(
                    "{place}, but the argument is a view of another storage than the one passed as {storage}"
                ));
            }
            if x.scope.is_texture() {
                return fault(format!("{place}, but the argument is a `{}` view", x.scope));
            }
            if x.offset != p.offset {
                return fault(format!("{place}, but the argument is the view at byte {} of that storage", x.offset));
            }
        }
        Ok(())
    }

    /// The call-depth limit's error (out of line: `enter` is in the loop).
    #[cold]
    #[inline(never)]
    fn depth_fault(&self, callee: &Function) -> Box<Fault> {
        Box::new(Fault {
            message: format!("call depth limit of {} reached calling @{}", self.limits.max_call_depth, callee.name),
            notes: self.stack_memory_note().into_iter().collect(),
        })
    }

    /// What the frames on the call stack hold, for the errors of the call-depth and memory
    /// limits when more than one frame is live and they hold storage: "the N frames ...
    /// hold B bytes in S storages".
    /// Each storage counts once, however many registers (or views) hold it; constants are
    /// not counted. A scan of every register: only on those errors' way out.
    #[cold]
    #[inline(never)]
    pub(crate) fn stack_memory_note(&self) -> Option<String> {
        let depth = self.frames.len();
        if depth < 2 {
            return None;
        }
        let mut seen = rustc_hash::FxHashSet::default();
        let mut bytes: u64 = 0;
        for v in &self.regs {
            let st = match v {
                Value::Storage(s) => s,
                Value::Tensor(t) => &t.storage,
                Value::Slice(_, s) => s,
                _ => continue,
            };
            if !st.is_constant() && seen.insert(st.id) {
                bytes = bytes.saturating_add(st.size);
            }
        }
        if bytes == 0 {
            return None;
        }
        Some(format!("the {depth} frames on the call stack hold {bytes} bytes in {} storages", seen.len()))
    }

    /// The entry frame's return values, checked against its declared results, pushed onto
    /// `returned`: no buffer of their own when the arguments' has room.
    #[inline(never)]
    pub(crate) fn return_values(
        &mut self,
        m: &Module,
        f: &Function,
        fid: usize,
        base: usize,
        list: u32,
        n: u16,
    ) -> Step<()> {
        let mut out = std::mem::take(&mut self.returned);
        debug_assert!(out.is_empty(), "the previous run's values were taken");
        out.reserve(n as usize);
        self.read_results(m, f, fid, base, list, n, &mut out)?;
        self.returned = out;
        Ok(())
    }

    /// A returning frame's values for its caller's registers.
    #[inline]
    pub(crate) fn collect_results(
        &self,
        m: &Module,
        f: &Function,
        fid: usize,
        base: usize,
        list: u32,
        n: u16,
    ) -> Step<SmallVec<[Value; 2]>> {
        let mut vals = SmallVec::new();
        self.read_results(m, f, fid, base, list, n, &mut vals)?;
        Ok(vals)
    }

    /// Reads the `n` values of a `ret` with operand list `list` in function `fid` (frame at
    /// `base`), checks each against its declared result type ([`Signatures`]) and appends
    /// them to `out`.
    ///
    /// [`Signatures`]: crate::interp::signature::Signatures
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn read_results(
        &self,
        m: &Module,
        f: &Function,
        fid: usize,
        base: usize,
        list: u32,
        n: u16,
        out: &mut impl Extend<Value>,
    ) -> Step<()> {
        for (i, a) in f.args[list as usize..][..n as usize].iter().enumerate() {
            let v = self.read(m, f, base, *a)?;
            let slot = self.signatures.result_slot(fid, i);
            if let Err(msg) = self.signatures.check(&self.rt, fid, slot, &v, &f.results[i]) {
                return fault(format!("result {} of @{}: {}", i + 1, f.name, named(msg, f, &f.results[i])));
            }
            if self.signatures.result_syms(fid) {
                let value = |r: u32| match self.regs.get(base + r as usize) {
                    Some(Value::Int(v)) => Some(*v),
                    _ => None,
                };
                if let Err(msg) = check_result_symbols(f, &f.results[i], &v, value) {
                    return fault(format!("result {} of @{}: {msg}", i + 1, f.name));
                }
            }
            out.extend(Some(v));
        }
        Ok(())
    }
}
