//! Several threads enumerating OpenCL devices at once, as the first OpenCL calls of the
//! process (this file holds one test so that nothing opened the runtime before): PoCL 3.1
//! crashed when a thread asked a device's name while another was still initialising the
//! platform, so `list_devices` enumerates one thread at a time. Without a runtime every
//! thread must get the same error.

use rxvm::vm::opencl::list_devices;

#[test]
fn threads_enumerating_devices_at_once_agree() {
    let barrier = std::sync::Barrier::new(4);
    let lists: Vec<Result<Vec<String>, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    list_devices().map(|ds| ds.iter().map(|d| d.caps.name.clone()).collect()).map_err(|e| e.to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("an enumerating thread")).collect()
    });
    for l in &lists[1..] {
        assert_eq!(l, &lists[0], "threads saw different devices");
    }
}
