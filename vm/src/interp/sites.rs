//! What a VM precomputes and remembers per instruction site: operand types an operator call
//! last checked ([`OpMemo`], [`QuickCheck`]), constant image views per device
//! ([`ImageView`]), and scratch buffers for host kernels' operand copies.

use crate::ir::bytecode::EntityRef;
use crate::ir::bytecode::{Arg, ArgKind, Reg};
use crate::ir::host_tensor::HostTensor;
use crate::ir::types::{DType, ImageLayout, Scope};
use crate::runtime::device::DeviceCaps;
use crate::runtime::memory::View;
use crate::runtime::shared::Shared;
use crate::runtime::value::Value;
use smallvec::SmallVec;
use std::cell::Cell;
use std::rc::Rc;

/// What an operator call site inferred for the operands it saw last. Inference depends
/// only on the operands' dtypes and shapes and on the values of the small inputs (the ones
/// an OpenCL device reads back for it), so a call that sees the same again (every call of a
/// compiled model after the first) reuses the result instead of inferring and checking
/// again.
pub(crate) struct OpMemo {
    pub(crate) inputs: SmallVec<[Option<OperandKey>; 6]>,
    pub(crate) outputs: SmallVec<[Option<ViewType>; 2]>,
    pub(crate) inferred: Rc<[crate::ops::OutInfo]>,
}

/// Where an operator call site's [`QuickCheck`]s are: what [`Vm::memo_covers_site`] checks
/// instead of the site's [`OpMemo`], when it can decide on its own, one per register
/// operand (constants and omitted inputs are fixed at a call site).
pub(crate) struct QuickSite {
    pub(crate) start: u32,
    /// The site's register operands: the most checks it can have.
    pub(crate) cap: u32,
    /// How many checks are set, or [`QuickSite::UNSET`], or [`QuickSite::PASSED`].
    pub(crate) len: Cell<u32>,
    /// Every register operand is a view the code fixes ([`crate::interp::fixed`]).
    pub(crate) fixed: bool,
}

impl QuickSite {
    pub(crate) const UNSET: u32 = u32::MAX;
    /// A fixed site's check passed: it passes at every run, with nothing to compare.
    pub(crate) const PASSED: u32 = u32::MAX - 1;
}

/// One register operand as [`Vm::memo_covers_site`] checks it: the register, and what the
/// view in it must be.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct QuickCheck {
    pub(crate) reg: u32,
    pub(crate) key: QuickKey,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum QuickKey {
    /// A non-constant buffer view of this [`crate::runtime::memory::ViewClass`]: dtype, shape and
    /// device in a word.
    Class(u64),
    /// A constant, by view id (constants never change).
    Constant(u64),
    /// A slice ([`Value::Slice`]) of this geometry on this device.
    Slice { geom: u32, device: u8 },
}

impl QuickKey {
    /// The checks of a memo's operands (`items`, and their `views`: inputs then outputs),
    /// if every operand can be checked this way: constants, and buffer views whose values
    /// inference does not read.
    /// `regs` are the frame's registers, where an operand may be a slice. (A view without a
    /// (dtype, shape) id has no check: the general path compares it.)
    pub(crate) fn checks(
        items: &[Arg],
        inputs: &[Option<OperandKey>],
        outputs: &[Option<ViewType>],
        views: &[Option<Shared<View>>],
        regs: &[Value],
    ) -> Option<SmallVec<[QuickCheck; 6]>> {
        let tensor = |r: Reg, v: &View| {
            // Textures take the general path (a slice may hold one).
            if v.scope.is_texture() {
                return None;
            }
            if let Some(Value::Slice(geom, st)) = regs.get(r.index()) {
                return Some(QuickKey::Slice { geom: *geom, device: st.device });
            }
            v.class.is_plain_typed().then_some(QuickKey::Class(v.class.0))
        };
        let ins = inputs.iter().map(|k| match k {
            Some(OperandKey::Constant(id)) => Some(Some(QuickKey::Constant(*id))),
            Some(OperandKey::Tensor { value: None, .. }) | None => Some(None),
            Some(OperandKey::Tensor { value: Some(_), .. }) => None,
        });
        let outs = outputs.iter().map(|_| Some(None));
        let mut checks = SmallVec::new();
        for ((a, key), v) in items.iter().zip(ins.chain(outs)).zip(views) {
            let (ArgKind::Reg(r), Some(v)) = (a.kind(), v) else { continue };
            let key = match key? {
                Some(constant) => constant,
                None => tensor(r, v)?,
            };
            checks.push(QuickCheck { reg: r.0, key });
        }
        Some(checks)
    }

    /// True when register value `v` is what this key saw.
    #[inline(always)]
    pub(crate) fn covers(self, v: &Value) -> bool {
        match (self, v) {
            (QuickKey::Class(c), Value::Tensor(v)) => v.class.0 == c,
            (QuickKey::Constant(id), Value::Tensor(v)) => v.id == id,
            (QuickKey::Slice { geom, device }, Value::Slice(g, st)) => geom == *g && device == st.device,
            _ => false,
        }
    }
}

/// An output view's dtype and shape.
pub(crate) type ViewType = (DType, SmallVec<[i64; 4]>);

/// An input as inference saw it: a constant (immutable: its view id says it all), or its
/// type with the bytes of a small input whose value inference may read.
#[derive(PartialEq)]
pub(crate) enum OperandKey {
    Constant(u64),
    Tensor { dtype: DType, shape: SmallVec<[i64; 4]>, value: Option<Vec<u8>> },
}

/// Equal shapes, compared inline: `==` on the slices calls `memcmp`, which costs more than
/// the few dimensions it compares.
#[inline(always)]
pub(crate) fn same_dims(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// True for inputs whose values shape inference may read (on OpenCL devices only these
/// are read back for it).
pub(crate) fn inference_reads_value(v: &View) -> bool {
    v.numel() <= 64 || (!v.dtype.is_float() && v.numel() <= 65536)
}

impl OperandKey {
    pub(crate) fn of(v: &View, value: Option<&HostTensor>) -> OperandKey {
        if v.storage.is_constant() {
            return OperandKey::Constant(v.id);
        }
        let value = if inference_reads_value(v) { value.map(|h| h.data.clone()) } else { None };
        OperandKey::Tensor { dtype: v.dtype, shape: v.shape.clone(), value }
    }

    /// True when `v` (with `value` read for it, if any) is what this key saw.
    pub(crate) fn matches(&self, v: &View, value: Option<&HostTensor>) -> bool {
        match self {
            OperandKey::Constant(id) => *id == v.id,
            OperandKey::Tensor { dtype, shape, value: want } => {
                *dtype == v.dtype
                    && same_dims(shape, &v.shape)
                    && !v.storage.is_constant()
                    && match (want, value) {
                        (None, _) => !inference_reads_value(v),
                        (Some(w), Some(h)) => *w == h.data,
                        (Some(_), None) => false,
                    }
            }
        }
    }
}

impl OpMemo {
    /// True when the operands are what this memo saw; `host_in[i]` is the value read for
    /// input `i`, if any (`host_in` may be shorter than `inputs`: nothing read).
    pub(crate) fn matches(
        &self,
        inputs: &[Option<Shared<View>>],
        host_in: &[Option<HostTensor>],
        outputs: &[Option<Shared<View>>],
    ) -> bool {
        self.inputs.len() == inputs.len()
            && self.outputs.len() == outputs.len()
            && self.inputs.iter().zip(inputs).enumerate().all(|(i, (k, v))| match (k, v) {
                (None, None) => true,
                (Some(k), Some(v)) => k.matches(v, host_in.get(i).and_then(Option::as_ref)),
                _ => false,
            })
            && self.outputs.iter().zip(outputs).all(|(k, v)| match (k, v) {
                (None, None) => true,
                (Some((d, s)), Some(v)) => *d == v.dtype && same_dims(s, &v.shape),
                _ => false,
            })
    }
}

/// Host memory of finished operator calls, handed to the next ones: the host kernels work
/// on copies of their operands, and fresh buffers for each call fault in fresh pages
/// (a fifth of a small CNN's time). Bounded in count and bytes.
#[derive(Default)]
pub(crate) struct Scratch {
    pub(crate) bufs: Vec<Vec<u8>>,
    pub(crate) bytes: usize,
}

impl Scratch {
    pub(crate) const MAX_BUFFERS: usize = 16;
    pub(crate) const MAX_BYTES: usize = 256 << 20;

    /// An empty buffer with room for `len` bytes (the smallest that fits).
    pub(crate) fn take(&mut self, len: usize) -> Vec<u8> {
        let best = self
            .bufs
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let b = self.bufs.swap_remove(i);
                self.bytes -= b.capacity();
                b
            }
            None => Vec::with_capacity(len),
        }
    }

    pub(crate) fn give(&mut self, b: Vec<u8>) {
        let cap = b.capacity();
        if cap == 0 || self.bufs.len() >= Self::MAX_BUFFERS || self.bytes + cap > Self::MAX_BYTES {
            return;
        }
        self.bytes += cap;
        self.bufs.push(b);
    }
}

/// An image view's layout and bytes on a device with `caps`, or why the device cannot
/// make it: what `alloc_tensor` checks of a texture-scope view besides whether it fits its
/// storage. One definition for the general instruction and for the image geometries a
/// `Vm` checks per device when it is made ([`ImageView`]).
pub(crate) fn image_geometry(
    caps: &DeviceCaps,
    scope: Scope,
    dtype: DType,
    dims: &[i64],
    offset: u64,
) -> Result<(ImageLayout, u64), String> {
    let shape_txt = || format!("{dtype}{dims:?}");
    if !caps.image_support {
        return Err(format!("device `{}` has no image support, so it cannot make \"{scope}\" views", caps.name));
    }
    let layout = ImageLayout::new(scope, dtype, dims, caps.image_pitch_align_px)?;
    if layout.width > caps.max_image2d_width || layout.height > caps.max_image2d_height {
        return Err(format!(
            "image of {}x{} texels for {} is larger than device `{}` allows ({}x{})",
            layout.width,
            layout.height,
            shape_txt(),
            caps.name,
            caps.max_image2d_width,
            caps.max_image2d_height
        ));
    }
    if !offset.is_multiple_of(caps.image_base_align) {
        return Err(format!(
            "image view offset {offset} is not a multiple of the image base-address alignment of device `{}` ({} bytes)",
            caps.name, caps.image_base_align
        ));
    }
    // An image at a non-zero offset is made from a sub-buffer there, so the offset must
    // also meet the sub-buffer alignment (checked on every device, so the host catches
    // what an OpenCL device would refuse).
    if offset != 0 && !offset.is_multiple_of(caps.mem_base_addr_align) {
        return Err(format!(
            "an image view at byte offset {offset} needs a sub-buffer there, but device `{}` requires sub-buffer offsets to be multiples of CL_DEVICE_MEM_BASE_ADDR_ALIGN ({} bytes)",
            caps.name, caps.mem_base_addr_align
        ));
    }
    match layout.byte_size() {
        Some(b) => Ok((layout, b)),
        None => Err(format!("image for {} is too large", shape_txt())),
    }
}

/// An image view of constant geometry ([`Op::AllocImageConst`]) with, per device of the
/// runtime, its layout and size there, or `None` where the device cannot make it (the
/// general instruction then reports why).
pub(crate) struct ImageView {
    pub(crate) geom: crate::interp::specialize::ImageGeom,
    pub(crate) on_device: Box<[Option<ImagePlacement>]>,
}

#[derive(Clone, Copy)]
pub(crate) struct ImagePlacement {
    pub(crate) layout: ImageLayout,
    pub(crate) bytes: u64,
    /// `offset + bytes`: the view fits a storage of at least this many bytes.
    pub(crate) end: u64,
    /// Its number among the runtime's slice geometries ([`Value::Slice`]), or [`NO_SLICE`].
    pub(crate) slice: u32,
}
