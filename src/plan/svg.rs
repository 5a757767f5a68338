//! SVG pictures of memory plans: one panel per pool, schedule steps along x, arena offsets along y
//! (0 at the bottom), one rectangle per buffer spanning `[first, last + 1) × [offset, offset + size)`.
//!
//! The picture is built with plain string formatting so the library needs no SVG crate. Output is a
//! pure function of its inputs (no hash-map order, fixed number formatting), which lets tests
//! snapshot it. Work is `O(n log n)` in the number of buffers at most (the lower bound's sort); the
//! drawing itself is one pass, and labels and long names are cut so that huge problems give large
//! but not pathological files.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use super::problem::{lower_bound_per_pool, BufferKind, Plan, Problem};

/// Width of the picture in SVG user units (pixels).
pub const WIDTH: f64 = 1200.0;
/// Room for the y tick labels.
const MARGIN_LEFT: f64 = 72.0;
/// Room for the "LB" label right of the plot.
const MARGIN_RIGHT: f64 = 40.0;
/// Title, summary line and legend.
const HEADER_HEIGHT: f64 = 76.0;
/// Space above each plot for the panel title.
const PANEL_TITLE_HEIGHT: f64 = 30.0;
const PLOT_HEIGHT: f64 = 220.0;
/// Space below each plot for the step ticks and their labels.
const PANEL_AXIS_HEIGHT: f64 = 34.0;
const PANEL_HEIGHT: f64 = PANEL_TITLE_HEIGHT + PLOT_HEIGHT + PANEL_AXIS_HEIGHT;
const FOOTER_HEIGHT: f64 = 8.0;

/// Labels are 11 px sans-serif; 6.6 px is a generous average glyph width, so a label that is
/// estimated to fit really does (most names are narrower than this estimate).
const LABEL_FONT_SIZE: f64 = 11.0;
const LABEL_CHAR_WIDTH: f64 = 6.6;
const LABEL_MIN_HEIGHT: f64 = 13.0;
/// Horizontal padding between a rectangle's left edge and its label.
const LABEL_PAD: f64 = 3.0;
/// Shortest label worth showing when a name must be cut (counting the ellipsis).
const LABEL_MIN_CHARS: usize = 4;
/// Names in tooltips are cut to this many characters, to bound the file size of huge problems.
const TOOLTIP_NAME_CHARS: usize = 120;
/// Rectangles thinner than this (either way) get no outline, which would otherwise swamp their
/// fill when thousands of them share a panel.
const OUTLINE_MIN_PX: f64 = 3.0;

const BACKGROUND: &str = "#ffffff";
const LOWER_BOUND_COLOUR: &str = "#d62728";
const AXIS_COLOUR: &str = "#888888";
const TEXT_COLOUR: &str = "#222222";

/// The fill colour of a kind's rectangles, as `#rrggbb` (the Tableau 10 blue, orange, green and
/// purple: distinct, also for the common forms of colour blindness, and dark text reads on all).
pub fn colour(kind: BufferKind) -> &'static str {
    match kind {
        BufferKind::Buffer => "#4e79a7",
        BufferKind::Texture => "#f28e2b",
        BufferKind::Input => "#59a14f",
        BufferKind::Output => "#b07aa1",
    }
}

/// Where a panel's plot lies, in SVG user units (y grows downwards as in SVG).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlotArea {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

/// The plot area of the `panel`-th panel (panels are the pools in ascending order, counting pools
/// that appear in the problem or in the plan). Inside it, x maps the steps
/// `[min first, max last + 1)` of all drawn buffers linearly onto `left..right` (the same for all
/// panels), and y maps bytes `0..top` onto `bottom..top`, where the panel's top byte is the largest
/// of the pool's arena, its lower bound and its buffers' `offset + size`.
pub fn plot_area(panel: usize) -> PlotArea {
    let top = HEADER_HEIGHT + panel as f64 * PANEL_HEIGHT + PANEL_TITLE_HEIGHT;
    PlotArea { left: MARGIN_LEFT, top, right: WIDTH - MARGIN_RIGHT, bottom: top + PLOT_HEIGHT }
}

/// An SVG picture of `plan`: one panel per pool (stacked vertically, titled with the pool's name,
/// arena bytes, lower bound and efficiency LB/arena), x = schedule step, y = byte offset (0 at the
/// bottom), one rectangle per buffer spanning `[first, last + 1) × [offset, offset + size)`,
/// coloured by kind (buffer / texture / input / output, with a legend), labelled with its name
/// when the rectangle is big enough (else a `<title>` tooltip only — every rectangle gets a
/// `<title>` with name, kind, bytes, offset, steps), a dashed horizontal line at the pool's lower
/// bound labelled "LB", and axis ticks (steps; bytes with K/M suffixes).
///
/// Zero-size buffers are not drawn (the panel title counts them). The plan need not be valid:
/// overlapping buffers are drawn on top of each other, which is the point when debugging one. It
/// must fit the problem, though: one offset per buffer, names and kinds empty or one per buffer,
/// `first <= last`, `offset + size` within `u64`, and an arena size for every pool with buffers;
/// otherwise this returns `Err`.
pub fn render(problem: &Problem, plan: &Plan, title: &str) -> Result<String, String> {
    check_inputs(problem, plan)?;
    let panels = panels(problem, plan)?;
    let mut out = String::with_capacity(4096 + problem.buffers.len() * 200);
    // Writing to a `String` cannot fail; the error is mapped only to avoid an `unwrap`.
    draw(&mut out, problem, plan, &panels, title).map_err(|_| "formatting the SVG failed".to_string())?;
    Ok(out)
}

fn draw(out: &mut String, problem: &Problem, plan: &Plan, panels: &[Panel], title: &str) -> fmt::Result {
    let steps = StepRange::of(problem);
    let height = HEADER_HEIGHT + panels.len() as f64 * PANEL_HEIGHT + FOOTER_HEIGHT;
    write_header(out, problem, plan, panels, title, height)?;
    for (index, panel) in panels.iter().enumerate() {
        write_panel(out, problem, plan, panel, &steps, plot_area(index))?;
    }
    out.push_str("</svg>\n");
    Ok(())
}

/// Rejects inputs that would make the picture meaningless or the arithmetic overflow.
fn check_inputs(problem: &Problem, plan: &Plan) -> Result<(), String> {
    let n = problem.buffers.len();
    if plan.offsets.len() != n {
        return Err(format!("plan has {} offsets for {n} buffers", plan.offsets.len()));
    }
    if !problem.names.is_empty() && problem.names.len() != n {
        return Err(format!("problem has {n} buffers but {} names", problem.names.len()));
    }
    if !problem.kinds.is_empty() && problem.kinds.len() != n {
        return Err(format!("problem has {n} buffers but {} kinds", problem.kinds.len()));
    }
    for (i, (b, &offset)) in problem.buffers.iter().zip(&plan.offsets).enumerate() {
        if b.first > b.last {
            return Err(format!(
                "{} has an empty lifetime: first step {} > last step {}",
                problem.describe(i),
                b.first,
                b.last
            ));
        }
        if offset.checked_add(b.size).is_none() {
            return Err(format!("{} ends past 2^64 bytes: offset {offset} + size {}", problem.describe(i), b.size));
        }
    }
    Ok(())
}

/// What one pool's panel shows.
struct Panel {
    pool: u32,
    arena: u64,
    lower_bound: u64,
    /// The byte drawn at the top of the plot.
    top_byte: u64,
    /// Indices of the pool's buffers, ascending (drawing order).
    members: Vec<usize>,
    zero_size: usize,
}

/// One panel per pool of the problem or the plan, ascending by pool. Lookups are binary searches
/// in sorted lists, so many pools cost `O(n log n)`, not `O(n × pools)`.
fn panels(problem: &Problem, plan: &Plan) -> Result<Vec<Panel>, String> {
    // A stable sort and `dedup_by_key` keep the first size of a pool listed twice, like
    // `Plan::pool_size`.
    let mut arenas = plan.pool_sizes.clone();
    arenas.sort_by_key(|&(pool, _)| pool);
    arenas.dedup_by_key(|&mut (pool, _)| pool);
    let lookup = |sorted: &[(u32, u64)], pool: u32| {
        sorted.binary_search_by_key(&pool, |&(p, _)| p).ok().map(|slot| sorted[slot].1)
    };
    let mut pools = problem.pools();
    pools.extend(arenas.iter().map(|&(pool, _)| pool));
    pools.sort_unstable();
    pools.dedup();
    let bounds = lower_bound_per_pool(problem);
    let mut panels = pools
        .iter()
        .map(|&pool| Panel {
            pool,
            arena: lookup(&arenas, pool).unwrap_or(0),
            lower_bound: lookup(&bounds, pool).unwrap_or(0),
            top_byte: 0,
            members: Vec::new(),
            zero_size: 0,
        })
        .collect::<Vec<_>>();
    for (i, (b, &offset)) in problem.buffers.iter().zip(&plan.offsets).enumerate() {
        if lookup(&arenas, b.pool).is_none() {
            return Err(format!("plan has no arena size for pool {}, which {} uses", b.pool, problem.describe(i)));
        }
        // Every buffer's pool is in `pools`, so the search cannot fail.
        let Ok(slot) = pools.binary_search(&b.pool) else { continue };
        let panel = &mut panels[slot];
        if b.size == 0 {
            panel.zero_size += 1;
        } else {
            panel.top_byte = panel.top_byte.max(offset + b.size);
            panel.members.push(i);
        }
    }
    for panel in &mut panels {
        // At least 1 so that empty panels still have a scale.
        panel.top_byte = panel.top_byte.max(panel.arena).max(panel.lower_bound).max(1);
    }
    Ok(panels)
}

/// The steps shown along x, `[start, end)`, shared by all panels so they line up.
struct StepRange {
    start: u64,
    end: u64,
}

impl StepRange {
    /// From the earliest first step to the latest last step of the drawn (non-empty) buffers;
    /// `[0, 1)` when there are none. A zero-size buffer far away must not squash the picture.
    fn of(problem: &Problem) -> StepRange {
        let drawn = problem.buffers.iter().filter(|b| b.size > 0);
        let start = drawn.clone().map(|b| u64::from(b.first)).min().unwrap_or(0);
        let end = drawn.map(|b| u64::from(b.last) + 1).max().unwrap_or(1);
        StepRange { start, end }
    }

    /// The x coordinate of the start of `step` in `area`.
    fn x(&self, area: &PlotArea, step: u64) -> f64 {
        let fraction = (step - self.start) as f64 / (self.end - self.start) as f64;
        area.left + fraction * (area.right - area.left)
    }
}

/// The y coordinate of `byte` in `area`, whose top is `top_byte`.
fn y(area: &PlotArea, top_byte: u64, byte: f64) -> f64 {
    area.bottom - byte / top_byte as f64 * (area.bottom - area.top)
}

fn write_header(
    out: &mut String,
    problem: &Problem,
    plan: &Plan,
    panels: &[Panel],
    title: &str,
    height: f64,
) -> fmt::Result {
    let height = Px(height);
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" viewBox="0 0 {w} {height}" font-family="sans-serif" font-size="12" fill="{TEXT_COLOUR}">"#,
        w = Px(WIDTH),
    )?;
    writeln!(out, "<title>{}</title>", Escaped(title))?;
    writeln!(out, r#"<rect x="0" y="0" width="{}" height="{height}" fill="{BACKGROUND}"/>"#, Px(WIDTH))?;
    writeln!(
        out,
        r#"<text x="{}" y="24" font-size="16" font-weight="bold">{}</text>"#,
        Px(MARGIN_LEFT),
        Escaped(title)
    )?;

    let arena: u64 = panels.iter().fold(0, |acc, p| acc.saturating_add(p.arena));
    let bound: u64 = panels.iter().fold(0, |acc, p| acc.saturating_add(p.lower_bound));
    writeln!(
        out,
        r#"<text x="{}" y="44">{} in {}, strategy {}: arena {}, lower bound {}, efficiency (LB/arena) {}</text>"#,
        Px(MARGIN_LEFT),
        Count(problem.buffers.len(), "buffer"),
        Count(panels.len(), "pool"),
        Escaped(plan.strategy),
        Bytes(arena),
        Bytes(bound),
        Efficiency { bound, arena },
    )?;
    write_legend(out)
}

/// One swatch per kind, then a sample of the lower-bound line.
fn write_legend(out: &mut String) -> fmt::Result {
    const Y: f64 = 56.0;
    const ITEM_WIDTH: f64 = 90.0;
    out.push_str("<g>\n");
    let kinds = [BufferKind::Buffer, BufferKind::Texture, BufferKind::Input, BufferKind::Output];
    let mut x = MARGIN_LEFT;
    for kind in kinds {
        writeln!(
            out,
            r##"<rect x="{}" y="{}" width="12" height="12" fill="{}" stroke="#333333" stroke-width="0.5"/><text x="{}" y="{}">{}</text>"##,
            Px(x),
            Px(Y),
            colour(kind),
            Px(x + 17.0),
            Px(Y + 10.5),
            kind.name()
        )?;
        x += ITEM_WIDTH;
    }
    writeln!(
        out,
        r#"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="{LOWER_BOUND_COLOUR}" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{}" y="{}">LB: lower bound (peak live bytes)</text>"#,
        Px(x),
        Px(x + 24.0),
        Px(x + 29.0),
        Px(Y + 10.5),
        y = Px(Y + 6.0),
    )?;
    out.push_str("</g>\n");
    Ok(())
}

fn write_panel(
    out: &mut String,
    problem: &Problem,
    plan: &Plan,
    panel: &Panel,
    steps: &StepRange,
    area: PlotArea,
) -> fmt::Result {
    writeln!(out, r#"<g id="pool-{}">"#, panel.pool)?;
    write!(
        out,
        r#"<text x="{}" y="{}" font-weight="bold">{}: arena {}, lower bound {}, efficiency (LB/arena) {}"#,
        Px(area.left),
        Px(area.top - 10.0),
        Escaped(&problem.pool_name(panel.pool)),
        Bytes(panel.arena),
        Bytes(panel.lower_bound),
        Efficiency { bound: panel.lower_bound, arena: panel.arena },
    )?;
    if panel.zero_size > 0 {
        write!(out, " ({} not drawn)", Count(panel.zero_size, "zero-size buffer"))?;
    }
    out.push_str("</text>\n");

    write_buffers(out, problem, plan, panel, steps, &area)?;
    // The frame and the axes go over the rectangles so their edges stay crisp.
    writeln!(
        out,
        r#"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="{AXIS_COLOUR}" stroke-width="1"/>"#,
        Px(area.left),
        Px(area.top),
        Px(area.right - area.left),
        Px(area.bottom - area.top)
    )?;
    write_step_ticks(out, steps, &area)?;
    write_byte_ticks(out, panel.top_byte, &area)?;
    write_lower_bound(out, panel, &area)?;
    out.push_str("</g>\n");
    Ok(())
}

/// The rectangles with their tooltips, then the labels of those big enough (in a separate group
/// drawn on top, and transparent to the mouse so hovering a label shows the rectangle's tooltip).
fn write_buffers(
    out: &mut String,
    problem: &Problem,
    plan: &Plan,
    panel: &Panel,
    steps: &StepRange,
    area: &PlotArea,
) -> fmt::Result {
    let mut labels = String::new();
    writeln!(out, r##"<g stroke="#333333" stroke-width="0.5">"##)?;
    for &i in &panel.members {
        let b = &problem.buffers[i];
        let offset = plan.offsets[i];
        let x0 = steps.x(area, u64::from(b.first));
        let x1 = steps.x(area, u64::from(b.last) + 1);
        let y0 = y(area, panel.top_byte, (offset + b.size) as f64);
        let y1 = y(area, panel.top_byte, offset as f64);
        let (width, height) = (x1 - x0, y1 - y0);
        let kind = problem.kind(i);
        let name = name(problem, i);
        write!(
            out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}""#,
            Px(x0),
            Px(y0),
            Px(width),
            Px(height),
            colour(kind)
        )?;
        if width < OUTLINE_MIN_PX || height < OUTLINE_MIN_PX {
            out.push_str(r#" stroke="none""#);
        }
        writeln!(
            out,
            "><title>{}: {}, {}, offset {offset}, steps {}-{}</title></rect>",
            Escaped(&shorten(&name, TOOLTIP_NAME_CHARS)),
            kind.name(),
            Bytes(b.size),
            b.first,
            b.last
        )?;
        if let Some(label) = label_text(&name, width, height) {
            writeln!(
                labels,
                r#"<text x="{}" y="{}">{}</text>"#,
                Px(x0 + LABEL_PAD),
                Px(y0 + height / 2.0 + LABEL_FONT_SIZE * 0.35),
                Escaped(&label)
            )?;
        }
    }
    out.push_str("</g>\n");
    if !labels.is_empty() {
        writeln!(out, r#"<g font-size="{}" pointer-events="none">"#, Px(LABEL_FONT_SIZE))?;
        out.push_str(&labels);
        out.push_str("</g>\n");
    }
    Ok(())
}

/// Buffer `i`'s name, or `#i` for unnamed buffers.
fn name(problem: &Problem, i: usize) -> Cow<'_, str> {
    match problem.names.get(i) {
        Some(name) => Cow::Borrowed(name),
        None => Cow::Owned(format!("#{i}")),
    }
}

/// The label for a `width × height` rectangle: the whole name if it fits, else its start with an
/// ellipsis, else nothing.
fn label_text(name: &str, width: f64, height: f64) -> Option<Cow<'_, str>> {
    if height < LABEL_MIN_HEIGHT {
        return None;
    }
    let room = ((width - 2.0 * LABEL_PAD) / LABEL_CHAR_WIDTH).floor();
    if room < LABEL_MIN_CHARS as f64 {
        return None;
    }
    // `room` is at least 4 and finite here; `as` saturates for absurdly wide rectangles.
    Some(shorten(name, room as usize))
}

/// `text` if it has at most `max_chars` characters, else its first `max_chars - 1` and "…".
fn shorten(text: &str, max_chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        None => Cow::Borrowed(text),
        Some(_) => {
            let keep = max_chars.saturating_sub(1);
            let mut cut: String = text.chars().take(keep).collect();
            cut.push('…');
            Cow::Owned(cut)
        }
    }
}

/// Ticks below the plot at round steps.
fn write_step_ticks(out: &mut String, steps: &StepRange, area: &PlotArea) -> fmt::Result {
    let every = step_tick_interval(steps.end - steps.start);
    let mut step = steps.start.div_ceil(every) * every;
    out.push_str("<g text-anchor=\"middle\">\n");
    while step <= steps.end {
        let x = Px(steps.x(area, step));
        writeln!(
            out,
            r#"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="{AXIS_COLOUR}"/><text x="{x}" y="{}">{step}</text>"#,
            Px(area.bottom),
            Px(area.bottom + 4.0),
            Px(area.bottom + 16.0),
        )?;
        step += every;
    }
    out.push_str("</g>\n");
    writeln!(out, r#"<text x="{}" y="{}" text-anchor="end">step</text>"#, Px(area.right), Px(area.bottom + 30.0))
}

/// The smallest of 1, 2, 5, 10, 20, 50, … steps that gives at most 12 intervals over `span`.
fn step_tick_interval(span: u64) -> u64 {
    const MAX_INTERVALS: u64 = 12;
    let mut decade = 1u64;
    loop {
        for m in [1, 2, 5] {
            let every = m * decade;
            if every.saturating_mul(MAX_INTERVALS) >= span {
                return every;
            }
        }
        decade = decade.saturating_mul(10);
    }
}

/// Ticks left of the plot at round byte counts, labelled with K/M/G… (binary) suffixes.
fn write_byte_ticks(out: &mut String, top_byte: u64, area: &PlotArea) -> fmt::Result {
    let scale = ByteScale::new(top_byte);
    out.push_str("<g text-anchor=\"end\">\n");
    for k in 0.. {
        let bytes = scale.bytes(k);
        // A hair of slack so that a tick exactly at the top survives rounding.
        if bytes > top_byte as f64 * (1.0 + 1e-9) {
            break;
        }
        let y = y(area, top_byte, bytes);
        writeln!(
            out,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{AXIS_COLOUR}"/><text x="{}" y="{}">{}</text>"#,
            Px(area.left - 4.0),
            Px(y),
            Px(area.left),
            Px(y),
            Px(area.left - 6.0),
            Px(y + 4.0),
            scale.label(k)
        )?;
    }
    out.push_str("</g>\n");
    Ok(())
}

/// Round tick values for a byte axis: the unit is the largest power of 1024 not above the top
/// (so labels read "0, 200K, 400K" or "0, 0.5M, 1M"), and the interval is 1, 2 or 5 times a power
/// of ten of that unit, never less than one byte.
struct ByteScale {
    unit: u64,
    suffix: &'static str,
    /// The interval is `mantissa × 10^exponent` units.
    mantissa: u64,
    exponent: i32,
}

impl ByteScale {
    const SUFFIXES: [&'static str; 7] = ["", "K", "M", "G", "T", "P", "E"];
    const MAX_INTERVALS: f64 = 5.0;

    fn new(top_byte: u64) -> ByteScale {
        let mut power = 0;
        while power + 1 < Self::SUFFIXES.len() && top_byte / 1024u64.pow(power as u32 + 1) >= 1 {
            power += 1;
        }
        let unit = 1024u64.pow(power as u32);
        let raw = top_byte as f64 / unit as f64 / Self::MAX_INTERVALS;
        let mut exponent = raw.log10().floor() as i32;
        let mut mantissa = [1u64, 2, 5, 10].into_iter().find(|&m| m as f64 * 10f64.powi(exponent) >= raw).unwrap_or(10);
        if mantissa == 10 {
            mantissa = 1;
            exponent += 1;
        }
        if unit == 1 && exponent < 0 {
            // Whole bytes only.
            mantissa = 1;
            exponent = 0;
        }
        ByteScale { unit, suffix: Self::SUFFIXES[power], mantissa, exponent }
    }

    /// The byte value of the `k`-th tick.
    fn bytes(&self, k: u64) -> f64 {
        (k * self.mantissa) as f64 * 10f64.powi(self.exponent) * self.unit as f64
    }

    /// The label of the `k`-th tick, e.g. `1.5M`, computed in integers so that no `0.30000000000000004`
    /// can appear.
    fn label(&self, k: u64) -> String {
        let units = k * self.mantissa;
        if k == 0 {
            return "0".to_string();
        }
        if self.exponent >= 0 {
            return format!("{}{}", units * 10u64.pow(self.exponent as u32), self.suffix);
        }
        let places = self.exponent.unsigned_abs();
        let divisor = 10u64.pow(places);
        let fraction = format!("{:0width$}", units % divisor, width = places as usize);
        let fraction = fraction.trim_end_matches('0');
        match fraction {
            "" => format!("{}{}", units / divisor, self.suffix),
            _ => format!("{}.{fraction}{}", units / divisor, self.suffix),
        }
    }
}

/// The dashed line at the pool's lower bound, labelled "LB" to the right of the plot.
fn write_lower_bound(out: &mut String, panel: &Panel, area: &PlotArea) -> fmt::Result {
    let y = y(area, panel.top_byte, panel.lower_bound as f64);
    writeln!(
        out,
        r#"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="{LOWER_BOUND_COLOUR}" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{}" y="{}" fill="{LOWER_BOUND_COLOUR}">LB</text>"#,
        Px(area.left),
        Px(area.right),
        Px(area.right + 4.0),
        Px(y + 4.0),
        y = Px(y),
    )
}

/// A coordinate with at most two decimals and no trailing zeros (`12.5`, `100`), so the output is
/// compact and identical on every platform.
struct Px(f64);

impl fmt::Display for Px {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = format!("{:.2}", self.0);
        let text = text.trim_end_matches('0').trim_end_matches('.');
        f.write_str(if text == "-0" { "0" } else { text })
    }
}

/// A byte count for titles: `512 B`, or `1.5 KiB (1536 B)`.
struct Bytes(u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        let bytes = self.0;
        if bytes < 1024 {
            return write!(f, "{bytes} B");
        }
        let (mut unit, mut index) = (1024u64, 0);
        while index + 1 < UNITS.len() && bytes / unit >= 1024 {
            unit *= 1024;
            index += 1;
        }
        write!(f, "{:.1} {} ({bytes} B)", bytes as f64 / unit as f64, UNITS[index])
    }
}

/// `1 pool`, `2 pools`.
struct Count(usize, &'static str);

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.0 == 1 { "" } else { "s" };
        write!(f, "{} {}{plural}", self.0, self.1)
    }
}

/// The lower bound as a percentage of the arena (100% is optimal).
struct Efficiency {
    bound: u64,
    arena: u64,
}

impl fmt::Display for Efficiency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.bound, self.arena) {
            (0, 0) => f.write_str("100%"),
            (_, 0) => f.write_str("n/a"),
            (bound, arena) => write!(f, "{:.1}%", bound as f64 / arena as f64 * 100.0),
        }
    }
}

/// Text escaped for XML content and attribute values. Characters that XML 1.0 forbids outright
/// (most control characters) become U+FFFD, so any name gives a well-formed document.
struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '&' => f.write_str("&amp;")?,
                '<' => f.write_str("&lt;")?,
                '>' => f.write_str("&gt;")?,
                '"' => f.write_str("&quot;")?,
                '\'' => f.write_str("&apos;")?,
                '\t' | '\n' | '\r' => f.write_char(c)?,
                c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => f.write_char('\u{FFFD}')?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::problem::Buffer;

    fn plan(offsets: Vec<u64>, pool_sizes: Vec<(u32, u64)>) -> Plan {
        Plan { offsets, pool_sizes, strategy: "hand" }
    }

    #[test]
    fn names_are_escaped() {
        let problem = Problem {
            buffers: vec![Buffer::new(64, 1, 0, 9)],
            names: vec!["a<b>&\"c'\u{1}".into()],
            kinds: Vec::new(),
            pool_names: Vec::new(),
        };
        let svg = render(&problem, &plan(vec![0], vec![(0, 64)]), "t & <u>").unwrap();
        assert!(svg.contains("<title>t &amp; &lt;u&gt;</title>"), "{svg}");
        assert!(svg.contains("a&lt;b&gt;&amp;&quot;c&apos;\u{FFFD}: buffer"), "{svg}");
        assert!(!svg.contains("a<b"), "{svg}");
        assert!(!svg.contains('\u{1}'));
    }

    #[test]
    fn mismatched_lengths_are_errors() {
        let problem = Problem::new(vec![Buffer::new(8, 1, 0, 0), Buffer::new(8, 1, 1, 1)]);
        let err = render(&problem, &plan(vec![0], vec![(0, 8)]), "x").unwrap_err();
        assert!(err.contains("1 offsets for 2 buffers"), "{err}");

        let named = Problem { names: vec!["only one".into()], ..problem.clone() };
        assert!(render(&named, &plan(vec![0, 0], vec![(0, 8)]), "x").is_err());
        let kinded = Problem { kinds: vec![BufferKind::Input], ..problem.clone() };
        assert!(render(&kinded, &plan(vec![0, 0], vec![(0, 8)]), "x").is_err());
    }

    #[test]
    fn other_bad_inputs_are_errors() {
        let backwards = Problem::new(vec![Buffer { size: 8, align: 1, first: 3, last: 2, pool: 0 }]);
        assert!(render(&backwards, &plan(vec![0], vec![(0, 8)]), "x").unwrap_err().contains("empty lifetime"));
        let overflowing = Problem::new(vec![Buffer::new(8, 1, 0, 0)]);
        assert!(render(&overflowing, &plan(vec![u64::MAX], vec![(0, 8)]), "x").is_err());
        let other_pool = Problem::new(vec![Buffer::new(8, 1, 0, 0).in_pool(3)]);
        let err = render(&other_pool, &plan(vec![0], vec![(0, 8)]), "x").unwrap_err();
        assert!(err.contains("no arena size for pool 3"), "{err}");
    }

    #[test]
    fn zero_size_buffers_are_counted_not_drawn() {
        let problem = Problem::new(vec![Buffer::new(0, 1, 0, 5), Buffer::new(16, 1, 1, 2), Buffer::new(0, 1, 90, 99)]);
        let svg = render(&problem, &plan(vec![0, 0, 0], vec![(0, 16)]), "z").unwrap();
        assert_eq!(svg.matches("<title>").count(), 2, "document title and one buffer: {svg}");
        assert!(svg.contains("(2 zero-size buffers not drawn)"));
        let one = Problem::new(vec![Buffer::new(0, 1, 0, 0)]);
        let svg = render(&one, &plan(vec![0], vec![(0, 0)]), "one").unwrap();
        assert!(svg.contains("1 buffer in 1 pool,") && svg.contains("(1 zero-size buffer not drawn)"), "{svg}");
        // The steps axis spans the drawn buffer only (1..=2), not the far zero-size one.
        assert!(svg.contains(">step</text>") && !svg.contains(">90</text>"), "{svg}");
    }

    #[test]
    fn empty_problems_and_pools_render() {
        let empty = render(&Problem::default(), &plan(Vec::new(), Vec::new()), "empty").unwrap();
        assert!(empty.starts_with("<?xml") && empty.ends_with("</svg>\n"));
        assert!(empty.contains("0 buffers in 0 pools"));
        assert!(!empty.contains("<g id=\"pool-"));

        // A pool listed in the plan but without buffers still gets its (empty) panel.
        let problem = Problem::new(vec![Buffer::new(8, 1, 0, 0)]);
        let svg = render(&problem, &plan(vec![0], vec![(0, 8), (7, 0)]), "two").unwrap();
        assert!(
            svg.contains(r#"<g id="pool-7">"#)
                && svg.contains("pool 7: arena 0 B, lower bound 0 B, efficiency (LB/arena) 100%")
        );
    }

    #[test]
    fn output_is_deterministic() {
        let problem = Problem::new((0..50).map(|i| Buffer::new(100 + i, 1, i as u32, i as u32 + 3)).collect());
        let offsets = (0..50).map(|i| (i % 4) * 200).collect();
        let p = plan(offsets, vec![(0, 800)]);
        assert_eq!(render(&problem, &p, "d").unwrap(), render(&problem, &p, "d").unwrap());
    }

    #[test]
    fn huge_problems_stay_small_and_unlabelled() {
        let n = 100_000u32;
        let buffers = (0..n).map(|i| Buffer::new(1024, 1, i, i + 1)).collect();
        let names = (0..n).map(|i| format!("tensor_{i}_{}", "x".repeat(500))).collect();
        let problem = Problem { buffers, names, kinds: Vec::new(), pool_names: Vec::new() };
        let offsets = (0..u64::from(n)).map(|i| (i % 2) * 1024).collect();
        let svg = render(&problem, &plan(offsets, vec![(0, 2048)]), "huge").unwrap();
        // Each step is ~0.01 px wide: no labels, no outlines, and tooltips with cut names.
        assert_eq!(svg.matches("<rect").count(), n as usize + 1 + 4 + 1, "buffers, background, legend, frame");
        assert!(!svg.contains("pointer-events"));
        assert!(svg.len() < 400 * n as usize, "{} bytes", svg.len());
        assert!(svg.contains(&format!("tensor_99999_{}…: buffer", "x".repeat(TOOLTIP_NAME_CHARS - 14))));
    }

    #[test]
    fn labels_fit_or_are_cut_or_dropped() {
        assert_eq!(label_text("conv1", 100.0, 20.0).as_deref(), Some("conv1"));
        assert_eq!(label_text("a_rather_long_name", 50.0, 20.0).as_deref(), Some("a_rat…"));
        assert_eq!(label_text("conv1", 20.0, 20.0), None);
        assert_eq!(label_text("conv1", 100.0, 5.0), None);
        assert_eq!(shorten("ééé", 3), "ééé");
        assert_eq!(shorten("éééé", 3), "éé…");
    }

    #[test]
    fn byte_ticks_are_round() {
        let labels = |top: u64| {
            let scale = ByteScale::new(top);
            (0..).take_while(|&k| scale.bytes(k) <= top as f64).map(|k| scale.label(k)).collect::<Vec<_>>().join(" ")
        };
        assert_eq!(labels(3), "0 1 2 3");
        assert_eq!(labels(1000), "0 200 400 600 800 1000");
        assert_eq!(labels(1536), "0 0.5K 1K 1.5K");
        assert_eq!(labels(3 << 20), "0 1M 2M 3M");
        assert_eq!(labels(700 << 10), "0 200K 400K 600K");
        assert_eq!(labels(u64::MAX), "0 5E 10E 15E");
    }

    #[test]
    fn numbers_are_formatted_compactly() {
        assert_eq!(Px(12.5).to_string(), "12.5");
        assert_eq!(Px(100.0).to_string(), "100");
        assert_eq!(Px(-0.001).to_string(), "0");
        assert_eq!(Px(1.0 / 3.0).to_string(), "0.33");
        assert_eq!(Bytes(512).to_string(), "512 B");
        assert_eq!(Bytes(1536).to_string(), "1.5 KiB (1536 B)");
        assert_eq!(Bytes(3 << 20).to_string(), "3.0 MiB (3145728 B)");
        assert_eq!(Bytes(u64::MAX).to_string(), "16.0 EiB (18446744073709551615 B)");
        assert_eq!(step_tick_interval(1), 1);
        assert_eq!(step_tick_interval(30), 5);
        assert_eq!(step_tick_interval(u64::from(u32::MAX) + 1), 500_000_000);
    }
}
