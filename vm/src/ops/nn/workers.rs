//! The host kernels' threads: how many, the worker pool, and parallel regions over jobs
//! or over the items of an output.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Work (multiply-adds) above which kernels split over threads.
pub(super) const PAR_WORK: f64 = 2.5e5;

pub(super) fn threads() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()).min(8))
}

/// How long an idle worker spins, watching for the next region, before it sleeps. A CNN
/// calls its operators back to back, a few tens of microseconds apart: a worker that is
/// still spinning starts at once, where a sleeping one costs a futex wake-up on both
/// sides (onnxruntime's and TVM's pools spin the same way).
const SPIN: Duration = Duration::from_micros(200);

/// The host kernels' worker threads, one fewer than [`threads`] (the calling thread takes
/// a share): created once and kept for the life of the process, so a parallel region
/// costs at most a wake-up, not a thread spawn. One region runs at a time; jobs are taken
/// by index, by the caller and the workers alike.
struct Pool {
    /// Set while a region runs: a region asked for meanwhile (another thread's VM, or a
    /// job that splits again) runs on its own calling thread.
    busy: AtomicBool,
    /// The region being run, or null.
    region: AtomicPtr<Region<'static>>,
    /// Bumped for each region posted: what idle workers watch.
    epoch: AtomicU64,
    /// Workers that may be reading `region`: the caller waits for none before its region
    /// (on its stack) goes away.
    inside: AtomicUsize,
    /// Workers asleep on `wake`.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

/// One parallel region: `run(i)` for every job index `i < jobs`.
struct Region<'a> {
    jobs: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    run: &'a (dyn Fn(usize) + Sync),
}

impl Region<'_> {
    /// Takes and runs jobs until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.jobs {
                return;
            }
            (self.run)(i);
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

fn pool() -> Option<&'static Pool> {
    static POOL: OnceLock<Option<&'static Pool>> = OnceLock::new();
    *POOL.get_or_init(|| {
        let workers = threads().saturating_sub(1);
        if workers == 0 {
            return None;
        }
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            busy: AtomicBool::new(false),
            region: AtomicPtr::new(std::ptr::null_mut()),
            epoch: AtomicU64::new(0),
            inside: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }));
        let mut started = 0;
        for i in 0..workers {
            let spawned = std::thread::Builder::new().name(format!("rxvm-host-{i}")).spawn(move || pool.worker());
            started += usize::from(spawned.is_ok());
        }
        (started > 0).then_some(pool)
    })
}

impl Pool {
    fn worker(&self) {
        let mut seen = self.epoch.load(Ordering::SeqCst);
        loop {
            seen = self.wait_for(seen);
            // Announce first, then look: the caller clears `region` before it waits for
            // `inside` to drain, so a region seen here is still alive.
            self.inside.fetch_add(1, Ordering::SeqCst);
            let region = self.region.load(Ordering::SeqCst);
            if !region.is_null() {
                // SAFETY: `region` points to the caller's live `Region` (see above): the
                // caller does not return before `inside` is back to zero.
                unsafe { &*region }.work();
            }
            self.inside.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Waits for an epoch after `seen`: spins for [`SPIN`], then sleeps.
    fn wait_for(&self, seen: u64) -> u64 {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let now = self.epoch.load(Ordering::SeqCst);
            if now != seen {
                return now;
            }
            spins += 1;
            if spins.is_multiple_of(64) {
                if start.elapsed() > SPIN {
                    break;
                }
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
        let mut guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        loop {
            let now = self.epoch.load(Ordering::SeqCst);
            if now != seen {
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                return now;
            }
            guard = self.wake.wait(guard).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Runs the region on the calling thread and the workers; false (nothing run) when
    /// another region is running.
    fn run(&self, jobs: usize, run: &(dyn Fn(usize) + Sync)) -> bool {
        if self.busy.swap(true, Ordering::Acquire) {
            return false;
        }
        let region = Region { jobs, next: AtomicUsize::new(0), done: AtomicUsize::new(0), run };
        // SAFETY (of the lifetime erased here): workers reach `region` only through this
        // pointer, which is cleared, and their readers drained, before this returns.
        let ptr = (&region as *const Region<'_>).cast_mut().cast::<Region<'static>>();
        self.region.store(ptr, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.wake.notify_all();
        }
        region.work();
        let mut spins = 0u32;
        while region.done.load(Ordering::Acquire) < jobs {
            spins += 1;
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
        self.region.store(std::ptr::null_mut(), Ordering::SeqCst);
        while self.inside.load(Ordering::SeqCst) > 0 {
            std::hint::spin_loop();
        }
        self.busy.store(false, Ordering::Release);
        true
    }
}

/// Runs `f` on every job, in parallel on the calling thread and [`pool`]'s workers (in
/// order on the calling thread when there is no pool or it is running another region).
/// The first error (in job order) is returned; a job that panics is an error, not a panic.
pub(super) fn run_parts<J: Send>(
    jobs: impl IntoIterator<Item = J>,
    f: impl Fn(J) -> Result<(), String> + Sync,
) -> Result<(), String> {
    let run = |job: J| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(job)))
            .unwrap_or_else(|_| Err("a worker thread panicked".into()))
    };
    let jobs: Vec<Mutex<Option<J>>> = jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
    let results: Vec<Mutex<Result<(), String>>> = jobs.iter().map(|_| Mutex::new(Ok(()))).collect();
    let take = |m: &Mutex<Option<J>>| m.lock().unwrap_or_else(|p| p.into_inner()).take();
    let one = |i: usize| {
        if let Some(job) = take(&jobs[i]) {
            *results[i].lock().unwrap_or_else(|p| p.into_inner()) = run(job);
        }
    };
    let parallel = jobs.len() > 1 && pool().is_some_and(|p| p.run(jobs.len(), &one));
    if !parallel {
        for (i, result) in results.iter().enumerate() {
            one(i);
            if result.lock().unwrap_or_else(|p| p.into_inner()).is_err() {
                break;
            }
        }
    }
    results.into_iter().try_for_each(|r| r.into_inner().unwrap_or_else(|p| p.into_inner()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_runs_once_in_every_region() {
        for region in 0..200usize {
            let jobs = 1 + region % 7;
            let counts: Vec<AtomicUsize> = (0..jobs).map(|_| AtomicUsize::new(0)).collect();
            run_parts(0..jobs, |i| {
                counts[i].fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
            assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1), "region {region}");
        }
    }

    #[test]
    fn the_first_error_in_job_order_comes_back_and_a_panic_is_an_error() {
        let res = run_parts(0..6, |i| if i >= 3 { Err(format!("job {i}")) } else { Ok(()) });
        assert_eq!(res, Err("job 3".to_string()));
        let res = run_parts(0..4, |i| if i == 2 { panic!("boom") } else { Ok(()) });
        assert_eq!(res, Err("a worker thread panicked".to_string()));
        // The pool still runs regions after a panic.
        let sum = AtomicUsize::new(0);
        run_parts(1..=10, |i| {
            sum.fetch_add(i, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
        assert_eq!(sum.load(Ordering::Relaxed), 55);
    }

    #[test]
    fn regions_nest_and_run_from_many_threads_at_once() {
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        run_parts(0..3, |_| {
                            // A job that splits again runs its inner region on its own thread.
                            run_parts(0..4, |_| {
                                total.fetch_add(1, Ordering::Relaxed);
                                Ok(())
                            })
                        })
                        .unwrap();
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 4 * 50 * 3 * 4);
    }
}
