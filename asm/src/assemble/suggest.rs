//! "Did you mean" suggestions for unknown names.

/// Levenshtein distance, for "did you mean" suggestions.
pub(super) fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Candidates close to `name`, best first.
pub(super) fn close_names<'n>(name: &str, candidates: impl Iterator<Item = &'n str>) -> Vec<&'n str> {
    let limit = (name.chars().count() / 3).max(1);
    let mut v: Vec<(usize, &str)> = candidates
        .map(|c| (distance(name, c), c))
        .filter(|(d, c)| {
            *d <= limit || c.starts_with(name) || name.starts_with(*c) || (name.len() >= 3 && c.contains(name))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, c)| c).take(3).collect()
}

pub(super) fn did_you_mean(sigil: &str, close: &[&str]) -> Option<String> {
    match close {
        [] => None,
        [one] => Some(format!("did you mean `{sigil}{one}`?")),
        many => Some(format!(
            "did you mean one of: {}?",
            many.iter().map(|c| format!("`{sigil}{c}`")).collect::<Vec<_>>().join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(close_names("ad", ["add", "sub", "iadd"].into_iter()), vec!["add"]);
        assert_eq!(close_names("iad", ["add", "sub", "iadd"].into_iter()), vec!["iadd"]);
        assert_eq!(close_names("matmull", ["matmul", "mul"].into_iter()), vec!["matmul"]);
        assert!(close_names("zzzz", ["add", "sub"].into_iter()).is_empty());
    }
}
