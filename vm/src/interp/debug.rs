//! Stepping through a program: start a function paused before its first instruction, resume
//! until a condition holds (a step count, a breakpoint, an instruction kind), and inspect
//! frames and registers in between — also after a run-time error, until the run is
//! aborted. `rxvm repl` is built on it.
//!
//! The interpreter's loop is generic over a debug flag: the pause check exists only in the
//! debugging instance, so ordinary runs pay nothing for it.

use crate::interp::error::VmError;
use crate::interp::state::{DebugRun, Exit, Stopped, Substitute};
pub use crate::interp::state::{FrameInfo, PausePoint};
use crate::interp::vm::Vm;
use crate::ir::bytecode::EntityRef;
use crate::ir::bytecode::{FuncId, Reg};
use crate::runtime::value::Value;

impl Vm {
    /// Starts `func` with `args` (checked and bound as by [`Vm::invoke_values`]), paused
    /// before its first instruction. A run already in progress is aborted.
    pub fn debug_start(&mut self, func: FuncId, args: Vec<Value>) -> Result<(), VmError> {
        self.debug_abort();
        let module = self.module().clone();
        let (args, subs) = self.prepare_args(&module, func, args)?;
        self.debug_enter(func, args, subs);
        Ok(())
    }

    /// [`Vm::debug_start`] with the arguments exactly as given (arity and types checked,
    /// no binding): a storage too small for the code stays, so the code's own error shows.
    pub fn debug_start_exact(&mut self, func: FuncId, args: Vec<Value>) -> Result<(), VmError> {
        self.debug_abort();
        self.check_args(func, &args)?;
        self.debug_enter(func, args, Vec::new());
        Ok(())
    }

    fn debug_enter(&mut self, func: FuncId, args: Vec<Value>, subs: Vec<Substitute>) {
        let depth0 = self.frames.len();
        let base0 = self.regs.len();
        let module = self.module().clone();
        self.push_entry(&module, func, args);
        self.debug = Some(DebugRun { depth0, base0, entry: func, subs, fault: None, stopped: None });
    }

    /// Runs on until `stop` returns true before an instruction (`Ok(None)`: paused there),
    /// the started function returns (`Ok(Some(results))`: the run is over), or an error
    /// (`Err`: the frames stay for inspection until [`Vm::debug_abort`] or a new start).
    pub fn debug_resume(&mut self, stop: &mut dyn FnMut(&PausePoint) -> bool) -> Result<Option<Vec<Value>>, VmError> {
        let (depth0, base0, entry) = match &mut self.debug {
            None => return Err(VmError::api("nothing is running; start a function first")),
            Some(DebugRun { fault: Some(f), .. }) => {
                return Err(VmError::api(format!("the run stopped with an error ({f}); restart it")))
            }
            Some(r) => {
                r.stopped = None;
                (r.depth0, r.base0, r.entry)
            }
        };
        let module = self.module().clone();
        self.apply_live_limit();
        let outer = self.start_watch()?;
        let exit = self.exec::<true, true, _>(&module, depth0, stop);
        self.watch = outer;
        match exit {
            Ok(Exit::Paused) => Ok(None),
            Ok(Exit::Returned) => {
                let values = self.take_returned();
                self.regs.truncate(base0);
                self.frames.truncate(depth0);
                let subs = self.debug.take().map(|r| r.subs).unwrap_or_default();
                self.finish_results(&module, entry, &subs, values).map(Some)
            }
            Err(e) => {
                if let Some(r) = &mut self.debug {
                    r.fault = Some(e.message.clone());
                }
                Err(e)
            }
        }
    }

    /// Executes one instruction (stepping into calls); see [`Vm::debug_resume`].
    pub fn debug_step(&mut self) -> Result<Option<Vec<Value>>, VmError> {
        self.debug_resume(&mut |p| p.executed >= 1)
    }

    /// Drops the run under the debugger, if any, releasing its registers.
    pub fn debug_abort(&mut self) {
        if let Some(r) = self.debug.take() {
            self.regs.truncate(r.base0);
            self.frames.truncate(r.depth0);
        }
    }

    /// True while a started run has not returned (paused, or stopped by an error).
    pub fn debug_active(&self) -> bool {
        self.debug.is_some()
    }

    /// Why the last resume paused without a breakpoint of the caller's: its
    /// [`crate::Limits::interrupt`] was raised, or its [`crate::Limits::timeout`] expired.
    /// The run is paused before an instruction, as at a breakpoint, and resumes normally.
    pub fn debug_stopped_by(&self) -> Option<Stopped> {
        self.debug.as_ref().and_then(|r| r.stopped)
    }

    /// The error that stopped the run under the debugger, if one did.
    pub fn debug_fault(&self) -> Option<&str> {
        self.debug.as_ref().and_then(|r| r.fault.as_deref())
    }

    /// The frames of the run under the debugger, outermost first (empty when none).
    pub fn debug_frames(&self) -> Vec<FrameInfo> {
        let Some(r) = &self.debug else { return Vec::new() };
        let frames = &self.frames[r.depth0..];
        let last = frames.len().saturating_sub(1);
        // A caller's saved pc is where it resumes; the call in progress is the one before.
        frames
            .iter()
            .enumerate()
            .map(|(i, f)| FrameInfo { func: FuncId(f.func), pc: if i < last { f.pc.saturating_sub(1) } else { f.pc } })
            .collect()
    }

    /// Register `r` of frame `frame` (an index into [`Vm::debug_frames`]).
    pub fn debug_reg(&self, frame: usize, r: Reg) -> Option<&Value> {
        let run = self.debug.as_ref()?;
        let f = self.frames.get(run.depth0 + frame)?;
        let n = self.module().funcs.get(FuncId::new(f.func as usize))?.num_regs as usize;
        if r.index() >= n {
            return None;
        }
        self.regs.get(f.base + r.index())
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::builder::{ModuleBuilder, Operand};
    use crate::ir::bytecode::{Instr, Reg};
    use crate::ir::host_tensor::HostValue;
    use crate::ir::types::{DType, Scope, Type};
    use crate::runtime::value::Value;
    use crate::Vm;
    use std::sync::Arc;

    /// @main(n) calls @twice(n) then allocates, fills and kills a tensor.
    fn vm() -> Vm {
        let mut mb = ModuleBuilder::new("dbg");
        let twice = mb.declare("twice", vec![Type::Int], vec![Type::Int]);
        let mut t = mb.function("twice", vec![Type::Int], vec![Type::Int]);
        let r = t.call_builtin("iadd", &[t.param(0).into(), t.param(0).into()]).unwrap();
        t.ret(&[r[0].into()]);
        mb.add_function(t);
        let mut f = mb.function("main", vec![Type::Int], vec![Type::Int]);
        let n = f.call(twice, 1, &[f.param(0).into()]);
        let s = f.alloc_storage(Operand::Int(64), None, 0, Scope::Global);
        let x = f.alloc_tensor(s, Operand::Int(0), DType::F32, &[Operand::Int(4)], Scope::Global);
        f.call_builtin("fill", &[x.into(), Operand::Float(1.0)]).unwrap();
        f.kill(x);
        f.kill(s);
        f.ret(&[n[0].into()]);
        mb.add_function(f);
        Vm::host(Arc::new(mb.build().unwrap())).unwrap()
    }

    #[test]
    fn steps_into_calls_breaks_on_kills_and_finishes_like_invoke() {
        let mut vm = vm();
        let main = vm.module().func_by_name("main").unwrap();
        let twice = vm.module().func_by_name("twice").unwrap();
        vm.debug_start(main, vec![Value::Int(21)]).unwrap();
        assert_eq!(vm.debug_frames().len(), 1);
        // Step into @twice.
        assert!(vm.debug_step().unwrap().is_none());
        let frames = vm.debug_frames();
        assert_eq!((frames.len(), frames[1].func, frames[1].pc), (2, twice, 0));
        assert!(matches!(vm.debug_reg(1, Reg(0)), Some(Value::Int(21))));
        // Over the rest of @twice: stop when back at depth 0.
        assert!(vm.debug_resume(&mut |p| p.executed > 0 && p.depth == 0).unwrap().is_none());
        assert_eq!(vm.debug_frames().len(), 1);
        // Break before each kill: two of them.
        let mut kills = 0;
        while vm.debug_resume(&mut |p| p.executed > 0 && matches!(p.instr, Instr::Kill { .. })).unwrap().is_none() {
            kills += 1;
            let top = vm.debug_frames()[0];
            assert!(matches!(vm.module().funcs[top.func].code[top.pc], Instr::Kill { .. }));
        }
        assert_eq!(kills, 2);
        assert!(!vm.debug_active());
        // The same result as an ordinary invocation, and nothing left behind.
        assert_eq!(vm.invoke("main", &[HostValue::Int(21)]).unwrap(), vec![HostValue::Int(42)]);
        assert_eq!(vm.stats().live_storages, 0);
    }

    #[test]
    fn an_error_keeps_the_frames_until_aborted() {
        let mut mb = ModuleBuilder::new("bad");
        let mut f = mb.function("main", vec![Type::Int], vec![]);
        let s = f.alloc_storage(Operand::Int(16), None, 0, Scope::Global);
        let off = f.param(0);
        f.alloc_tensor(s, Operand::Reg(off), DType::F32, &[Operand::Int(4)], Scope::Global);
        f.ret(&[]);
        mb.add_function(f);
        let mut vm = Vm::host(Arc::new(mb.build().unwrap())).unwrap();
        let main = vm.module().func_by_name("main").unwrap();
        vm.debug_start(main, vec![Value::Int(8)]).unwrap();
        let Err(e) = vm.debug_resume(&mut |_| false) else { panic!("the view is out of bounds") };
        assert!(e.message.contains("ends past the end"), "{e}");
        assert_eq!(vm.debug_frames()[0].pc, 1, "stopped at the faulting instruction");
        assert!(matches!(vm.debug_reg(0, Reg(1)), Some(Value::Storage(s)) if s.size == 16));
        assert_eq!(vm.stats().live_storages, 1, "the storage is still there to inspect");
        let Err(again) = vm.debug_resume(&mut |_| false) else { panic!("a faulted run does not resume") };
        assert!(again.message.contains("restart it"), "{again}");
        vm.debug_abort();
        assert!(!vm.debug_active() && vm.debug_frames().is_empty());
        assert_eq!(vm.stats().live_storages, 0);
    }
}
