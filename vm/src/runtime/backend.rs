//! The interface between the runtime and a device that is not the host (TVM's
//! `DeviceAPI`): where a storage's block comes from and goes, how a view of it is made,
//! how bytes move between a view and host memory, and the kernels it runs (operators,
//! builtins, layout conversions, user kernels). The runtime and the interpreter reach
//! every such device through [`Device`]; the OpenCL backend (`opencl/`) is one
//! implementation, and a test can be another. A device that only holds memory implements
//! no kernel: the defaults refuse with a message naming what is missing.

use crate::ir::attrs::Attrs;
use crate::ir::builtins::Builtin;
use crate::ir::bytecode::OpId;
use crate::ir::schema::TensorInfo;
use crate::ir::types::{DType, ImageLayout};
use crate::runtime::device::AllocSource;
use std::any::Any;
use std::ffi::c_void;

/// How a view appears to kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ViewKind {
    /// The storage's buffer (or a sub-buffer) plus a byte offset into it.
    Buffer,
    /// An image over the buffer's bytes.
    Image,
    /// A standalone image that does not share the buffer's bytes.
    CompatImage,
}

/// A view's device handle: the device's memory object (a `cl_mem` on OpenCL), a byte
/// offset into it, and how kernels see it. Borrowed from its block, which outlives the view.
#[derive(Clone, Copy, Debug)]
pub struct ViewHandle {
    pub mem: *mut c_void,
    /// Byte offset into `mem` (0 for images and sub-buffers).
    pub offset: u64,
    pub kind: ViewKind,
}

/// A tensor operand of a device kernel: its view's handle, element type and shape (the
/// view's own; for a texture operand of an operator, the logical `[N, C, spatial...]`).
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    pub handle: ViewHandle,
    pub dtype: DType,
    pub shape: &'a [i64],
    /// The image layout of an image view.
    pub image: Option<&'a ImageLayout>,
}

/// A scalar argument of a builtin's device kernel.
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    /// A value in the kernel's compute type (converted as the host converts).
    Compute(f64),
    U64(u64),
}

/// An argument of a user kernel (`call @cl.name(...)`).
#[derive(Clone, Copy, Debug)]
pub enum KernelValue {
    /// A buffer view at offset 0 of its memory object.
    Buffer(ViewHandle),
    Int(i64),
    Float(f64),
}

/// A block of device memory that backs one storage.
pub trait DeviceBlock: Any {
    /// Bytes the block holds (at least what the storage asked for).
    fn capacity(&self) -> u64;
    fn as_any(&self) -> &dyn Any;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

/// A device's memory and transfers.
pub trait Device: Any {
    /// A block of at least `size` bytes, from the device's own pool or fresh.
    fn alloc(&self, size: u64) -> Result<(Box<dyn DeviceBlock>, AllocSource), String>;
    /// Takes back the block of a storage that died (to pool or free it).
    fn release(&self, block: Box<dyn DeviceBlock>);
    /// The handle of a view of `block` at byte `offset`: a buffer view, or with `image` an
    /// image view with that layout.
    fn view(
        &self,
        block: &dyn DeviceBlock,
        offset: u64,
        dtype: DType,
        image: Option<&ImageLayout>,
    ) -> Result<ViewHandle, String>;
    /// Copies `out.len()` bytes of the view (row by row for images) into `out`.
    fn read(&self, view: &ViewHandle, image: Option<&ImageLayout>, out: &mut [u8]) -> Result<(), String>;
    /// Copies `data` into the view.
    fn write(&self, view: &ViewHandle, image: Option<&ImageLayout>, data: &[u8]) -> Result<(), String>;
    /// Waits until everything the device was given has run. A device may run kernels
    /// after the calls that launch them return (in order, so its own transfers see their
    /// results); an invocation ends with this, so that its results and its time are
    /// whole.
    fn finish(&self) -> Result<(), String> {
        Ok(())
    }
    /// Bytes of free blocks the device keeps for reuse.
    fn pool_free_bytes(&self) -> u64 {
        0
    }
    /// Gives the device's free blocks back to the system.
    fn clear_pool(&self) {}

    /// The device's own counters, by name (the OpenCL device's are listed in
    /// `Vm::cl_stats`).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Whether the device has a kernel for operator `op` on buffer views.
    fn has_op_kernel(&self, op: OpId) -> bool {
        let _ = op;
        false
    }
    /// Runs operator `op` on buffer views; the outputs' types were checked against the
    /// operator's shape inference, and `infos` carry the inputs' types (and the values of
    /// small inputs, read back before the call).
    fn call_op(
        &self,
        op: OpId,
        inputs: &[Option<Operand>],
        infos: &[Option<TensorInfo>],
        attrs: &Attrs,
        outputs: &[Operand],
    ) -> Result<(), String> {
        let _ = (inputs, infos, attrs, outputs);
        Err(format!("operator {} has no kernel on this device", op.0))
    }
    /// Runs operator `op` on blocked textures (`ir::operators::blocked`): texture operands
    /// carry their logical `[N, C, spatial...]` shape, parameters are buffer views.
    fn call_op_blocked(
        &self,
        op: OpId,
        inputs: &[Option<(Operand, bool)>],
        infos: &[Option<TensorInfo>],
        attrs: &Attrs,
        output: Operand,
    ) -> Result<(), String> {
        let _ = (op, inputs, infos, attrs, output);
        Err("has no texture kernels on this device".into())
    }
    /// Runs builtin `b` on `operands` (output last) computing in `dtype`.
    fn call_builtin(&self, b: Builtin, dtype: DType, operands: &[Operand], scalars: &[Scalar]) -> Result<(), String> {
        let _ = (b, dtype, operands, scalars);
        Err("the device has no builtin kernels".into())
    }
    /// Converts between a plain `[N, C, spatial...]` buffer view and its blocked form (a
    /// texture, or a buffer in blocked element order): `to` blocks, else unblocks.
    fn convert_blocked(&self, plain: Operand, blocked: Operand, to: bool) -> Result<(), String> {
        let _ = (plain, blocked, to);
        Err("has no layout conversion kernels".into())
    }
    /// Builds and runs a user kernel: `entry` of `source` over `global` work-items.
    fn launch_user_kernel(
        &self,
        source: &str,
        entry: &str,
        args: &[KernelValue],
        global: &[usize],
    ) -> Result<(), String> {
        let _ = (source, args, global);
        Err(format!("cannot run the OpenCL C kernel `{entry}`"))
    }

    fn as_any(&self) -> &dyn Any;
}
