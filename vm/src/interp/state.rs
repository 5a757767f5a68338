//! The interpreter's small shared types: limits, kernel mode, output, frames, how a run
//! ended, faults, and parameters the VM replaced.

use crate::ir::bytecode::{FuncId, Instr};
use crate::runtime::memory::Storage;
use crate::runtime::shared::Shared;

/// Limits that stop a runaway program with an error instead of hanging or eating memory.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_call_depth: usize,
    /// Instructions per invocation; `None` for no limit.
    pub max_instructions: Option<u64>,
    /// Bytes of storage live at once on each device: everything live there, the module's
    /// constants, inputs and the VM's copies included, but not blocks cached in the pool.
    /// `None`: no limit beyond the device's own memory.
    pub max_live_bytes: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_call_depth: 10_000, max_instructions: None, max_live_bytes: None }
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
}
