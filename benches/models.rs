//! End-to-end inference of the nine model-zoo CNNs (`scripts/fetch-onnx-data.sh`) on the
//! host device and on Intel's OpenCL CPU runtime when it is present
//! (`source scripts/opencl-env.sh`). One iteration is one `Vm::invoke` of a compiled,
//! loaded model (weights already on the device): what an application pays per inference.
//! `cargo bench --bench models [-- FILTER]`.

use criterion::{criterion_group, criterion_main, Criterion};
use rxvm::compile::{compile, Options};
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::opencl::find_device;
use rxvm::vm::{DeviceCaps, HostValue, Vm};
use std::sync::Arc;
use std::time::Duration;

mod common;

fn bench(c: &mut Criterion) {
    let Some(dir) = common::light_dir("models") else { return };
    let mut devices = vec![("host", DeviceSpec::Host(DeviceCaps::host()))];
    if let Ok(info) = find_device("intel") {
        devices.push(("intel", DeviceSpec::OpenCl(info)));
    }
    let mut g = c.benchmark_group("models");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    for name in common::MODELS {
        let (graph, shapes, input) = common::load(&dir, name);
        let input = HostValue::Tensor(input);
        for (dev, spec) in &devices {
            let target = match spec {
                DeviceSpec::Host(caps) => caps.clone(),
                DeviceSpec::OpenCl(info) => info.caps.clone(),
            };
            let compiled = compile(&graph, &shapes, &Options { target, ..Options::default() }).expect("compiles");
            let mut vm = Vm::with_devices(Arc::new(compiled.module), vec![spec.clone()]).expect("a VM");
            vm.invoke("main", std::slice::from_ref(&input)).expect("warm-up run");
            g.bench_function(format!("{name}/{dev}"), |b| {
                b.iter(|| vm.invoke("main", std::slice::from_ref(&input)).expect("runs"))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
