//! The nine model-zoo CNNs the `onnx==1.23.2` wheel ships (`light_NAME.onnx`, fetched by
//! `scripts/fetch-onnx-data.sh` under `.cache/onnx`), for the tests and benchmarks that run
//! them all.

use std::path::PathBuf;

/// The models, by the `NAME` of `light_NAME.onnx`.
pub const NAMES: [&str; 9] = [
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

/// Where the models are in the checkout (`None` when the data has not been fetched).
pub fn light_dir() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join(".cache/onnx/wheel/onnx/backend/test/data/light");
    dir.is_dir().then_some(dir)
}
