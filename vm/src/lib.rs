//! rxvm-vm: the bytecode, the `.rxb` module format, the verifier and the interpreter with
//! its devices and builtins.
//!
//! ```
//! use rxvm_vm::{builder::{ModuleBuilder, Operand}, types::{DType, Scope, Type, Dim}, HostValue, Vm};
//! use std::sync::Arc;
//!
//! let mut mb = ModuleBuilder::new("demo");
//! let t = Type::Tensor { dtype: DType::F32, dims: vec![Dim::Known(4)] };
//! let mut f = mb.function("main", vec![], vec![t]);
//! let s = f.alloc_storage(Operand::Int(64), None, 0, Scope::Global);
//! let y = f.alloc_tensor(s, Operand::Int(0), DType::F32, &[Operand::Int(4)], Scope::Global);
//! f.call_builtin("fill", &[Operand::Reg(y), Operand::Float(2.5)]).unwrap();
//! f.ret(&[Operand::Reg(y)]);
//! mb.add_function(f);
//! let module = mb.build().unwrap();
//! let mut vm = Vm::host(Arc::new(module)).unwrap();
//! let out = vm.invoke("main", &[]).unwrap();
//! let HostValue::Tensor(t) = &out[0] else { panic!() };
//! assert_eq!(t.to_f64(), vec![2.5; 4]);
//! ```

// No `unwrap`/`expect` outside tests: bad input (text, bytecode, models, arguments) must
// give an error, never a panic. An invariant that cannot fail is allowed where it is
// stated, with `#[allow]` and the reason.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

// The layers, lowest first (docs/architecture.md draws them; tests/layers.rs checks that
// imports only go down): the bytecode and its module format (`ir`), the memory runtime
// (`runtime`), the OpenCL backend (`opencl`) beside the operator library (`ops`), and the
// interpreter (`interp`).
pub mod interp;
pub mod ir;
#[cfg(feature = "opencl")]
pub mod opencl;
pub mod ops;
pub mod runtime;

// The modules' public paths from before the layers had folders of their own.
pub use interp::{debug, error, exec, io};
pub use ir::{binary, builder, builtins, bytecode, host_tensor, minifloat, module, types, verify};
#[cfg(feature = "opencl")]
pub use opencl::builtins as cl_kernels;
pub use runtime::{device, shared, value};

/// Storages, views and the runtime (`runtime/memory.rs`), and [`DeviceSpec`], which says
/// what a runtime opens (`interp/devices.rs`): the module as it was before the layers.
pub mod memory {
    pub use crate::interp::devices::DeviceSpec;
    pub use crate::runtime::memory::*;
}

pub use binary::{
    read_module, read_module_mapped, read_module_shared, write_module, write_module_to, FileMap, LoadError,
};
pub use device::DeviceCaps;
pub use error::{VmError, VmErrorData};
pub use host_tensor::{HostTensor, HostValue};
pub use interp::{Chain, Interrupt, Kernels, Limits, Stopped, Vm};
pub use io::{Copies, Fallback, IoReport};
pub use memory::Stats;
pub use module::Module;
pub use verify::{verify_module, VerifyError};

/// Why bytes could not become a runnable module.
#[derive(Debug)]
pub enum ModuleError {
    Load(LoadError),
    Verify(VerifyError),
}

impl std::fmt::Display for ModuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModuleError::Load(e) => e.fmt(f),
            ModuleError::Verify(e) => write!(f, "invalid module: {e}"),
        }
    }
}

impl std::error::Error for ModuleError {}

/// Decodes and verifies an untrusted `.rxb`. A verifier error's context ends with the byte
/// offset of what it refuses (`in @main, instruction 3, at byte 301`; [`FileMap::locate`]).
pub fn load_module(bytes: &[u8]) -> Result<Module, ModuleError> {
    verified(read_module_mapped(bytes))
}

/// [`load_module`] whose constants are slices of `file` (a memory-mapped `.rxb`: see
/// [`binary::read_module_shared`]), not copies. On the host the VM runs on them in place,
/// so loading a model copies none of its weights.
pub fn load_module_shared(file: &module::Bytes) -> Result<Module, ModuleError> {
    verified(read_module_shared(file))
}

fn verified(read: Result<(Module, FileMap), LoadError>) -> Result<Module, ModuleError> {
    let (m, map) = read.map_err(ModuleError::Load)?;
    verify_module(&m).map_err(|mut e| {
        if let Some(at) = map.locate(&e) {
            e.context = Some(match e.context.take() {
                Some(c) => format!("{c}, at byte {at}"),
                None => format!("at byte {at}"),
            });
        }
        ModuleError::Verify(e)
    })?;
    Ok(m)
}
