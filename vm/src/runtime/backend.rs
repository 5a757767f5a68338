//! The interface between the runtime and a device that is not the host (TVM's
//! `DeviceAPI`): where a storage's block comes from and goes, how a view of it is made,
//! and how bytes move between a view and host memory. The runtime and the interpreter
//! reach every such device through [`Device`]; the OpenCL backend (`opencl/`) is one
//! implementation, and a test can be another. Kernels are not part of it: a backend's
//! kernels find their device through [`Device::as_any`].

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
    /// Bytes of free blocks the device keeps for reuse.
    fn pool_free_bytes(&self) -> u64 {
        0
    }
    /// Gives the device's free blocks back to the system.
    fn clear_pool(&self) {}
    fn as_any(&self) -> &dyn Any;
}
