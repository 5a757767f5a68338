//! `rxvm bench`: how long a model or program takes to load and to run, as
//! onnxruntime's `onnxruntime_perf_test` and TFLite's `benchmark_model` report it. The
//! program is read as `run` reads it ([`crate::session::read_program_for`]), its inputs
//! are built once (`--input` specs, the rest generated) and uploaded once as the VM values
//! the function takes; each inference is one [`Vm::invoke_values`] whose results stay VM
//! values (not read back).

use crate::session::{
    find_function, host_inputs, read_program_for, render_vm_error, CompileSettings, Failure, Missing,
};
use rxvm_vm::memory::DeviceSpec;
use rxvm_vm::Vm;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Steady-state inferences measured when neither `--reps` nor `--time` is given.
pub const DEFAULT_REPS: u64 = 20;

/// How many steady-state inferences to measure.
#[derive(Clone, Copy, Debug)]
pub enum Amount {
    /// Exactly this many (at least one).
    Reps(u64),
    /// As many as start within this time (at least one).
    Time(Duration),
}

/// What to measure.
pub struct Request<'a> {
    pub file: &'a Path,
    /// The device as the user named it (reported as is).
    pub device: &'a str,
    pub spec: DeviceSpec,
    pub settings: &'a dyn CompileSettings,
    pub func: &'a str,
    /// `--input NAME=SPEC` specs; tensor parameters not named are generated.
    pub inputs: &'a [String],
    /// Inferences after the first one that are run and not measured.
    pub warmup: u64,
    pub amount: Amount,
}

/// What `rxvm bench` measured; times in milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub model: String,
    pub device: String,
    pub warmup: u64,
    /// Steady-state inferences measured.
    pub reps: u64,
    /// Reading and compiling the model (or loading the program) and creating the VM, its
    /// constants (the weights) uploaded to the device.
    pub load_ms: f64,
    /// The first inference.
    pub first_ms: f64,
    pub median_ms: f64,
    pub min_ms: f64,
    pub p90_ms: f64,
    pub mean_ms: f64,
    /// The process's peak resident set (`VmHWM`), when the system reports it.
    pub peak_rss_bytes: Option<u64>,
}

/// Loads the program, runs it once, warms up and measures. Errors are those `run` gives.
pub fn run(r: Request) -> Result<Report, Failure> {
    if let Amount::Reps(0) = r.amount {
        return Err(Failure::Message("--reps: expected a count of at least 1".into()));
    }
    let started = Instant::now();
    let (p, onnx_inputs) = read_program_for(r.file, &r.spec, r.settings, r.inputs)?;
    let module = Arc::new(p.module);
    let fid = find_function(&module, r.func, r.file)?;
    let rendered = |e: rxvm_vm::VmError| Failure::Rendered(render_vm_error(&e, p.source.as_ref()));
    let mut vm = Vm::with_devices(module.clone(), vec![r.spec]).map_err(rendered)?;
    let load_ms = ms(started.elapsed());

    // The inputs, built and uploaded once (storage parameters allocated by the VM).
    let host = host_inputs(&module.funcs[fid], &onnx_inputs, r.inputs, Missing::Random)?;
    let args = vm.host_args(fid, &host, &[]).map_err(rendered)?;
    drop(host);

    let infer = |vm: &mut Vm| -> Result<Duration, Failure> {
        let t = Instant::now();
        let out = vm.invoke_values(fid, args.clone()).map_err(rendered)?;
        let took = t.elapsed();
        drop(out);
        Ok(took)
    };
    let first_ms = ms(infer(&mut vm)?);
    for _ in 0..r.warmup {
        infer(&mut vm)?;
    }
    let mut times = Vec::new();
    match r.amount {
        Amount::Reps(n) => {
            for _ in 0..n {
                times.push(ms(infer(&mut vm)?));
            }
        }
        Amount::Time(limit) => {
            let t = Instant::now();
            while times.is_empty() || t.elapsed() < limit {
                times.push(ms(infer(&mut vm)?));
            }
        }
    }
    let s = Summary::of(&times);
    Ok(Report {
        model: r.file.display().to_string(),
        device: r.device.to_string(),
        warmup: r.warmup,
        reps: times.len() as u64,
        load_ms,
        first_ms,
        median_ms: s.median,
        min_ms: s.min,
        p90_ms: s.p90,
        mean_ms: s.mean,
        peak_rss_bytes: peak_rss_bytes(),
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Order statistics of a non-empty sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub min: f64,
    /// The middle value (the mean of the two middle ones for an even count).
    pub median: f64,
    /// The nearest-rank 90th percentile: the smallest value at least 90% of the sample is
    /// not above.
    pub p90: f64,
    pub mean: f64,
}

impl Summary {
    /// The summary of `times`; all zero when it is empty.
    pub fn of(times: &[f64]) -> Summary {
        if times.is_empty() {
            return Summary { min: 0.0, median: 0.0, p90: 0.0, mean: 0.0 };
        }
        let mut v = times.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        // Nearest rank: ceil(0.9 n), 1-based.
        let rank = (n * 9).div_ceil(10).max(1);
        Summary { min: v[0], median, p90: v[rank - 1], mean: v.iter().sum::<f64>() / n as f64 }
    }
}

/// The peak resident set of this process: `VmHWM` of `/proc/self/status` (Linux; the
/// same high-water mark `getrusage`'s `ru_maxrss` reports), or `None` where it is missing.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

impl Report {
    /// One JSON object with the keys `rxvm bench --json` documents.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "model": self.model,
            "device": self.device,
            "reps": self.reps,
            "load_ms": self.load_ms,
            "first_ms": self.first_ms,
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "p90_ms": self.p90_ms,
            "mean_ms": self.mean_ms,
            "peak_rss_bytes": self.peak_rss_bytes,
        })
    }

    /// The aligned table `rxvm bench` prints.
    pub fn to_text(&self) -> String {
        let t = |v: f64| format!("{v:.3} ms");
        let rss = match self.peak_rss_bytes {
            Some(b) => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
            None => "not reported by this system".into(),
        };
        let rows = [
            ("model", self.model.clone()),
            ("device", self.device.clone()),
            ("load", t(self.load_ms)),
            ("first", t(self.first_ms)),
            ("reps", format!("{} (after {} warm-up)", self.reps, self.warmup)),
            ("median", t(self.median_ms)),
            ("min", t(self.min_ms)),
            ("p90", t(self.p90_ms)),
            ("mean", t(self.mean_ms)),
            ("peak RSS", rss),
        ];
        rows.iter().map(|(k, v)| format!("{k:<9} {v}\n")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_statistics() {
        let s = Summary::of(&[5.0, 1.0, 3.0]);
        assert_eq!(s, Summary { min: 1.0, median: 3.0, p90: 5.0, mean: 3.0 });
        let s = Summary::of(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!((s.median, s.p90), (2.5, 4.0));
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(Summary::of(&ten).p90, 9.0);
        assert_eq!(Summary::of(&[7.0]), Summary { min: 7.0, median: 7.0, p90: 7.0, mean: 7.0 });
    }

    #[test]
    fn peak_rss_is_reported_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_bytes().is_some_and(|b| b > 0));
        }
    }
}
