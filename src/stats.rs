//! `--stats` output: a table for people, one JSON object for scripts.

use rxvm_vm::Vm;
use std::io::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StatsFormat {
    Table,
    Json,
}

/// The counters of a VM as ordered `(key, value)` pairs, including the pool's free bytes.
pub fn stats_fields(vm: &Vm) -> Vec<(&'static str, u64)> {
    let mut v = vm.stats().fields().to_vec();
    v.push(("pool_free_bytes", vm.pool_free_bytes()));
    v.extend(vm.cl_stats());
    v
}

pub fn stats_json(vm: &Vm) -> String {
    let map: serde_json::Map<String, serde_json::Value> =
        stats_fields(vm).into_iter().map(|(k, v)| (k.to_string(), v.into())).collect();
    serde_json::Value::Object(map).to_string()
}

pub fn print_stats(out: &mut dyn Write, fmt: StatsFormat, vm: &Vm) -> std::io::Result<()> {
    match fmt {
        StatsFormat::Json => writeln!(out, "{}", stats_json(vm)),
        StatsFormat::Table => {
            let fields = stats_fields(vm);
            let w = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            writeln!(out, "{:<w$}  {:>14}", "counter", "value")?;
            for (k, v) in fields {
                writeln!(out, "{k:<w$}  {v:>14}")?;
            }
            Ok(())
        }
    }
}
