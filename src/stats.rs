//! `--stats` output: a table for people, one JSON object for scripts.

use crate::compile::PlanReport;
use rxvm_vm::Vm;
use std::io::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StatsFormat {
    Table,
    Json,
}

/// The counters of a VM as ordered `(key, value)` pairs, including the pool's free bytes,
/// and the memory plan's numbers when the program was compiled from a model.
pub fn stats_fields(vm: &Vm, plan: Option<&PlanReport>) -> Vec<(&'static str, u64)> {
    let mut v = Vec::new();
    if let Some(p) = plan {
        v.extend([
            ("arena_bytes", p.arena_bytes),
            ("lower_bound", p.lower_bound),
            ("naive_bytes", p.naive_bytes),
            ("texture_tensors", p.textures as u64),
            ("layout_conversions", p.conversions as u64),
            ("input_bytes", p.input_bytes),
            ("device_bytes", p.device_bytes()),
        ]);
    }
    v.extend(vm.stats().fields().iter().copied());
    v.push(("pool_free_bytes", vm.pool_free_bytes()));
    v.extend(vm.cl_stats());
    v
}

pub fn stats_json(vm: &Vm, plan: Option<&PlanReport>) -> String {
    let mut map: serde_json::Map<String, serde_json::Value> =
        stats_fields(vm, plan).into_iter().map(|(k, v)| (k.to_string(), v.into())).collect();
    if let Some(p) = plan {
        map.insert("plan_strategy".into(), p.strategy.clone().into());
        map.insert("plan_target".into(), p.target.clone().into());
        let pools: serde_json::Map<String, serde_json::Value> = p
            .pools
            .iter()
            .map(|q| {
                let v = serde_json::json!({
                    "bytes": q.bytes,
                    "lower_bound": q.lower_bound,
                    "holds": q.holds,
                    "caller_provided": q.parameter,
                });
                (q.name.clone(), v)
            })
            .collect();
        map.insert("pools".into(), pools.into());
    }
    let fallbacks: Vec<serde_json::Value> = vm.last_io().fallbacks.iter().map(|f| f.to_string().into()).collect();
    map.insert("io_fallbacks".into(), fallbacks.into());
    serde_json::Value::Object(map).to_string()
}

pub fn print_stats(out: &mut dyn Write, fmt: StatsFormat, vm: &Vm, plan: Option<&PlanReport>) -> std::io::Result<()> {
    match fmt {
        StatsFormat::Json => writeln!(out, "{}", stats_json(vm, plan)),
        StatsFormat::Table => {
            if let Some(p) = plan {
                writeln!(out, "memory plan: {} for target `{}`", p.strategy, p.target)?;
                for q in &p.pools {
                    writeln!(
                        out,
                        "pool `{}`: {} bytes (lower bound {}), holds {}{}",
                        q.name,
                        q.bytes,
                        q.lower_bound,
                        q.holds,
                        if q.parameter { ", provided by the caller" } else { "" }
                    )?;
                }
            }
            for fb in &vm.last_io().fallbacks {
                writeln!(out, "io fallback: {fb}")?;
            }
            let fields = stats_fields(vm, plan);
            let w = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            writeln!(out, "{:<w$}  {:>14}", "counter", "value")?;
            for (k, v) in fields {
                writeln!(out, "{k:<w$}  {v:>14}")?;
            }
            Ok(())
        }
    }
}
