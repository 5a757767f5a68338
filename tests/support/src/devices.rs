//! The devices tests run on: the host, and each OpenCL platform that is installed. A
//! platform named in `RXVM_REQUIRE_OPENCL` (comma-separated, as CI sets it) must be there:
//! its absence fails the test instead of skipping it.

use rxvm_vm::memory::DeviceSpec;
use rxvm_vm::opencl::{find_device, ClDeviceInfo};
use rxvm_vm::DeviceCaps;

/// Whether `RXVM_REQUIRE_OPENCL` names platform `name`.
pub fn required(name: &str) -> bool {
    std::env::var("RXVM_REQUIRE_OPENCL").unwrap_or_default().split(',').any(|r| r.trim() == name)
}

/// OpenCL platform `name` (`intel`, `pocl`, `oclgrind`), or `None` when it is absent and
/// not required; panics when it is absent and required.
pub fn opencl_platform(name: &str) -> Option<ClDeviceInfo> {
    match find_device(name) {
        Ok(info) => Some(info),
        Err(e) if required(name) => panic!("RXVM_REQUIRE_OPENCL names `{name}` but it is not available: {e}"),
        Err(e) => {
            eprintln!("skipping OpenCL platform `{name}`: {e}");
            None
        }
    }
}

/// The host device, then each of the OpenCL `platforms` that is present, with their names.
pub fn host_and(platforms: &[&'static str]) -> Vec<(&'static str, DeviceSpec)> {
    let mut v = vec![("host", DeviceSpec::Host(DeviceCaps::host()))];
    v.extend(platforms.iter().filter_map(|&name| Some((name, DeviceSpec::OpenCl(opencl_platform(name)?)))));
    v
}
