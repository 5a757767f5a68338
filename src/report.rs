//! The plan report of `rxvm plan`: arena bytes per pool, the lower bound, the no-reuse
//! total, efficiency, planning time and the winning strategy, as text or one JSON object.

use crate::plan::{lower_bound_per_pool, naive_bytes, BufferKind, Plan, Problem};
use serde_json::json;
use std::fmt::Write;

/// One pool's numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSummary {
    pub pool: u32,
    /// The pool's name (`arena`, `outputs`, ...) or `pool N`.
    pub name: String,
    pub arena_bytes: u64,
    pub lower_bound: u64,
    pub buffers: usize,
    pub textures: usize,
}

/// What a plan achieved, for one model or trace.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanSummary {
    pub name: String,
    pub strategy: String,
    pub arena_bytes: u64,
    pub lower_bound: u64,
    pub naive_bytes: u64,
    pub millis: f64,
    pub buffers: usize,
    pub pools: Vec<PoolSummary>,
    /// For a model compiled with `--reorder`: the peak of live bytes before and after.
    pub reorder_peaks: Option<(u64, u64)>,
    /// For a model whose textures share image slots: how many, and their image bytes.
    pub images: Option<(usize, u64)>,
}

impl PlanSummary {
    pub fn new(name: &str, problem: &Problem, plan: &Plan, millis: f64) -> PlanSummary {
        let bounds = lower_bound_per_pool(problem);
        let pools = bounds
            .iter()
            .map(|&(pool, lower_bound)| {
                let members = problem.buffers.iter().enumerate().filter(|(_, b)| b.pool == pool);
                let (buffers, textures) = members
                    .fold((0, 0), |(n, t), (i, _)| (n + 1, t + usize::from(problem.kind(i) == BufferKind::Texture)));
                PoolSummary {
                    pool,
                    name: problem.pool_name(pool),
                    arena_bytes: plan.pool_size(pool).unwrap_or(0),
                    lower_bound,
                    buffers,
                    textures,
                }
            })
            .collect();
        PlanSummary {
            name: name.to_string(),
            strategy: plan.strategy.to_string(),
            arena_bytes: plan.arena_bytes(),
            lower_bound: bounds.iter().map(|p| p.1).sum(),
            naive_bytes: naive_bytes(problem),
            millis,
            buffers: problem.buffers.len(),
            pools,
            reorder_peaks: None,
            images: None,
        }
    }

    /// LB / arena: 1 when the plan cannot be beaten on this schedule.
    pub fn efficiency(&self) -> f64 {
        if self.arena_bytes == 0 {
            1.0
        } else {
            self.lower_bound as f64 / self.arena_bytes as f64
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        let pools: Vec<serde_json::Value> = self
            .pools
            .iter()
            .map(|p| {
                json!({
                    "pool": p.pool,
                    "name": p.name,
                    "arena_bytes": p.arena_bytes,
                    "lower_bound": p.lower_bound,
                    "buffers": p.buffers,
                    "textures": p.textures,
                })
            })
            .collect();
        let mut v = json!({
            "name": self.name,
            "arena_bytes": self.arena_bytes,
            "lower_bound": self.lower_bound,
            "naive_bytes": self.naive_bytes,
            "efficiency": (self.efficiency() * 1e6).round() / 1e6,
            "strategy": self.strategy,
            "millis": (self.millis * 1e3).round() / 1e3,
            "buffers": self.buffers,
            "pools": pools,
        });
        if let Some((before, after)) = self.reorder_peaks {
            v["peak_before_reorder"] = before.into();
            v["peak_after_reorder"] = after.into();
        }
        if let Some((slots, bytes)) = self.images {
            v["image_slots"] = slots.into();
            v["image_bytes"] = bytes.into();
        }
        v
    }

    /// A few aligned lines; pools are listed when there are several (at most `MAX_POOLS`).
    pub fn to_text(&self) -> String {
        const MAX_POOLS: usize = 8;
        let mut s = format!("{}\n", self.name);
        let rows = [
            ("strategy", self.strategy.clone()),
            ("arena", format!("{} B", group(self.arena_bytes))),
            ("lower bound", format!("{} B", group(self.lower_bound))),
            ("no reuse", format!("{} B", group(self.naive_bytes))),
            ("efficiency", format!("{:.1} % (lower bound / arena)", self.efficiency() * 100.0)),
            ("buffers", self.buffers.to_string()),
            ("time", format!("{:.2} ms", self.millis)),
        ];
        for (k, v) in rows {
            let _ = writeln!(s, "  {k:<12} {v}");
        }
        if let Some((before, after)) = self.reorder_peaks {
            let _ = writeln!(
                s,
                "  {:<12} peak of live bytes {} B before, {} B after",
                "reorder",
                group(before),
                group(after)
            );
        }
        if let Some((slots, bytes)) = self.images {
            let _ = writeln!(s, "  {:<12} {slots} shared image slots, {} B of images", "images", group(bytes));
        }
        if self.pools.len() > 1 {
            for p in self.pools.iter().take(MAX_POOLS) {
                let tex = if p.textures > 0 { format!(", {} textures", p.textures) } else { String::new() };
                // Unnamed pools are `pool N`; pool names have no spaces.
                let label = if p.name.contains(' ') { p.name.clone() } else { format!("pool `{}`", p.name) };
                let _ = writeln!(
                    s,
                    "  {label:<12} {} B, lower bound {} B, {} buffers{tex}",
                    group(p.arena_bytes),
                    group(p.lower_bound),
                    p.buffers
                );
            }
            if self.pools.len() > MAX_POOLS {
                let _ = writeln!(s, "  ... and {} more pools (--json lists all)", self.pools.len() - MAX_POOLS);
            }
        }
        s
    }
}

/// `1234567` → `1,234,567`.
pub fn group(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Buffer;

    #[test]
    fn summary_counts_pools_bounds_and_efficiency() {
        let mut p = Problem::new(vec![
            Buffer::new(100, 1, 0, 1),
            Buffer::new(50, 1, 1, 2),
            Buffer::new(70, 1, 0, 0).in_pool(1),
        ]);
        p.kinds = vec![BufferKind::Buffer, BufferKind::Texture, BufferKind::Output];
        let plan = Plan { offsets: vec![0, 100, 0], pool_sizes: vec![(0, 150), (1, 70)], strategy: "x" };
        let s = PlanSummary::new("m", &p, &plan, 1.5);
        assert_eq!((s.arena_bytes, s.lower_bound, s.naive_bytes), (220, 220, 220));
        assert_eq!(
            s.pools[0],
            PoolSummary { pool: 0, name: "pool 0".into(), arena_bytes: 150, lower_bound: 150, buffers: 2, textures: 1 }
        );
        assert_eq!(s.efficiency(), 1.0);
        let j = s.to_json();
        assert_eq!(j["pools"][1]["arena_bytes"], 70);
        assert_eq!(j["millis"], 1.5);
        assert!(s.to_text().contains("pool 1       70 B, lower bound 70 B, 1 buffers"), "{}", s.to_text());
        assert_eq!(group(1234567), "1,234,567");
        assert_eq!(group(12), "12");
    }
}
