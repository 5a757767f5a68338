//! What the model benchmarks share: the nine model-zoo CNNs of the `onnx==1.23.2` wheel
//! (`scripts/fetch-onnx-data.sh`) and the input ONNX's test runner feeds them.

use rxvm::cli::ramp;
use rxvm::graph::Graph;
use rxvm::vm::HostTensor;
use std::path::{Path, PathBuf};

pub const MODELS: [&str; 9] = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
];

/// The models' directory, or `None` (with a note) when the data is missing.
pub fn light_dir(bench: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/onnx/wheel/onnx/backend/test/data/light");
    if dir.is_dir() {
        return Some(dir);
    }
    eprintln!("{bench}: {} is missing (scripts/fetch-onnx-data.sh); nothing to measure", dir.display());
    None
}

/// A model, its input shapes, and its input: element i of n is i / n.
pub fn load(dir: &Path, name: &str) -> (Graph, Vec<Vec<i64>>, HostTensor) {
    let graph =
        rxvm::onnx::read_model(&dir.join(format!("light_{name}.onnx"))).unwrap_or_else(|e| panic!("{name}: {e}"));
    let shapes: Vec<Vec<i64>> = graph.inputs.iter().map(|i| i.dims.iter().map(|d| d.unwrap_or(1)).collect()).collect();
    let input = ramp(graph.inputs[0].dtype, &shapes[0]).unwrap_or_else(|e| panic!("{name}: {e}"));
    (graph, shapes, input)
}
