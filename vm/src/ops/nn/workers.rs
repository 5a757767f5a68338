//! The host kernels' threads: how many, the worker pool, and parallel regions over jobs
//! or over the items of an output.

use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------
// Threads.

/// Work (multiply-adds) above which kernels split over threads.
pub(super) const PAR_WORK: f64 = 1e6;

pub(super) fn threads() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()).min(8))
}

/// The host kernels' worker threads, one fewer than [`threads`] (the calling thread takes
/// a share): created once and kept for the life of the process, so a parallel region
/// costs a wake-up, not a thread spawn. A pool of its own, so that an application's use
/// of rayon's global pool neither starves nor is starved by the VM.
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let n = threads().saturating_sub(1).max(1);
        rayon::ThreadPoolBuilder::new().num_threads(n).thread_name(|i| format!("rxvm-host-{i}")).build().ok()
    })
    .as_ref()
}

/// Runs `f` on every job, in parallel: the first on the calling thread, the others on
/// [`pool`] (or in order on the calling thread if it could not be created). The first
/// error (in job order) is returned; a job that panics is an error, not a panic.
pub(super) fn run_parts<J: Send>(
    jobs: impl IntoIterator<Item = J>,
    f: impl Fn(J) -> Result<(), String> + Sync,
) -> Result<(), String> {
    let run = |job: J| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(job)))
            .unwrap_or_else(|_| Err("a worker thread panicked".into()))
    };
    let run = &run;
    let Some(pool) = pool() else {
        return jobs.into_iter().try_for_each(run);
    };
    let jobs: Vec<J> = jobs.into_iter().collect();
    let mut results: Vec<Result<(), String>> = jobs.iter().map(|_| Ok(())).collect();
    pool.in_place_scope(|sc| {
        let mut pairs = jobs.into_iter().zip(results.iter_mut());
        let first = pairs.next();
        for (job, slot) in pairs {
            sc.spawn(move |_| *slot = run(job));
        }
        if let Some((job, slot)) = first {
            *slot = run(job);
        }
    });
    results.into_iter().collect()
}

/// Runs `f(item, out_chunk, may_split)` over the `item_len`-sized chunks of `out`. When the
/// work is large and there are at least as many items as threads, contiguous ranges of
/// items go to the threads (and `may_split` is false); otherwise the items run in order
/// and `f` may split its own work (`may_split` true).
pub(super) fn par_items<T: Send>(
    out: &mut [T],
    item_len: usize,
    work: f64,
    f: impl Fn(usize, &mut [T], bool) -> Result<(), String> + Sync,
) -> Result<(), String> {
    if item_len == 0 || out.is_empty() {
        return Ok(());
    }
    let items = out.len() / item_len;
    let t = threads();
    if t > 1 && items >= t && work >= PAR_WORK {
        let per = items.div_ceil(t);
        run_parts(out.chunks_mut(per * item_len).enumerate(), |(ti, part)| {
            part.chunks_mut(item_len).enumerate().try_for_each(|(j, it)| f(ti * per + j, it, false))
        })
    } else {
        out.chunks_mut(item_len).enumerate().try_for_each(|(i, it)| f(i, it, true))
    }
}

/// Splits `0..n` into at most `t` ranges of at least `min` elements.
pub(super) fn ranges(n: usize, t: usize, min: usize) -> Vec<(usize, usize)> {
    let parts = t.min(n / min.max(1)).max(1);
    let per = n.div_ceil(parts).max(1);
    (0..n).step_by(per).map(|a| (a, (a + per).min(n))).collect()
}
