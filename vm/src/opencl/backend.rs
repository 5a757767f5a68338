//! The OpenCL device behind the runtime's [`Device`] interface: its memory (blocks, views,
//! transfers, pool; `device.rs` does the work) and its kernels, found in the kernel tables
//! of `crate::ops` (operators on buffers and textures) and `builtins.rs` (builtins).

use super::builtins::{self, Access};
use super::device::{ClBlock, ClDevice, ClView, KernelArg, ViewKind};
use crate::ir::attrs::Attrs;
use crate::ir::builtins::Builtin;
use crate::ir::bytecode::OpId;
use crate::ir::host_tensor::{load_f64, store_f64};
use crate::ir::schema::TensorInfo;
use crate::ir::types::{DType, ImageLayout};
use crate::ops::cl::{ClCtx, ClTensor};
use crate::ops::texture_cl::{self, BlockedSide, ClOperand, ClTexture};
use crate::runtime::backend::{Device, DeviceBlock, KernelValue, Operand, Scalar};
use crate::runtime::device::AllocSource;
use smallvec::SmallVec;
use std::any::Any;

impl Device for ClDevice {
    fn alloc(&self, size: u64) -> Result<(Box<dyn DeviceBlock>, AllocSource), String> {
        let (b, s) = ClDevice::alloc(self, size).map_err(|e| e.to_string())?;
        Ok((Box::new(b), s))
    }

    fn finish(&self) -> Result<(), String> {
        ClDevice::finish(self).map_err(|e| e.to_string())
    }

    fn release(&self, block: Box<dyn DeviceBlock>) {
        // Blocks of this device are `ClBlock`s (made by `alloc` above); another kind is
        // dropped, which frees its memory all the same.
        if let Ok(b) = block.into_any().downcast::<ClBlock>() {
            ClDevice::release(self, *b);
        }
    }

    fn view(
        &self,
        block: &dyn DeviceBlock,
        offset: u64,
        dtype: DType,
        image: Option<&ImageLayout>,
    ) -> Result<ClView, String> {
        let Some(b) = block.as_any().downcast_ref::<ClBlock>() else {
            return Err(format!("device `{}` was handed a block it did not make", self.caps.name));
        };
        ClDevice::view(self, b, offset, dtype, image)
    }

    fn read(&self, view: &ClView, image: Option<&ImageLayout>, out: &mut [u8]) -> Result<(), String> {
        ClDevice::read(self, view, out.len(), image, out).map_err(|e| e.to_string())
    }

    fn write(&self, view: &ClView, image: Option<&ImageLayout>, data: &[u8]) -> Result<(), String> {
        ClDevice::write(self, view, image, data).map_err(|e| e.to_string())
    }

    fn pool_free_bytes(&self) -> u64 {
        self.pool_free_bytes.get()
    }

    fn clear_pool(&self) {
        ClDevice::clear_pool(self)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("cl_buffers_created", c.buffers_created.get()),
            ("cl_sub_buffers_created", c.sub_buffers_created.get()),
            ("cl_images_created", c.images_created.get()),
            ("compat_images", c.compat_images.get()),
            ("compat_image_bytes", c.compat_image_bytes.get()),
            ("live_cl_mem", c.live_cl_mem.get()),
            ("cl_kernels_built", c.kernels_built.get()),
        ]
    }

    fn has_op_kernel(&self, op: OpId) -> bool {
        op.cl_kernel().is_some()
    }

    fn call_op(
        &self,
        op: OpId,
        inputs: &[Option<Operand>],
        infos: &[Option<TensorInfo>],
        attrs: &Attrs,
        outputs: &[Operand],
    ) -> Result<(), String> {
        let run = op.cl_kernel().ok_or("has no OpenCL kernel yet")?;
        let ins: SmallVec<[Option<ClTensor>; 6]> = inputs.iter().map(|o| o.as_ref().map(buffer)).collect();
        let outs: SmallVec<[ClTensor; 2]> = outputs.iter().map(buffer).collect();
        run(&ClCtx { dev: self }, &ins, infos, attrs, &outs)
    }

    fn call_op_blocked(
        &self,
        op: OpId,
        inputs: &[Option<(Operand, bool)>],
        infos: &[Option<TensorInfo>],
        attrs: &Attrs,
        output: Operand,
    ) -> Result<(), String> {
        let (Some(operator), Some(run)) = (op.operator(), op.texture_kernel()) else {
            return Err("has no OpenCL texture kernel".into());
        };
        let ins: SmallVec<[Option<ClOperand>; 6]> = inputs
            .iter()
            .map(|o| {
                o.as_ref().map(|(x, texture)| match texture {
                    true => ClOperand::Texture(ClTexture { mem: x.handle.mem, shape: x.shape.to_vec() }),
                    false => ClOperand::Buffer(buffer(x)),
                })
            })
            .collect();
        let y = ClTexture { mem: output.handle.mem, shape: output.shape.to_vec() };
        run(&ClCtx { dev: self }, operator, &ins, infos, attrs, &y)
    }

    fn call_builtin(&self, b: Builtin, dtype: DType, operands: &[Operand], scalars: &[Scalar]) -> Result<(), String> {
        let access: SmallVec<[Access; 4]> = operands
            .iter()
            .map(|o| match o.image {
                Some(l) if o.handle.kind != ViewKind::Buffer => Access::Image { channels: l.channels },
                _ => Access::Buffer,
            })
            .collect();
        let src = builtins::source(b, dtype, &access).ok_or_else(|| format!("no OpenCL kernel for {dtype}"))?;
        let kernel = self.kernel(&src)?;
        let mut args = Vec::with_capacity(3 * operands.len() + 3);
        for (o, a) in operands.iter().zip(&access) {
            match a {
                Access::Buffer => {
                    args.push(KernelArg::Mem(o.handle.mem));
                    args.push(KernelArg::U64(o.handle.offset / dtype.size() as u64));
                }
                Access::Image { channels } => {
                    args.push(KernelArg::Mem(o.handle.mem));
                    args.push(KernelArg::I32(o.image.map_or(0, |l| l.width) as i32));
                    args.push(KernelArg::I32(*channels as i32));
                }
            }
        }
        let (Some(out), Some(out_access)) = (operands.last(), access.last()) else {
            return Err("internal: a builtin without an output".into());
        };
        let n: u64 = out.shape.iter().map(|&d| d.max(0) as u64).product();
        args.push(KernelArg::U64(n));
        args.extend(scalars.iter().map(|s| match *s {
            Scalar::Compute(v) => compute_scalar(dtype, v),
            Scalar::U64(x) => KernelArg::U64(x),
        }));
        let global = match out_access {
            Access::Buffer => n,
            Access::Image { channels } => n / channels,
        };
        self.launch(kernel, &args, global as usize)
    }

    fn convert_blocked(&self, plain: Operand, blocked: Operand, to: bool) -> Result<(), String> {
        if plain.dtype != DType::F32 {
            return Err(format!("the OpenCL kernel converts f32 tensors, found {}", plain.dtype));
        }
        let side = if blocked.handle.kind == ViewKind::Buffer { BlockedSide::Buffer } else { BlockedSide::Image };
        let offset = if side == BlockedSide::Buffer { blocked.handle.offset / 4 } else { 0 };
        texture_cl::convert(&ClCtx { dev: self }, &buffer(&plain), (blocked.handle.mem, offset, side), to)
    }

    fn launch_user_kernel(
        &self,
        source: &str,
        entry: &str,
        args: &[KernelValue],
        global: &[usize],
    ) -> Result<(), String> {
        let args: Vec<KernelArg> = args
            .iter()
            .map(|a| match *a {
                KernelValue::Buffer(h) => KernelArg::Mem(h.mem),
                KernelValue::Int(x) => KernelArg::Bytes(x.to_le_bytes(), 8),
                KernelValue::Float(x) => {
                    let mut b = [0u8; 8];
                    b[..4].copy_from_slice(&(x as f32).to_le_bytes());
                    KernelArg::Bytes(b, 4)
                }
            })
            .collect();
        let handle = self.kernel_entry(source, entry)?;
        self.launch_nd(handle, &args, global)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A buffer operand as the OpenCL kernels take it (element offset).
fn buffer(o: &Operand) -> ClTensor {
    ClTensor {
        mem: o.handle.mem,
        offset: o.handle.offset / o.dtype.size() as u64,
        dtype: o.dtype,
        shape: o.shape.to_vec(),
    }
}

/// A scalar in the kernel's compute type, converted the way the host converts.
fn compute_scalar(dtype: DType, v: f64) -> KernelArg {
    let mut b = [0u8; 8];
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => {
            let mut e = [0u8; 8];
            store_f64(dtype, v, &mut e);
            b[..4].copy_from_slice(&(load_f64(dtype, &e) as f32).to_le_bytes());
            KernelArg::Bytes(b, 4)
        }
        DType::F64 => KernelArg::Bytes(v.to_le_bytes(), 8),
        _ => {
            store_f64(dtype, v, &mut b);
            KernelArg::Bytes(b, dtype.size())
        }
    }
}
