//! The interpreter's small shared types: limits, kernel mode, output, frames, how a run
//! ended, faults, and parameters the VM replaced.

use crate::ir::bytecode::{FuncId, Instr};
use crate::runtime::memory::Storage;
use crate::runtime::shared::Shared;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Limits that stop a runaway program with an error instead of hanging or eating memory.
///
/// Without `max_instructions`, `timeout` and `interrupt` the dispatch loop checks nothing
/// per instruction; with any of them it takes its checked instance (one compare and one
/// load per instruction). A stop by any of them happens before an instruction, never in
/// the middle of one: an operator or kernel call runs to its end first.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Frames on the call stack (default 10,000).
    pub max_call_depth: usize,
    /// Instructions per invocation; `None` (the default) for no limit.
    pub max_instructions: Option<u64>,
    /// Bytes of storage live at once on each device: everything live there, the module's
    /// constants, inputs and the VM's copies included (so the storages every frame of a
    /// deep recursion holds), but not blocks cached in the pool.
    /// `None` (the default): no limit beyond the device's own memory.
    pub max_live_bytes: Option<u64>,
    /// Wall-clock time per invocation (under the debugger: per resume); `None` (the
    /// default) for no limit. A timer thread raises the run's [`Interrupt`] when it expires.
    pub timeout: Option<Duration>,
    /// A flag another thread or a signal handler raises ([`Interrupt::raise`]) to stop the
    /// run before its next instruction: an invocation fails with "interrupted", a run
    /// under the debugger pauses (see [`crate::Vm::debug_stopped_by`]).
    pub interrupt: Option<Interrupt>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_call_depth: 10_000, max_instructions: None, max_live_bytes: None, timeout: None, interrupt: None }
    }
}

impl Limits {
    /// True when the dispatch loop must check something before each instruction.
    #[inline(always)]
    pub(crate) fn checked(&self) -> bool {
        self.max_instructions.is_some() || self.timeout.is_some() || self.interrupt.is_some()
    }
}

/// A stop request shared between a running VM and whoever may stop it (a Ctrl-C handler,
/// a watchdog, another thread). Raising it is one atomic store, safe in a signal handler.
#[derive(Clone, Debug, Default)]
pub struct Interrupt(Arc<AtomicU8>);

/// Why a run stopped before an instruction without an error of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// [`Interrupt::raise`] (Ctrl-C).
    Interrupted,
    /// [`Limits::timeout`] expired.
    TimedOut(Duration),
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Interrupted => write!(f, "interrupted"),
            Stopped::TimedOut(d) => write!(f, "time limit of {d:?} reached"),
        }
    }
}

impl Interrupt {
    const RAISED: u8 = 1;
    const TIMED_OUT: u8 = 2;

    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Asks the run to stop before its next instruction.
    pub fn raise(&self) {
        self.0.store(Self::RAISED, Ordering::Relaxed);
    }

    /// True while a stop is pending (raised and not yet seen by a run, nor cleared).
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }

    /// Withdraws a pending stop (e.g. a Ctrl-C pressed while nothing was running).
    pub fn clear(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    pub(crate) fn flag(&self) -> &AtomicU8 {
        &self.0
    }

    /// The pending stop, taken; `timeout` is the limit a timer stop reports.
    pub(crate) fn take(&self, timeout: Option<Duration>) -> Option<Stopped> {
        match self.0.swap(0, Ordering::Relaxed) {
            0 => None,
            Self::TIMED_OUT => Some(Stopped::TimedOut(timeout.unwrap_or_default())),
            _ => Some(Stopped::Interrupted),
        }
    }
}

/// What one checked run watches: the interrupt flag (the caller's, or one of its own for a
/// timeout) and the timer thread that raises it. Dropping it stops the timer, and clears
/// a timer stop that came after the run ended.
pub(crate) struct Watch {
    pub(crate) flag: Interrupt,
    timer: Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Watch {
    pub(crate) fn start(limits: &Limits) -> Result<Watch, String> {
        let flag = limits.interrupt.clone().unwrap_or_default();
        let Some(t) = limits.timeout else { return Ok(Watch { flag, timer: None }) };
        // A stale timer stop of an earlier run is not this run's.
        let _ = flag.0.compare_exchange(Interrupt::TIMED_OUT, 0, Ordering::Relaxed, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let f = flag.clone();
        let handle = std::thread::Builder::new()
            .name("rxvm-timeout".into())
            .spawn(move || {
                if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(t) {
                    // A raised interrupt stays an interrupt.
                    let _ = f.0.compare_exchange(0, Interrupt::TIMED_OUT, Ordering::Relaxed, Ordering::Relaxed);
                }
            })
            .map_err(|e| format!("cannot start the timer of --timeout: {e}"))?;
        Ok(Watch { flag, timer: Some((tx, handle)) })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some((tx, handle)) = self.timer.take() {
            drop(tx);
            let _ = handle.join();
            let _ = self.flag.0.compare_exchange(Interrupt::TIMED_OUT, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
}

/// What operator and kernel calls do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kernels {
    /// Run them (the default).
    #[default]
    Run,
    /// Check every call as usual (operands, devices, the output types the operator infers
    /// for these inputs), then skip the kernel: no computation, no data moved. What is left
    /// is the VM's own cost per inference, the figure `benches/model_overhead.rs`
    /// measures (TVM's reference numbers replace every kernel by a no-op the same way).
    /// Outputs hold whatever their memory held before.
    Noop,
}

/// Where `@vm.print` writes.
pub enum Output {
    Stdout,
    Buffer(Vec<u8>),
}

pub(crate) struct Frame {
    pub(crate) func: u32,
    /// Where to resume (set when this frame calls another, or when a debugger pauses).
    pub(crate) pc: usize,
    pub(crate) base: usize,
    /// The caller's destination list for this frame's results.
    pub(crate) ret_list: u32,
    pub(crate) ret_ndst: u8,
}

/// How [`Vm::exec`] ended without an error. The values a run returned wait in
/// `Vm::returned` (see [`Vm::take_returned`]): without them the result fits in two
/// registers rather than going through memory.
#[derive(Clone, Copy)]
pub(crate) enum Exit {
    Returned,
    Paused,
}

/// An error on the way out of a handler: the message and notes; the loop adds where.
pub(crate) struct Fault {
    pub(crate) message: String,
    pub(crate) notes: Vec<String>,
}

pub(crate) type Step<T> = Result<T, Box<Fault>>;

#[cold]
pub(crate) fn fault<T>(message: String) -> Step<T> {
    Err(Box::new(Fault { message, notes: Vec::new() }))
}

/// A storage parameter the VM replaced with its own (see [`crate::interp::io`]).
pub(crate) struct Substitute {
    pub(crate) caller: Shared<Storage>,
    pub(crate) ours: Shared<Storage>,
    /// The caller's storage can take the results (it was only on the wrong device).
    pub(crate) copy_back: bool,
}

/// Where a run is about to execute an instruction; a stop condition looks at it.
#[derive(Clone, Copy, Debug)]
pub struct PausePoint {
    pub func: FuncId,
    pub pc: usize,
    /// Frames above the entry frame (0 in the function that was started).
    pub depth: usize,
    /// The instruction at `pc`, not yet executed.
    pub instr: Instr,
    /// Instructions executed since this resume began.
    pub executed: u64,
    /// The id the next storage will get (for "break on storage N").
    pub next_storage: u64,
}

/// One frame of a paused run, outermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    pub func: FuncId,
    /// The next instruction to execute (in callers: the call in progress).
    pub pc: usize,
}

/// The state of a run under a debugger.
pub(crate) struct DebugRun {
    /// Frames and registers below it belong to whoever started the run.
    pub(crate) depth0: usize,
    pub(crate) base0: usize,
    pub(crate) entry: FuncId,
    pub(crate) subs: Vec<Substitute>,
    /// The error that stopped it, if one did.
    pub(crate) fault: Option<String>,
    /// An interrupt or timeout that paused it at the last resume.
    pub(crate) stopped: Option<Stopped>,
}
