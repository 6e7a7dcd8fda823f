//===- GraphOps.td - Operations of the Graph dialect -------*- tablegen -*-===//

#ifndef PCC_GRAPH_OPS
#define PCC_GRAPH_OPS

include "GraphDialect.td"
include "GraphInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ViewLikeInterface.td"

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic,
         !listconcat(traits, [Pure])>;

// Result element i is a function of the operands' elements at i alone, the
// operands broadcast to the result with numpy rules: the op can run inside
// any loop nest over its result (graph.fusion). Every such op has a scalar
// expression in each target (lib/Target/Common/ScalarExpr.cpp).
def Graph_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::pcc::graph::OpTrait";
}

// A product whose operands may be narrowed to 16-bit floats, the result
// accumulated in f32 by the target (cuBLASLt's compute type, the CPU's
// float sums) and rounded once: the ops `--dtype bf16` runs in bf16
// (pcc-mixed-precision). Everything else keeps f32.
def Graph_LowPrecisionProduct : NativeOpTrait<"LowPrecisionProduct"> {
  let cppNamespace = "::pcc::graph::OpTrait";
}

// Result 0 is operand 0 updated in place: it lives in operand 0's buffer,
// and no op reads operand 0 after this one (the op's verifier checks it).
// A KV cache grows this way at every step without a copy.
def Graph_UpdatesInPlace : NativeOpTrait<"UpdatesInPlace"> {
  let cppNamespace = "::pcc::graph::OpTrait";
}

// The data-movement ops whose results are strided views of their input
// (transpose, slice, split, reshape, expand): a target reads them in place
// where it can (StridedViewOpInterface).
def Graph_StridedViewOpInterfaceMethods
    : DeclareOpInterfaceMethods<Graph_StridedViewOpInterface>;

// One result whose shape and element type equal the operand's.
class Graph_UnaryOp<string mnemonic, string what, list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat(traits, [SameOperandsAndResultType, Graph_Elementwise, Graph_CostOpInterface,
          DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>,
          DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface,
                                    ["getOperandRole"]>])> {
  let summary = what # ", element by element";
  let description = [{
    Applies the function to every element; ONNX operator of the same name.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasFolder = 1;
  let extraClassDefinition = [{
    ::pcc::graph::OperandRole $cppClass::getOperandRole(unsigned) {
      return ::pcc::graph::OperandRole::Elementwise;
    }
  }];
}

// Numpy-style broadcasting of operands; the result element type is the
// first operand's, or i1 for comparisons.
// `firstValue` is the first operand whose element type is the value type
// (Where's condition precedes it); `sameType` requires all value operands to
// share it (Pow's exponent may differ).
class Graph_BroadcastOp<string mnemonic, list<Trait> traits = [],
                        int firstValue = 0, bit sameType = 1,
                        string role = "Elementwise">
    : Graph_Op<mnemonic, !listconcat(traits, [InferTypeOpAdaptor, Graph_Elementwise, Graph_CostOpInterface,
          DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>,
          DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface,
                                    ["getOperandRole"]>])> {
  let hasFolder = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, ::std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::pcc::graph::detail::inferBroadcastType(
          loc, adaptor.getOperands(), resultElementType(context, adaptor),
          types, getOperationName(), }] # firstValue # [{, }] #
          !if(sameType, "true", "false") # [{);
    }
    // Where's values are selected, not combined; its condition has no role.
    ::pcc::graph::OperandRole $cppClass::getOperandRole(unsigned index) {
      if (index < }] # firstValue # [{)
        return ::pcc::graph::OperandRole::Other;
      return ::pcc::graph::OperandRole::}] #
          !if(firstValue, "Select", role) # [{;
    }
  }];
}

class Graph_BinaryOp<string mnemonic, string what, list<Trait> traits = [],
                     bit sameType = 1, string role = "Elementwise">
    : Graph_BroadcastOp<mnemonic, traits, 0, sameType, role> {
  let summary = what # ", element by element with broadcasting";
  let description = [{
    ONNX operator of the same name: applies the operation to the operands
    broadcast against each other (numpy rules).
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(::mlir::MLIRContext *,
                                          Adaptor adaptor) {
      return ::mlir::getElementTypeOrSelf(adaptor.getLhs().getType());
    }
  }];
}

class Graph_CompareOp<string mnemonic, string what>
    : Graph_BinaryOp<mnemonic, what> {
  let summary = what # ", element by element with broadcasting, giving i1";
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(::mlir::MLIRContext *context,
                                          Adaptor) {
      return ::mlir::IntegerType::get(context, 1);
    }
  }];
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Graph_ConstantOp : Graph_Op<"constant", [DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>, ConstantLike, Graph_CostOpInterface,
    AllTypesMatch<["value", "output"]>]> {
  let summary = "A constant tensor";
  let description = [{
    Holds a constant tensor: ONNX `Constant` nodes, non-float initializers
    (shape pieces, masks, index tables) and everything folding computes.
    Model parameters are `graph.weight`, which never folds.

    ```mlir
    %c = graph.constant dense<[2, 32]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$output);
  let hasFolder = 1;
  let assemblyFormat = "attr-dict $value";
  let builders = [
    OpBuilder<(ins "::mlir::ElementsAttr":$value), [{
      build($_builder, $_state, value.getType(), value);
    }]>,
  ];
}

def Graph_WeightOp : Graph_Op<"weight", [DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>, 
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>,
    AllTypesMatch<["value", "output"]>]> {
  let summary = "A float ONNX initializer, by name";
  let description = [{
    A float initializer of the ONNX model. Its `name` is its identity, which
    training (gradients are reported by initializer name), sharding and
    checkpoints rely on, so unlike `graph.constant` it does not fold: no
    folder sees its value, and equal weights are never merged. `value` is
    the initial value, written to the weights file.

    Exporters store both the model's parameters and constants they folded
    (attention masks, rotary tables, scalars) as float initializers.
    `exported_as` keeps what the exporter recorded, when it did
    (`"parameter"`, `"buffer"` or `"constant"`: the dynamo exporter's
    `InputSpec.kind`); `trainable` marks the weights a training step
    updates, set by `pcc-select-trainable`.

    ```mlir
    %w = graph.weight "fc.weight" trainable {exported_as = "parameter"}
        dense<1.0> : tensor<4x4xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, ElementsAttr:$value,
                   OptionalAttr<StrAttr>:$exported_as, UnitAttr:$trainable);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$name (`trainable` $trainable^)? attr-dict $value";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Element-wise operations
//===----------------------------------------------------------------------===//

def Graph_SqrtOp : Graph_UnaryOp<"sqrt", "Square root">;
def Graph_ReciprocalOp : Graph_UnaryOp<"reciprocal", "Reciprocal (1/x)">;
def Graph_NegOp : Graph_UnaryOp<"neg", "Negation">;
def Graph_AbsOp : Graph_UnaryOp<"abs", "Absolute value">;
def Graph_ErfOp : Graph_UnaryOp<"erf", "Gauss error function">;
def Graph_TanhOp : Graph_UnaryOp<"tanh", "Hyperbolic tangent">;
def Graph_SigmoidOp : Graph_UnaryOp<"sigmoid", "Logistic sigmoid">;
def Graph_ExpOp : Graph_UnaryOp<"exp", "Exponential">;
def Graph_LogOp : Graph_UnaryOp<"log", "Natural logarithm">;
def Graph_ReluOp : Graph_UnaryOp<"relu", "Rectified linear unit max(x, 0)">;
def Graph_FloorOp : Graph_UnaryOp<"floor", "Round down">;
def Graph_CeilOp : Graph_UnaryOp<"ceil", "Round up">;
def Graph_SinOp : Graph_UnaryOp<"sin", "Sine">;
def Graph_CosOp : Graph_UnaryOp<"cos", "Cosine">;
def Graph_NotOp : Graph_UnaryOp<"not", "Logical negation of i1">;

def Graph_AddOp : Graph_BinaryOp<"add", "Addition", [Commutative], 1,
                                  "Additive">;
def Graph_SubOp : Graph_BinaryOp<"sub", "Subtraction", [], 1, "Additive">;
def Graph_MulOp : Graph_BinaryOp<"mul", "Multiplication", [Commutative], 1,
                                  "Multiplicative">;
def Graph_DivOp : Graph_BinaryOp<"div", "Division (truncating for integers)",
                                  [], 1, "Multiplicative">;
def Graph_PowOp : Graph_BinaryOp<"pow", "Power lhs^rhs", [], 0>;
def Graph_MaxOp : Graph_BinaryOp<"max", "Maximum", [Commutative]>;
def Graph_MinOp : Graph_BinaryOp<"min", "Minimum", [Commutative]>;
def Graph_AndOp : Graph_BinaryOp<"and", "Logical and of i1", [Commutative]>;
def Graph_OrOp : Graph_BinaryOp<"or", "Logical or of i1", [Commutative]>;
def Graph_XorOp : Graph_BinaryOp<"xor", "Logical exclusive or of i1",
                                 [Commutative]>;

def Graph_EqualOp : Graph_CompareOp<"equal", "Equality">;
def Graph_LessOp : Graph_CompareOp<"less", "Less than">;
def Graph_LessOrEqualOp : Graph_CompareOp<"less_or_equal", "Less or equal">;
def Graph_GreaterOp : Graph_CompareOp<"greater", "Greater than">;
def Graph_GreaterOrEqualOp
    : Graph_CompareOp<"greater_or_equal", "Greater or equal">;

def Graph_WhereOp : Graph_BroadcastOp<"where", [], 1> {
  let summary = "Selects lhs where the condition holds, else rhs";
  let description = [{
    ONNX `Where`: `output = condition ? lhs : rhs`, the three operands
    broadcast against each other.
  }];
  let arguments = (ins RankedTensorOf<[I1]>:$condition,
                   AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$condition `,` $lhs `,` $rhs attr-dict `:` "
                       "functional-type(operands, results)";
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(::mlir::MLIRContext *,
                                          Adaptor adaptor) {
      return ::mlir::getElementTypeOrSelf(adaptor.getLhs().getType());
    }
  }];
  let hasVerifier = 1;
}

def Graph_IsNaNOp : Graph_Op<"is_nan", [SameOperandsAndResultShape, Graph_Elementwise,
    Graph_CostOpInterface, DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>]> {
  let summary = "True where an element is not a number";
  let description = [{
    ONNX `IsNaN`: an i1 tensor of the input's shape. PyTorch's
    scaled-dot-product attention exports guard fully masked rows with it.
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input);
  let results = (outs RankedTensorOf<[I1]>:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasFolder = 1;
}

def Graph_CastOp : Graph_Op<"cast", [DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, SameOperandsAndResultShape, Graph_Elementwise, Graph_CostOpInterface,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>]> {
  let summary = "Converts every element to the result's element type";
  let description = [{
    ONNX `Cast`. Float to integer conversion truncates toward zero; any
    non-zero value converts to true.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` type($input) `to` type($output)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions and normalizations
//===----------------------------------------------------------------------===//

def Graph_MatMulOp : Graph_Op<"matmul", [DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, InferTypeOpAdaptor,
    Graph_LowPrecisionProduct,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>]> {
  let summary = "Matrix product with numpy semantics";
  let description = [{
    ONNX `MatMul`: batched matrix product, batch dimensions broadcast; a
    rank-1 operand is promoted to a matrix and the added dimension removed
    from the result.
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

def Graph_GemmOp : Graph_Op<"gemm", [DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, InferTypeOpAdaptor,
    Graph_LowPrecisionProduct,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface, ["partition"]>]> {
  let summary = "General matrix multiply alpha*op(a)*op(b) + beta*c";
  let description = [{
    ONNX `Gemm` on matrices; `c` is optional and broadcasts to the result.
  }];
  let arguments = (ins AnyRankedTensor:$a, AnyRankedTensor:$b,
                   Optional<AnyRankedTensor>:$c,
                   DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0">:$beta,
                   DefaultValuedAttr<BoolAttr, "false">:$transA,
                   DefaultValuedAttr<BoolAttr, "false">:$transB);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$a `,` $b (`,` $c^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def Graph_SoftmaxOp : Graph_Op<"softmax", [DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, SameOperandsAndResultType, Graph_CostOpInterface,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>]> {
  let summary = "Normalized exponential along one axis";
  let description = [{
    ONNX `Softmax` (opset 13 semantics): `exp(x) / sum(exp(x))` along `axis`,
    computed stably.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasVerifier = 1;
}

def Graph_LogSoftmaxOp : Graph_Op<"log_softmax", [DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, SameOperandsAndResultType, Graph_CostOpInterface,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface, ["partition"]>]> {
  let summary = "Logarithm of the softmax along one axis";
  let description = [{
    ONNX `LogSoftmax` (opset 13 semantics): `x - log(sum(exp(x)))` along
    `axis`, computed stably.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasVerifier = 1;
}

def Graph_LayerNormOp : Graph_Op<"layer_norm", [DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, InferTypeOpAdaptor, Graph_CostOpInterface,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>]> {
  let summary = "Layer normalization over the trailing dimensions";
  let description = [{
    ONNX `LayerNormalization`: normalizes over dimensions `axis..rank-1`,
    then scales and shifts (`scale` and `bias` broadcast to those
    dimensions). Also returns the mean and the inverse standard deviation,
    shaped like the input with the normalized dimensions set to 1.
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$scale,
                   Optional<AnyRankedTensor>:$bias, I64Attr:$axis,
                   DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs AnyRankedTensor:$output, AnyRankedTensor:$mean,
                 AnyRankedTensor:$inv_std_dev);
  let assemblyFormat = "$input `,` $scale (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def Graph_AttentionOp : Graph_Op<"attention", [
    DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>,
    InferTypeOpAdaptor, Graph_LowPrecisionProduct, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>]> {
  let summary = "Scaled dot-product attention, computed without its scores";
  let description = [{
    `softmax(scale * query . key^T + bias) . value` per batch entry and head,
    in blocks of keys with a running maximum and sum (FlashAttention), so
    that the [query, key] scores and probabilities are never stored.
    `query` is [B, H, Tq, D], `key` [B, G, Tk, D] and `value` [B, G, Tk, E]:
    grouped-query attention reads key/value head `h / (H / G)` for query
    head `h` without repeating it (H a multiple of G). `bias`, if any, is
    added to the scaled scores and broadcasts to [B, H, Tq, Tk] (a padding
    or attention mask of 0 and -inf, ALiBi's slopes); `causal` masks key j
    for query i where j > i, and the kernels skip those blocks. `window`,
    if set, also masks the keys j <= i - window (a sliding window: query i
    attends to its `window` latest keys, as Mistral's and Gemma's
    `sliding_window` say), and the kernels skip those blocks too. `softcap`,
    if set, caps the scaled scores before the bias (Gemma 2's logit
    soft-capping): `softcap * tanh(scale * query . key^T / softcap)`.
    `sinks`, if given, [H] of the query's element type, are attention
    sinks (GPT-OSS's): each query head's softmax also spans one more
    column, of logit `sinks[h]` (neither scaled, capped nor biased), whose
    probability is left out of the output: a row's weights sum to less
    than one, and its log-sum-exp counts the sink.

    Results: the attention `output` [B, H, Tq, E] and, per query row, the
    log-sum-exp of its scaled and biased scores, `lse` [B, H, Tq] in f32,
    from which the backward (`graph.attention_grad`) recomputes the
    probabilities. A row whose keys are all masked gets zeros (PyTorch's
    exports guard such rows so). pcc-fuse-attention forms the op from what
    exporters write.

    `sequence_first` puts the sequence before the heads in `query` [B, Tq,
    H, D], `key` [B, Tk, G, D], `value` [B, Tk, G, E] and `output` [B, Tq,
    H, E], as a projection's rows make them: the kernels read and write
    them in place, with no transposes around the op (`lse` stays [B, H,
    Tq]). pcc-attention-layout sets it for code generation; the passes
    before it (reverse mode, generation, the layout passes) take the op
    without it.
  }];
  let arguments = (ins AnyRankedTensor:$query, AnyRankedTensor:$key,
                   AnyRankedTensor:$value, Optional<AnyRankedTensor>:$bias,
                   Optional<AnyRankedTensor>:$sinks,
                   F32Attr:$scale, UnitAttr:$causal,
                   OptionalAttr<F32Attr>:$softcap,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$window,
                   UnitAttr:$sequence_first);
  let results = (outs AnyRankedTensor:$output, AnyRankedTensor:$lse);
  let assemblyFormat = "$query `,` $key `,` $value (`,` $bias^)? "
                       "(`sinks` $sinks^)? attr-dict "
                       "`:` functional-type(operands, results)";
}

def Graph_AttentionGradOp : Graph_Op<"attention_grad", [
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Graph_CostOpInterface,
                              ["getFlops", "runsOnMatrixUnits"]>,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>]> {
  let summary = "The backward of graph.attention, recomputing its scores";
  let description = [{
    The gradients of `graph.attention`'s query, key and value, given its
    operands, its `output` and `lse`, and the output's gradient
    `output_grad`: per block of keys and block of queries the probabilities
    are recomputed from `lse` (no [query, key] buffer is kept or
    allocated), with `delta = rowsum(output_grad * output)` for the
    softmax's backward. A grouped key/value head sums the gradients of the
    query heads that read it. Under a `softcap`, the scores' gradients are
    multiplied by the cap's slope, `1 - tanh^2`; `causal` and `window` mask
    as the forward's.
  }];
  let arguments = (ins AnyRankedTensor:$query, AnyRankedTensor:$key,
                   AnyRankedTensor:$value, AnyRankedTensor:$output,
                   AnyRankedTensor:$lse, AnyRankedTensor:$output_grad,
                   Optional<AnyRankedTensor>:$bias, F32Attr:$scale,
                   UnitAttr:$causal, OptionalAttr<F32Attr>:$softcap,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$window);
  let results = (outs AnyRankedTensor:$query_grad, AnyRankedTensor:$key_grad,
                 AnyRankedTensor:$value_grad);
  let assemblyFormat = "$query `,` $key `,` $value `,` $output `,` $lse `,` "
                       "$output_grad (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def Graph_CacheWriteOp : Graph_Op<"cache_write", [Graph_UpdatesInPlace,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getBytesAccessed"]>,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>]> {
  let summary = "Writes a step's keys or values into a paged cache, in place";
  let description = [{
    The KV cache of a generation step (pcc-derive-generation): `cache` is
    [blocks, G, block_size, D], `rows` the step's N tokens' keys (or
    values) [1, G, N, D], `slots`, `positions` [N] i64 and `block_tables`
    [S, M] i64. Token n belongs to the sequence of row `slots[n]` of the
    block table and sits at `positions[n]` of it, which lies in block
    `block_tables[slots[n], positions[n] / block_size]` at offset
    `positions[n] % block_size`: PagedAttention's layout, so that sequences
    take blocks as they grow. A token whose slot is negative (a padding
    token) is written nowhere. The result is the cache with the rows
    written, in the operand's buffer (UpdatesInPlace): nothing may read the
    operand after this op. An index out of range fails the run.
  }];
  let arguments = (ins AnyRankedTensor:$cache, AnyRankedTensor:$rows,
                   AnyRankedTensor:$slots, AnyRankedTensor:$positions,
                   AnyRankedTensor:$block_tables);
  let results = (outs AnyRankedTensor:$updated);
  let hasVerifier = 1;
  let assemblyFormat = "$cache `,` $rows `,` $slots `,` $positions `,` "
                       "$block_tables attr-dict `:` "
                       "functional-type(operands, results)";
}

def Graph_PagedAttentionOp : Graph_Op<"paged_attention", [
    InferTypeOpAdaptor, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<Graph_CostOpInterface,
                              ["getFlops", "getBytesAccessed",
                               "runsOnMatrixUnits"]>,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>]> {
  let summary = "Causal attention of a step's tokens over a paged KV cache";
  let description = [{
    `query` is the step's N tokens [1, H, N, D]; `key_cache` [blocks, G,
    block_size, D] and `value_cache` [blocks, G, block_size, E] are caches
    that `graph.cache_write` filled, laid out by `block_tables` [S, M] i64
    as that op says. Token n (of sequence `slots[n]`, at `positions[n]`)
    attends to its sequence's keys at positions 0 .. positions[n] (under a
    `window`, only the last `window` of them, from positions[n] - window +
    1): `softmax(scale * q . k^T) . v` over them (the scores capped as
    graph.attention's `softcap` says, if set), query head h reading
    key/value head `h / (H / G)` (grouped-query attention). `slopes`, if
    given, [H] of the query's element type, adds ALiBi's bias to the
    scores: `slopes[h] * (j - positions[n])` for the key at position j.
    `sinks`, if given, [H] of the query's element type, are graph.attention's
    attention sinks. The output is [1, H, N, E]; a padding token (negative
    slot) gets zeros. An index out of range fails the run.
  }];
  let arguments = (ins AnyRankedTensor:$query, AnyRankedTensor:$key_cache,
                   AnyRankedTensor:$value_cache, AnyRankedTensor:$slots,
                   AnyRankedTensor:$positions, AnyRankedTensor:$block_tables,
                   Optional<AnyRankedTensor>:$slopes,
                   Optional<AnyRankedTensor>:$sinks,
                   F32Attr:$scale, OptionalAttr<F32Attr>:$softcap,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$window);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$query `,` $key_cache `,` $value_cache `,` $slots `,` "
                       "$positions `,` $block_tables (`,` $slopes^)? "
                       "(`sinks` $sinks^)? "
                       "attr-dict `:` functional-type(operands, results)";
}

class Graph_ReduceOp<string mnemonic, string what>
    : Graph_Op<mnemonic, [InferTypeOpAdaptor, Graph_CostOpInterface,
        DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>,
        DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface>]> {
  let summary = what # " over the given axes";
  let description = [{
    ONNX operator of the same name. `axes` are sorted, non-negative and
    unique; the importer turns "no axes" into all axes. With `keepdims`
    the reduced dimensions stay as extent 1.
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Graph_ReduceMeanOp : Graph_ReduceOp<"reduce_mean", "Mean">;
def Graph_ReduceSumOp : Graph_ReduceOp<"reduce_sum", "Sum"> {
  // Integer sums of constants fold: exporters compute gather indices that
  // way (GatherND lowered to a reduce_sum of index tuples).
  let hasFolder = 1;
}
def Graph_ReduceMaxOp : Graph_ReduceOp<"reduce_max", "Maximum">;
def Graph_ReduceMinOp : Graph_ReduceOp<"reduce_min", "Minimum">;

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Graph_ReshapeOp : Graph_Op<"reshape", [Graph_StridedViewOpInterfaceMethods, DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, 
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops", "getBytesAccessed"]>,
    ViewLikeOpInterface]> {
  let summary = "Reinterprets the elements with the result's shape";
  let description = [{
    ONNX `Reshape`, `Squeeze`, `Unsqueeze` and `Flatten` all import as this
    operation: the row-major element order is kept and the result type
    carries the new static shape. It is a view (`ViewLikeOpInterface`):
    targets give the result the buffer of the input, and copy nothing.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` type($input) `to` type($output)";
  let hasFolder = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Value getViewSource() { return getInput(); }
  }];
}

def Graph_TransposeOp : Graph_Op<"transpose", [Graph_StridedViewOpInterfaceMethods, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>]> {
  let summary = "Permutes the dimensions";
  let description = [{
    ONNX `Transpose`: result dimension `i` is input dimension `perm[i]`.
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    /// Whether the permutation swaps the last two dimensions and keeps the
    /// others: a matrix transpose, which a GEMM reads in place.
    bool swapsLastTwo();
    /// `input` with its last two dimensions swapped.
    static TransposeOp createSwapLastTwo(::mlir::OpBuilder &builder,
                                         ::mlir::Location loc,
                                         ::mlir::Value input);
  }];
}

def Graph_ExpandOp : Graph_Op<"expand", [Graph_StridedViewOpInterfaceMethods, DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, 
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>]> {
  let summary = "Broadcasts the input to the result's shape";
  let description = [{
    ONNX `Expand`; the result type carries the broadcast shape.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` type($input) `to` type($output)";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Graph_SliceOp : Graph_Op<"slice", [Graph_StridedViewOpInterfaceMethods, DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface, ["partition"]>, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops", "getBytesAccessed"]>]> {
  let summary = "Strided slice with one (start, step) per dimension";
  let description = [{
    ONNX `Slice` normalized to every dimension: result dimension `d` takes
    `sizes[d]` elements starting at `starts[d]` with stride `steps[d]`
    (negative steps walk backwards). The importer clamps ONNX's bounds.
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$steps);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Graph_ConcatOp : Graph_Op<"concat", [DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>]> {
  let summary = "Joins tensors along one axis";
  let description = [{ ONNX `Concat`; `axis` is non-negative. }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Graph_SplitOp : Graph_Op<"split", [Graph_StridedViewOpInterfaceMethods, DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface, ["partition"]>, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>]> {
  let summary = "Cuts a tensor into pieces along one axis";
  let description = [{
    ONNX `Split`: result `i` has extent `sizes[i]` along `axis`; the sizes
    add up to the input's extent.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis,
                   DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<AnyRankedTensor>:$outputs);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Graph_GatherOp : Graph_Op<"gather", [DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface, ["partition"]>, DeclareOpInterfaceMethods<Graph_IndexingOpInterface>, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops", "getBytesAccessed"]>]> {
  let summary = "Takes slices of data at integer indices along one axis";
  let description = [{
    ONNX `Gather`: the result shape is `data.shape[:axis] + indices.shape +
    data.shape[axis+1:]`; negative indices count from the end.
  }];
  let arguments = (ins AnyRankedTensor:$data,
                   RankedTensorOf<[I32, I64]>:$indices, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat =
      "$data `[` $indices `]` attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Graph_GatherElementsOp : Graph_Op<"gather_elements", [DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface, ["partition"]>, DeclareOpInterfaceMethods<Graph_IndexingOpInterface>, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>]> {
  let summary = "Takes single elements of data at indices along one axis";
  let description = [{
    ONNX `GatherElements`: `output[i][j][k] = data[index[i][j][k]][j][k]`
    for axis 0, and so on; the result has the shape of `indices`.
  }];
  let arguments = (ins AnyRankedTensor:$data,
                   RankedTensorOf<[I32, I64]>:$indices, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat =
      "$data `[` $indices `]` attr-dict `:` functional-type(operands, results)";
}

def Graph_CumSumOp : Graph_Op<"cumsum", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>,
    Graph_CostOpInterface, DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>]> {
  let summary = "Cumulative sum along one axis";
  let description = [{
    ONNX `CumSum` with a constant axis: `output[..., i, ...]` is the sum of
    `input[..., j, ...]` for `j <= i` (`j < i` when `exclusive`; `j >= i`
    and `j > i` when `reverse`). Exporters build position ids with it
    (RoBERTa, OPT) and attention masks.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "false">:$exclusive,
                   DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_TopKOp : Graph_Op<"top_k", [InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>,
    DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>]> {
  let summary = "The k largest or smallest elements along one axis";
  let description = [{
    ONNX `TopK` with a constant `k`: along `axis`, the `k` largest elements
    (the smallest when `largest` is false) in order, the best first, and
    their indices along `axis`. Of equal elements the one of the lower
    index comes first; a NaN counts as larger than any number. A
    mixture-of-experts layer routes each token to the experts of its
    `k` highest scores with it. The values' gradient flows back to the
    places the indices name (`graph.scatter_elements_add`).
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis, I64Attr:$k,
                   DefaultValuedAttr<BoolAttr, "true">:$largest);
  let results = (outs AnyRankedTensor:$values, TensorOf<[I64]>:$indices);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Graph_TriluOp : Graph_Op<"trilu", [DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>]> {
  let summary = "Keeps the upper or lower triangle of the last two dims";
  let description = [{
    ONNX `Trilu`: with `upper`, keeps elements with `col - row >= k`,
    otherwise those with `col - row <= k`; the rest become zero. A small
    constant input folds (a mask that a later op, such as a ScatterND, needs
    as a constant).
  }];
  let arguments = (ins AnyRankedTensor:$input,
                   DefaultValuedAttr<BoolAttr, "true">:$upper,
                   DefaultValuedAttr<I64Attr, "0">:$k);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Ops that reverse-mode differentiation introduces
//===----------------------------------------------------------------------===//

def Graph_ScatterAddOp : Graph_Op<"scatter_add", [DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface, ["partition"]>, DeclareOpInterfaceMethods<Graph_IndexingOpInterface>, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>]> {
  let summary = "Adds slices into a zero tensor at indices along an axis";
  let description = [{
    The adjoint of `graph.gather`: starts from zeros of the result type and,
    for every index `j` of `indices`, adds the slice of `updates` at `j` to
    the result's slice at `indices[j]` along `axis` (negative indices count
    from the end; repeated indices accumulate). `updates` has the shape
    `result.shape[:axis] + indices.shape + result.shape[axis+1:]`.
  }];
  let arguments = (ins AnyRankedTensor:$updates,
                   RankedTensorOf<[I32, I64]>:$indices, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$updates `[` $indices `]` attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_ScatterElementsAddOp : Graph_Op<"scatter_elements_add", [DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface, ["partition"]>, DeclareOpInterfaceMethods<Graph_IndexingOpInterface>, DeclareOpInterfaceMethods<Graph_DifferentiableOpInterface, ["getOperandRole"]>,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>]> {
  let summary = "Adds elements into a zero tensor at indices along an axis";
  let description = [{
    The adjoint of `graph.gather_elements`: starts from zeros of the result
    type and adds `updates[i][j][k]` to `result[indices[i][j][k]][j][k]` for
    axis 0, and so on. `updates` and `indices` have the same shape.
  }];
  let arguments = (ins AnyRankedTensor:$updates,
                   RankedTensorOf<[I32, I64]>:$indices, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$updates `[` $indices `]` attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_InsertSliceOp : Graph_Op<"insert_slice", [DeclareOpInterfaceMethods<Graph_ShardingRuleOpInterface>, 
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>]> {
  let summary = "Places a tensor into a zero tensor at a strided slice";
  let description = [{
    The adjoint of `graph.slice`: the result is zero except for the slice
    that `graph.slice` with the same `starts` and `steps` (and the source's
    shape as sizes) would read, which holds `source`.
  }];
  let arguments = (ins AnyRankedTensor:$source, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$steps);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($output)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def Graph_FusionOp : Graph_Op<"fusion", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"::pcc::graph::YieldOp">,
    DeclareOpInterfaceMethods<Graph_CostOpInterface, ["getFlops"]>]> {
  let summary = "Element-wise ops run as one loop nest";
  let description = [{
    A group of `graph` ops with the `Elementwise` trait that a target runs as
    one loop nest (one kernel on a GPU) over the iteration space of its
    results, made by the `pcc-fuse` pass: the values between the ops stay
    in registers instead of buffers. The body may also hold splat
    `graph.constant`s, which targets print as literals. The body's
    arguments are the operands;
    each operand is read broadcast to the iteration space with numpy rules,
    and every result has the iteration space's shape.

    ```mlir
    %r = graph.fusion %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<8xf32>):
      %s = graph.add %a0, %a1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %t = graph.tanh %s : tensor<4x8xf32>
      graph.yield %t : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::mlir::TypeRange":$resultTypes,
                                "::mlir::ValueRange":$inputs)>];
}

def Graph_YieldOp : Graph_Op<"yield", [Terminator, HasParent<"FusionOp">]> {
  let summary = "The results of a graph.fusion";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
  let builders = [OpBuilder<(ins), [{ /* nothing yielded */ }]>];
}

#endif // PCC_GRAPH_OPS
