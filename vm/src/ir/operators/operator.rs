//! [`Operator`]: every operator the VM knows, by name, in encoding order.

use crate::ir::bytecode::OpId;

/// Declares [`Operator`] from the operator names in encoding order.
macro_rules! operators {
    ($($name:ident)*) => {
        /// Every operator, in encoding order: `Operator::X as u32` is X's [`OpId`]. Append
        /// only: the order is the `.rxb` encoding.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        pub enum Operator { $($name),* }

        impl Operator {
            /// Every operator, by [`OpId`].
            pub const ALL: &'static [Operator] = &[$(Operator::$name),*];

            /// The ONNX operator type, as written after `@onnx.`.
            pub const fn name(self) -> &'static str {
                match self { $(Operator::$name => stringify!($name)),* }
            }

            /// The operator named `name` (with or without the `onnx.` prefix).
            pub fn from_name(name: &str) -> Option<Operator> {
                match name.strip_prefix("onnx.").unwrap_or(name) {
                    $(stringify!($name) => Some(Operator::$name),)*
                    _ => None,
                }
            }
        }
    };
}

operators! {
    Relu
    Clip LeakyRelu Sigmoid Tanh Exp Sqrt Pow Neg Abs Elu Selu Softplus Softsign PRelu Add Sub Mul
    Div Max Min Sum Dropout Identity Softmax LogSoftmax ReduceMean ReduceSum BatchNormalization
    InstanceNormalization LRN
    Conv ConvTranspose MaxPool AveragePool GlobalAveragePool GlobalMaxPool Gemm MatMul
    Concat Transpose Reshape Flatten Squeeze Unsqueeze Split Slice Gather Tile Pad Shape
    ConstantOfShape Cast
    ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare
    CastLike LayerNormalization
    Gelu Erf HardSigmoid HardSwish Mish Celu ThresholdedRelu Log Reciprocal Floor Ceil Round Sign Sin Cos
    Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh
    ArgMax ArgMin
    Equal Less Greater LessOrEqual GreaterOrEqual Not And Or Xor Where Expand Range Mod Size
    NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss Shrink LpPool MaxUnpool Col2Im GridSample AffineGrid
    GatherElements Trilu CumSum CumProd TopK ScatterElements ScatterND Hardmax OneHot GatherND EyeLike DepthToSpace SpaceToDepth ReverseSequence Scatter Compress CenterCropPad
    Attention RMSNormalization RotaryEmbedding GroupNormalization LpNormalization MeanVarianceNormalization Swish SwiGLU
    RNN GRU LSTM DFT STFT HannWindow HammingWindow BlackmanWindow MelWeightMatrix CausalConvWithState LinearAttention TensorScatter
    BitShift BitwiseAnd BitwiseOr BitwiseXor BitwiseNot IsInf IsNaN Mean BitCast QuantizeLinear DequantizeLinear DynamicQuantizeLinear QLinearMatMul QLinearConv MatMulInteger ConvInteger
    Einsum Det
    Resize Upsample
    RoiAlign DeformConv TfIdfVectorizer Binarizer ArrayFeatureExtractor TreeEnsemble FlexAttention
    NonZero Unique NonMaxSuppression
    FusedConv
}

impl Operator {
    pub const fn id(self) -> OpId {
        OpId(self as u32)
    }
}

impl From<Operator> for OpId {
    fn from(op: Operator) -> OpId {
        op.id()
    }
}
