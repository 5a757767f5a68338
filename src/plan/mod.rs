//! Memory planning: give every buffer of a schedule an offset in an arena so that buffers that are
//! live at the same time never share bytes, while keeping the arena small.
//!
//! This is the offset-assignment ("dynamic storage allocation") problem. It is NP-hard, so the
//! planner runs a few `O(n log n)`-ish heuristics ([`greedy_by_size`], [`max_live_first`],
//! [`max_live_longest_first`], [`first_fit_in_order`]) and keeps the best ([`best_of`]).
//! [`lower_bound`] gives the classic "peak of live bytes" bound to judge them by, and [`check`] is an
//! independent validator that every plan can be run through before anything trusts it.
//!
//! Strategies, [`check`] and the readers return `Err` with a message on bad input (alignment 0, an
//! empty lifetime, sizes whose sum overflows, malformed text); nothing here panics on it.
//!
//! Buffers are grouped in pools (e.g. one per device memory kind); pools are planned independently
//! and each gets its own arena. Lifetimes are inclusive ranges of schedule steps.
//!
//! [`trace`] reads the public benchmark inputs (Glow's allocator test models and MiniMalloc's CSV
//! instances) into [`Problem`]s.

mod check;
pub mod exact;
mod heuristics;
pub mod images;
mod index;
pub mod order;
mod problem;
pub mod svg;
pub mod trace;

#[cfg(test)]
mod tests;

pub use check::check;
pub use heuristics::{
    best_of, first_fit_in_order, greedy_by_size, max_live_first, max_live_longest_first, Strategy, STRATEGIES,
};
pub use problem::{align_up, lower_bound, lower_bound_per_pool, naive_bytes, Buffer, BufferKind, Plan, Problem};
