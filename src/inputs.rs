//! `--input NAME=SPEC` parsing.

use std::path::PathBuf;

/// Where an input's value comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum InputSpec {
    Npy(PathBuf),
    Zeros,
    Random(u64),
    /// Element i of n is i / n: the input ONNX's backend tests feed the light model-zoo models.
    Ramp,
    Int(i64),
    Float(f64),
    Shape(Vec<i64>),
}

impl InputSpec {
    pub fn describe(&self) -> String {
        match self {
            InputSpec::Npy(p) => format!("the file {}", p.display()),
            InputSpec::Zeros => "`zeros`".into(),
            InputSpec::Random(s) => format!("`random:{s}`"),
            InputSpec::Ramp => "`ramp`".into(),
            InputSpec::Int(v) => format!("the integer {v}"),
            InputSpec::Float(v) => format!("the float {v:?}"),
            InputSpec::Shape(s) => format!("the shape {s:?}"),
        }
    }
}

/// Splits `NAME=SPEC` (a leading `%` on NAME is allowed).
pub fn parse_input_spec(raw: &str) -> Result<(String, InputSpec), String> {
    let (name, spec) =
        raw.split_once('=').ok_or_else(|| format!("--input {raw}: expected NAME=PATH.npy|zeros|random:SEED|VALUE"))?;
    let name = name.trim().trim_start_matches('%').to_string();
    if name.is_empty() {
        return Err(format!("--input {raw}: the parameter name is empty"));
    }
    let spec = spec.trim();
    let parsed = if spec == "zeros" {
        InputSpec::Zeros
    } else if let Some(seed) = spec.strip_prefix("random:") {
        InputSpec::Random(
            seed.parse().map_err(|_| format!("--input {raw}: `{seed}` is not a seed (an unsigned integer)"))?,
        )
    } else if spec == "ramp" {
        InputSpec::Ramp
    } else if spec == "random" {
        InputSpec::Random(0)
    } else if let Some(inner) = spec.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        let dims: Result<Vec<i64>, _> =
            inner.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::parse::<i64>).collect();
        InputSpec::Shape(dims.map_err(|_| format!("--input {raw}: expected a shape like [1, 3, 224, 224]"))?)
    } else if let Ok(v) = spec.parse::<i64>() {
        InputSpec::Int(v)
    } else if let Ok(v) = spec.parse::<f64>() {
        InputSpec::Float(v)
    } else if spec.ends_with(".npy") {
        InputSpec::Npy(PathBuf::from(spec))
    } else {
        return Err(format!(
            "--input {raw}: expected a .npy path, `zeros`, `random:SEED`, `ramp`, a number or a shape [d0, ...], found `{spec}`"
        ));
    };
    Ok((name, parsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(parse_input_spec("x=zeros").unwrap(), ("x".into(), InputSpec::Zeros));
        assert_eq!(parse_input_spec("%x=random:7").unwrap().1, InputSpec::Random(7));
        assert_eq!(parse_input_spec("x=ramp").unwrap().1, InputSpec::Ramp);
        assert_eq!(parse_input_spec("n=12").unwrap().1, InputSpec::Int(12));
        assert_eq!(parse_input_spec("f=0.5").unwrap().1, InputSpec::Float(0.5));
        assert_eq!(parse_input_spec("s=[1, 2]").unwrap().1, InputSpec::Shape(vec![1, 2]));
        assert_eq!(parse_input_spec("x=a/b.npy").unwrap().1, InputSpec::Npy("a/b.npy".into()));
        assert!(parse_input_spec("x").unwrap_err().contains("expected NAME="));
        assert!(parse_input_spec("x=random:abc").unwrap_err().contains("not a seed"));
        assert!(parse_input_spec("x=what").unwrap_err().contains("found `what`"));
    }
}
