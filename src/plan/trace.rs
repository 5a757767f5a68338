//! Readers for public memory-planning benchmarks.
//!
//! * Glow's `MemoryAllocatorTestModels.txt`: alloc/free traces of real models ([`parse_glow_models`]).
//! * MiniMalloc's CSV instances: `id,lower,upper,size` rows ([`parse_minimalloc_csv`],
//!   [`write_minimalloc_csv`]).
//!
//! Errors give the 1-based line number and what was expected; external text never panics.

use std::collections::HashMap;

use super::problem::{Buffer, Problem};

/// One model of a Glow trace file.
#[derive(Clone, Debug, PartialEq)]
pub struct GlowModel {
    pub name: String,
    /// The `ALIGN` value (1 if the model has none); every buffer of `problem` has this alignment.
    pub align: u64,
    /// One buffer per `ALLOC`, in file order, named by its id; all in pool 0.
    pub problem: Problem,
    /// The `MEM` line: the arena Glow's allocator reaches.
    pub expected_mem: Option<u64>,
    /// The `EFF` line: Glow's allocation efficiency.
    pub expected_eff: Option<f64>,
}

/// Parses a Glow allocator trace holding any number of models.
///
/// Format, one directive per line (`#` starts a comment line; blank lines are skipped):
/// `MODEL <name>` starts a model; then `ALIGN <bytes>`, `ALLOC <id> <size>`, `FREE <id>`,
/// `MEM <bytes>`, `EFF <ratio>`. Ids are unique within a model and every allocated buffer must be
/// freed.
///
/// Lifetimes: the `ALLOC` and `FREE` lines of a model are numbered 0, 1, 2, ... in order, and a
/// buffer lives from the step of its `ALLOC` to the step of its `FREE`, inclusive. So a buffer freed
/// at step `t` and one allocated later (step `t + 1` or after) may share memory, while two buffers
/// that are both allocated and not yet freed at some line always overlap in time — which is exactly
/// the reuse Glow's allocator allows.
pub fn parse_glow_models(text: &str) -> Result<Vec<GlowModel>, String> {
    let mut models = Vec::new();
    let mut current: Option<GlowBuilder> = None;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.trim();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let (key, rest) = match content.split_once(char::is_whitespace) {
            Some((key, rest)) => (key, rest.trim()),
            None => (content, ""),
        };
        if key == "MODEL" {
            if rest.is_empty() {
                return Err(format!("line {line}: MODEL needs a name"));
            }
            if let Some(done) = current.take() {
                models.push(done.finish()?);
            }
            current = Some(GlowBuilder::new(rest.to_string(), line));
            continue;
        }
        if !matches!(key, "ALIGN" | "ALLOC" | "FREE" | "MEM" | "EFF") {
            return Err(format!(
                "line {line}: unknown directive '{key}' (expected MODEL, ALIGN, ALLOC, FREE, MEM or EFF)"
            ));
        }
        let Some(model) = current.as_mut() else {
            return Err(format!("line {line}: {key} before any MODEL line"));
        };
        model.directive(line, key, rest)?;
    }
    if let Some(done) = current.take() {
        models.push(done.finish()?);
    }
    Ok(models)
}

/// A Glow model being read.
struct GlowBuilder {
    name: String,
    line: usize,
    align: Option<u64>,
    mem: Option<u64>,
    eff: Option<f64>,
    buffers: Vec<Buffer>,
    ids: Vec<String>,
    /// Buffer id -> (index in `buffers`, ALLOC line, FREE line once freed).
    by_id: HashMap<u64, (usize, usize, Option<usize>)>,
    step: u32,
}

impl GlowBuilder {
    fn new(name: String, line: usize) -> Self {
        GlowBuilder {
            name,
            line,
            align: None,
            mem: None,
            eff: None,
            buffers: Vec::new(),
            ids: Vec::new(),
            by_id: HashMap::new(),
            step: 0,
        }
    }

    fn directive(&mut self, line: usize, key: &str, rest: &str) -> Result<(), String> {
        let args: Vec<&str> = rest.split_whitespace().collect();
        let want = |count: usize, usage: &str| {
            if args.len() == count {
                Ok(())
            } else {
                Err(format!("line {line}: {key} expects {usage}, got {} argument(s)", args.len()))
            }
        };
        match key {
            "ALIGN" => {
                want(1, "<alignment>")?;
                let align = parse_u64(line, "alignment", args[0])?;
                if align == 0 {
                    return Err(format!("line {line}: alignment must be at least 1"));
                }
                set_once(line, "ALIGN", &mut self.align, align)
            }
            "MEM" => {
                want(1, "<bytes>")?;
                let mem = parse_u64(line, "MEM bytes", args[0])?;
                set_once(line, "MEM", &mut self.mem, mem)
            }
            "EFF" => {
                want(1, "<ratio>")?;
                let eff: f64 = args[0]
                    .parse()
                    .ok()
                    .filter(|x: &f64| x.is_finite())
                    .ok_or_else(|| format!("line {line}: expected a number for EFF, found '{}'", args[0]))?;
                set_once(line, "EFF", &mut self.eff, eff)
            }
            "ALLOC" => {
                want(2, "<id> <size>")?;
                let id = parse_u64(line, "buffer id", args[0])?;
                let size = parse_u64(line, "buffer size", args[1])?;
                if let Some(&(_, at, _)) = self.by_id.get(&id) {
                    return Err(format!("line {line}: ALLOC {id} but buffer {id} was already allocated at line {at}"));
                }
                let step = self.next_step(line)?;
                self.by_id.insert(id, (self.buffers.len(), line, None));
                self.buffers.push(Buffer { size, align: 1, first: step, last: step, pool: 0 });
                self.ids.push(id.to_string());
                Ok(())
            }
            "FREE" => {
                want(1, "<id>")?;
                let id = parse_u64(line, "buffer id", args[0])?;
                let step = self.next_step(line)?;
                match self.by_id.get_mut(&id) {
                    None => Err(format!("line {line}: FREE {id} but buffer {id} was never allocated")),
                    Some((_, _, Some(freed))) => {
                        Err(format!("line {line}: FREE {id} but buffer {id} was already freed at line {freed}"))
                    }
                    Some((index, _, freed)) => {
                        *freed = Some(line);
                        self.buffers[*index].last = step;
                        Ok(())
                    }
                }
            }
            other => Err(format!("line {line}: unknown directive '{other}'")),
        }
    }

    /// The step number of the next ALLOC/FREE line.
    fn next_step(&mut self, line: usize) -> Result<u32, String> {
        let step = self.step;
        self.step =
            step.checked_add(1).ok_or_else(|| format!("line {line}: too many ALLOC/FREE lines in one model"))?;
        Ok(step)
    }

    fn finish(self) -> Result<GlowModel, String> {
        let mut unfreed: Vec<(usize, u64)> = self
            .by_id
            .iter()
            .filter(|(_, &(_, _, freed))| freed.is_none())
            .map(|(&id, &(_, at, _))| (at, id))
            .collect();
        unfreed.sort_unstable();
        if let Some(&(at, id)) = unfreed.first() {
            return Err(format!(
                "model '{}' (line {}): buffer {id} allocated at line {at} was never freed{}",
                self.name,
                self.line,
                if unfreed.len() > 1 { format!(" (and {} more)", unfreed.len() - 1) } else { String::new() }
            ));
        }
        let align = self.align.unwrap_or(1);
        let buffers = self.buffers.into_iter().map(|b| Buffer { align, ..b }).collect();
        Ok(GlowModel {
            name: self.name,
            align,
            problem: Problem { buffers, names: self.ids, kinds: Vec::new(), pool_names: Vec::new() },
            expected_mem: self.mem,
            expected_eff: self.eff,
        })
    }
}

fn set_once<T>(line: usize, key: &str, slot: &mut Option<T>, value: T) -> Result<(), String> {
    if slot.is_some() {
        return Err(format!("line {line}: second {key} line in the same model"));
    }
    *slot = Some(value);
    Ok(())
}

fn parse_u64(line: usize, what: &str, text: &str) -> Result<u64, String> {
    text.parse().map_err(|_| format!("line {line}: expected a non-negative integer for {what}, found '{text}'"))
}

/// Parses a MiniMalloc CSV instance: a header naming the columns `id`, `lower`, `upper`, `size` (in
/// any order; an optional `alignment` column is honoured), then one buffer per row. Lifetimes are
/// half-open `[lower, upper)` and become inclusive steps `lower..=upper - 1`; everything is in pool 0
/// with alignment 1 unless an `alignment` column says otherwise. Ids must be unique and become the
/// buffer names. Blank lines are skipped.
pub fn parse_minimalloc_csv(text: &str) -> Result<Problem, String> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty());
    let Some((header_line, header)) = lines.next() else {
        return Err("line 1: expected a header 'id,lower,upper,size', found an empty input".to_string());
    };
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    let position = |name: &str, required: bool| -> Result<Option<usize>, String> {
        let found: Vec<usize> = columns.iter().enumerate().filter(|(_, c)| **c == name).map(|(k, _)| k).collect();
        match found.as_slice() {
            [] if required => Err(format!(
                "line {header_line}: header '{header}' has no '{name}' column (expected id,lower,upper,size)"
            )),
            [] => Ok(None),
            [k] => Ok(Some(*k)),
            _ => Err(format!("line {header_line}: header '{header}' has more than one '{name}' column")),
        }
    };
    let id_col = position("id", true)?.unwrap_or_default();
    let lower_col = position("lower", true)?.unwrap_or_default();
    let upper_col = position("upper", true)?.unwrap_or_default();
    let size_col = position("size", true)?.unwrap_or_default();
    let align_col = position("alignment", false)?;
    if let Some(unknown) = columns.iter().find(|c| !matches!(**c, "id" | "lower" | "upper" | "size" | "alignment")) {
        return Err(format!(
            "line {header_line}: unsupported column '{unknown}' (expected id,lower,upper,size[,alignment])"
        ));
    }

    let mut problem = Problem::default();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (line, row) in lines {
        let fields: Vec<&str> = row.split(',').map(str::trim).collect();
        if fields.len() != columns.len() {
            return Err(format!("line {line}: expected {} fields, found {}", columns.len(), fields.len()));
        }
        let id = fields[id_col];
        if id.is_empty() {
            return Err(format!("line {line}: empty id"));
        }
        let lower = parse_u64(line, "lower", fields[lower_col])?;
        let upper = parse_u64(line, "upper", fields[upper_col])?;
        let size = parse_u64(line, "size", fields[size_col])?;
        let align = match align_col {
            Some(k) => parse_u64(line, "alignment", fields[k])?,
            None => 1,
        };
        if align == 0 {
            return Err(format!("line {line}: alignment must be at least 1"));
        }
        if lower >= upper {
            return Err(format!("line {line}: buffer '{id}' has an empty lifetime [{lower}, {upper})"));
        }
        let first = u32::try_from(lower)
            .map_err(|_| format!("line {line}: lower {lower} is out of range (max {})", u32::MAX))?;
        let last = u32::try_from(upper - 1)
            .map_err(|_| format!("line {line}: upper {upper} is out of range (max {})", u64::from(u32::MAX) + 1))?;
        if let Some(previous) = seen.insert(id.to_string(), line) {
            return Err(format!("line {line}: duplicate id '{id}' (first used at line {previous})"));
        }
        problem.buffers.push(Buffer { size, align, first, last, pool: 0 });
        problem.names.push(id.to_string());
    }
    Ok(problem)
}

/// Writes `p` as a MiniMalloc CSV (`id,lower,upper,size`, plus `alignment` when some buffer needs
/// one), with ids from the names or, without names, the buffer indices.
///
/// Fails when the format cannot hold the problem: buffers in more than one pool, an empty lifetime,
/// alignment 0, a name with a comma or line break, or duplicate ids.
pub fn write_minimalloc_csv(p: &Problem) -> Result<String, String> {
    p.validate()?;
    if p.pools().len() > 1 {
        return Err(format!("MiniMalloc CSV holds one pool; the problem uses pools {:?}", p.pools()));
    }
    let with_align = p.buffers.iter().any(|b| b.align != 1);
    let mut ids = HashMap::new();
    let mut out = String::from(if with_align { "id,lower,upper,size,alignment\n" } else { "id,lower,upper,size\n" });
    for (i, b) in p.buffers.iter().enumerate() {
        let id = match p.names.get(i) {
            Some(name) => name.clone(),
            None => i.to_string(),
        };
        if id.is_empty() || id.contains([',', '\n', '\r']) || id.trim() != id {
            return Err(format!(
                "{}: the name cannot be a CSV id (empty, comma, line break or edge spaces)",
                p.describe(i)
            ));
        }
        if let Some(previous) = ids.insert(id.clone(), i) {
            return Err(format!("{} has the same id as {}", p.describe(i), p.describe(previous)));
        }
        let upper = u64::from(b.last) + 1;
        out.push_str(&format!("{id},{},{upper},{}", b.first, b.size));
        if with_align {
            out.push_str(&format!(",{}", b.align));
        }
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "# comment\n\
        MODEL tiny.onnx\n\
        ALIGN 64\n\
        ALLOC 1 100\n\
        ALLOC 2 50\n\
        FREE 1\n\
        ALLOC 3 30\n\
        FREE 2\n\
        FREE 3\n\
        MEM 192\n\
        EFF 0.900000\n\
        \n\
        MODEL second\n\
        ALLOC 7 8\n\
        FREE 7\n";

    #[test]
    fn glow_lifetimes_follow_the_line_steps() {
        let models = parse_glow_models(SMALL).unwrap();
        assert_eq!(models.len(), 2);
        let m = &models[0];
        assert_eq!(m.name, "tiny.onnx");
        assert_eq!(m.align, 64);
        assert_eq!(m.expected_mem, Some(192));
        assert_eq!(m.expected_eff, Some(0.9));
        assert_eq!(m.problem.names, vec!["1", "2", "3"]);
        assert_eq!(
            m.problem.buffers,
            vec![Buffer::new(100, 64, 0, 2), Buffer::new(50, 64, 1, 4), Buffer::new(30, 64, 3, 5)]
        );
        // 1 is freed at step 2 and 3 allocated at step 3: they may share; 2 lives with both.
        let [b1, b2, b3] = [m.problem.buffers[0], m.problem.buffers[1], m.problem.buffers[2]];
        assert!(!b1.lives_with(&b3) && b1.lives_with(&b2) && b2.lives_with(&b3));
        assert_eq!(models[1].align, 1);
        assert_eq!(models[1].expected_mem, None);
        assert_eq!(models[1].problem.buffers, vec![Buffer::new(8, 1, 0, 1)]);
    }

    #[test]
    fn glow_errors_name_the_line() {
        let cases = [
            ("ALLOC 1 5\n", "line 1: ALLOC before any MODEL line"),
            ("MODEL m\nALLOC 1 5\nFREE 7\n", "line 3: FREE 7 but buffer 7 was never allocated"),
            ("MODEL m\nALLOC 1 5\nFREE 1\nFREE 1\n", "line 4: FREE 1 but buffer 1 was already freed at line 3"),
            ("MODEL m\nALLOC 1 5\nALLOC 1 6\n", "line 3: ALLOC 1 but buffer 1 was already allocated at line 2"),
            ("MODEL m\nALLOC 1 5\nFREE 1\nALLOC 1 6\n", "line 4: ALLOC 1 but buffer 1 was already allocated"),
            ("MODEL m\nALLOC x 5\n", "line 2: expected a non-negative integer for buffer id, found 'x'"),
            ("MODEL m\nALLOC 1 -5\n", "line 2: expected a non-negative integer for buffer size, found '-5'"),
            ("MODEL m\nALLOC 1\n", "line 2: ALLOC expects <id> <size>, got 1 argument(s)"),
            ("MODEL m\nALIGN 0\n", "line 2: alignment must be at least 1"),
            ("MODEL m\nALIGN 8\nALIGN 8\n", "line 3: second ALIGN line"),
            ("MODEL m\nEFF fast\n", "line 2: expected a number for EFF, found 'fast'"),
            ("MODEL m\nMEM\n", "line 2: MEM expects <bytes>, got 0 argument(s)"),
            ("MODEL m\nRESET\n", "line 2: unknown directive 'RESET'"),
            ("MODEL\n", "line 1: MODEL needs a name"),
            (
                "MODEL m\nALLOC 1 5\nALLOC 2 5\nFREE 1\nMODEL n\n",
                "model 'm' (line 1): buffer 2 allocated at line 3 was never freed",
            ),
            ("MODEL m\nALLOC 1 5\nALLOC 2 5\n", "buffer 1 allocated at line 2 was never freed (and 1 more)"),
        ];
        for (text, needle) in cases {
            let err = parse_glow_models(text).unwrap_err();
            assert!(err.contains(needle), "expected {needle:?} in {err:?}");
        }
        assert_eq!(parse_glow_models("# nothing\n").unwrap(), vec![]);
    }

    #[test]
    fn minimalloc_round_trip() {
        let text = "id,lower,upper,size\n0,10,20,5\nb,0,11,7\n\n";
        let p = parse_minimalloc_csv(text).unwrap();
        assert_eq!(p.buffers, vec![Buffer::new(5, 1, 10, 19), Buffer::new(7, 1, 0, 10)]);
        assert_eq!(p.names, vec!["0", "b"]);
        assert_eq!(write_minimalloc_csv(&p).unwrap(), "id,lower,upper,size\n0,10,20,5\nb,0,11,7\n");
        // Columns in another order, with alignment; written back in the canonical order.
        let q = parse_minimalloc_csv("size,id,upper,lower,alignment\r\n5,x,3,1,8\r\n").unwrap();
        assert_eq!(q.buffers, vec![Buffer::new(5, 8, 1, 2)]);
        assert_eq!(write_minimalloc_csv(&q).unwrap(), "id,lower,upper,size,alignment\nx,1,3,5,8\n");
        // Without names, ids are indices.
        let r = Problem::new(vec![Buffer::new(1, 1, 0, 0)]);
        assert_eq!(write_minimalloc_csv(&r).unwrap(), "id,lower,upper,size\n0,0,1,1\n");
    }

    #[test]
    fn minimalloc_errors_name_the_line() {
        let cases = [
            ("", "line 1: expected a header"),
            ("id,lower,size\n", "no 'upper' column"),
            ("id,lower,upper,size,gaps\n", "unsupported column 'gaps'"),
            ("id,id,lower,upper,size\n", "more than one 'id' column"),
            ("id,lower,upper,size\n0,1,2\n", "line 2: expected 4 fields, found 3"),
            ("id,lower,upper,size\n0,1,2,3\n0,2,3,4\n", "line 3: duplicate id '0' (first used at line 2)"),
            ("id,lower,upper,size\n0,5,5,3\n", "line 2: buffer '0' has an empty lifetime [5, 5)"),
            ("id,lower,upper,size\n0,a,5,3\n", "line 2: expected a non-negative integer for lower, found 'a'"),
            ("id,lower,upper,size\n\n0,1,5,3.5\n", "line 3: expected a non-negative integer for size"),
            ("id,lower,upper,size\n0,0,9999999999,3\n", "line 2: upper 9999999999 is out of range"),
            ("id,lower,upper,size\n,0,1,3\n", "line 2: empty id"),
        ];
        for (text, needle) in cases {
            let err = parse_minimalloc_csv(text).unwrap_err();
            assert!(err.contains(needle), "expected {needle:?} in {err:?}");
        }
    }

    #[test]
    fn minimalloc_writer_rejects_what_it_cannot_hold() {
        let two_pools = Problem::new(vec![Buffer::new(1, 1, 0, 0), Buffer::new(1, 1, 0, 0).in_pool(1)]);
        assert!(write_minimalloc_csv(&two_pools).unwrap_err().contains("one pool"));
        let comma = Problem {
            buffers: vec![Buffer::new(1, 1, 0, 0)],
            names: vec!["a,b".into()],
            kinds: Vec::new(),
            pool_names: Vec::new(),
        };
        assert!(write_minimalloc_csv(&comma).unwrap_err().contains("cannot be a CSV id"));
        let dup = Problem {
            buffers: vec![Buffer::new(1, 1, 0, 0); 2],
            names: vec!["a".into(), "a".into()],
            kinds: Vec::new(),
            pool_names: Vec::new(),
        };
        assert!(write_minimalloc_csv(&dup).unwrap_err().contains("same id"));
        assert!(write_minimalloc_csv(&Problem::new(vec![Buffer::new(1, 1, 3, 2)])).is_err());
    }
}
