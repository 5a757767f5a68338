//! What a VM runs on ([`DeviceSpec`]) and opening it: [`Runtime::new`] makes the host's
//! devices and opens each OpenCL device (its context and queue) as a runtime device
//! (`crate::runtime::backend::Device`).

use crate::runtime::device::DeviceCaps;
use crate::runtime::memory::{Backend, Runtime};
use std::rc::Rc;

#[cfg(feature = "opencl")]
use crate::opencl::device::{ClDevice, ClDeviceInfo};

/// What a VM runs on: the host (with capabilities to emulate) or an OpenCL device.
#[derive(Clone, Debug)]
pub enum DeviceSpec {
    Host(DeviceCaps),
    #[cfg(feature = "opencl")]
    OpenCl(ClDeviceInfo),
}

impl Runtime {
    /// Opens every device (OpenCL contexts and queues are created here).
    pub fn new(specs: Vec<DeviceSpec>) -> Result<Rc<Runtime>, String> {
        let mut backends = Vec::with_capacity(specs.len());
        for spec in specs {
            backends.push(match spec {
                DeviceSpec::Host(caps) => (caps, Backend::Host),
                #[cfg(feature = "opencl")]
                DeviceSpec::OpenCl(info) => {
                    let d = ClDevice::open(&info).map_err(|e| format!("cannot open `{}`: {e}", info.caps.name))?;
                    (d.caps.clone(), Backend::Device(Box::new(d)))
                }
            });
        }
        Ok(Runtime::with_backends(backends))
    }
}
