//===- GraphInterfaces.td - Op interfaces of the Graph dialect -*- tablegen -*-===//

#ifndef PCC_GRAPH_INTERFACES
#define PCC_GRAPH_INTERFACES

include "mlir/IR/OpBase.td"

def Graph_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::pcc::graph";
  let description = [{
    The static cost of one execution of an operation: floating-point
    operations and bytes moved to and from memory. The compile report and the
    pipeline partitioner (balancing stages) read it. The defaults count one
    operation per result element and every operand and result byte once.
  }];
  let methods = [
    InterfaceMethod<"Floating-point operations of one execution.",
      "int64_t", "getFlops", (ins), [{}], [{
        return ::pcc::graph::detail::defaultFlops($_op);
      }]>,
    InterfaceMethod<"Bytes read and written by one execution.",
      "int64_t", "getBytesAccessed", (ins), [{}], [{
        return ::pcc::graph::detail::defaultBytesAccessed($_op);
      }]>,
    InterfaceMethod<[{
        Whether its flops are products that run at the matrix units' rate
        (tensor cores; the CPU's GEMM kernels), not element-wise arithmetic
        at the vector units' rate. By default, the products that mixed
        precision narrows (`LowPrecisionProduct`).
      }],
      "bool", "runsOnMatrixUnits", (ins), [{}], [{
        return ::pcc::graph::detail::isLowPrecisionProduct($_op);
      }]>,
  ];
}

def Graph_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::pcc::graph";
  let description = [{
    A factor-based sharding rule, as in GSPMD and Shardy: every dimension of
    every operand and result is mapped to a factor (or to none), dimensions
    mapped to the same factor must be sharded alike, and a factor that
    appears in operands but in no result is a reduction, so sharding it
    leaves partial sums that need an all-reduce. The sharding propagation
    and partitioning passes are generic over this rule.
  }];
  let methods = [
    InterfaceMethod<"Returns the sharding rule of this operation.",
      "::pcc::graph::ShardingRule", "getShardingRule", (ins)>,
    InterfaceMethod<[{
        Builds this op's local computation on one rank once factor
        `factor` of its rule is split into `context.numShards()` blocks
        (-1: nothing is split): `operands` are the local operands, laid
        out as the rule says, and the results must have `resultTypes`
        (partial results where the factor is a reduction). The default
        clones the op with the local types, which is right for every op
        whose attributes hold no extents of split dimensions and whose
        meaning does not depend on where its block lies. Ops for which that
        is wrong build their own: a lookup in a vocabulary-split table masks
        the rows of other ranks, a log-softmax over a split axis all-reduces
        its maximum and its sum, a slice rescales its extents.
      }],
      "::llvm::LogicalResult", "partition",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$operands,
           "::mlir::TypeRange":$resultTypes, "int64_t":$factor,
           "::pcc::graph::PartitionContext &":$context,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$results),
      [{}], [{
        return ::pcc::graph::detail::partitionByCloning(
            $_op, builder, operands, resultTypes, results);
      }]>,
  ];
}

def Graph_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::pcc::graph";
  let description = [{
    Reverse-mode differentiation: given the gradients of the results (null
    for results that do not reach the loss), build with `builder` the
    vector-Jacobian product and append one gradient per operand (null for
    operands that are not differentiable, such as integer indices). The
    autodiff pass is generic over this interface.
  }];
  let methods = [
    InterfaceMethod<"Builds the vector-Jacobian product of this operation.",
      "::llvm::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
    InterfaceMethod<[{
        The role operand `index` plays when the other operands are
        activations: the training passes read it to tell a model's
        parameters (the weights of a contraction, a looked-up table, a
        normalization's scale and bias) from constants that exporters
        store as initializers (masks, scalars, rotary tables). `Movement`
        passes the value through unchanged in value (reshape, slice, ...).
      }],
      "::pcc::graph::OperandRole", "getOperandRole", (ins "unsigned":$index),
      [{}], [{ return ::pcc::graph::OperandRole::Other; }]>,
  ];
}

def Graph_StridedViewOpInterface : OpInterface<"StridedViewOpInterface"> {
  let cppNamespace = "::pcc::graph";
  let description = [{
    An op each of whose results takes elements of its first operand at
    offsets affine in the result's index (a transpose, a slice, a piece of
    a split, a reshape, a broadcast): laid out in the input's buffer, the
    result is one element offset plus one stride per dimension. A target
    that can read such a layout in place (a GEMM reads a matrix through its
    leading dimension and a batch through its strides) needs no copy: the
    code generators compose the layouts of a chain of these ops and ask
    only the op's interface, never its kind.
  }];
  let methods = [
    InterfaceMethod<[{
        The layout of result `result` in the input's buffer when the input
        is laid out as `input` (its offset and one stride per input
        dimension), or none where no single stride per result dimension
        describes it (a reshape that merges dimensions that are not
        adjacent in memory).
      }],
      "std::optional<::pcc::graph::StridedLayout>", "getResultLayout",
      (ins "unsigned":$result,
           "const ::pcc::graph::StridedLayout &":$input)>,
  ];
}

def Graph_IndexingOpInterface : OpInterface<"IndexingOpInterface"> {
  let cppNamespace = "::pcc::graph";
  let description = [{
    An op that reads the values of one operand as positions along an axis
    of a tensor (a gather's rows, a scatter's targets): each must lie in
    `[-extent, extent)` (a negative one counts from the end), or the run
    fails. pcc-bound-indices asks this interface, never the op's kind, for
    the bound each of a step's integer inputs must keep, and for constant
    indices that can never be in range.
  }];
  let methods = [
    InterfaceMethod<"The operand whose values are positions.",
      "::mlir::OpOperand &", "getIndicesOperand", (ins), [{}], [{
        return $_op.getIndicesMutable();
      }]>,
    InterfaceMethod<"The extent of the axis the positions index.",
      "int64_t", "getIndexedExtent", (ins)>,
  ];
}

#endif // PCC_GRAPH_INTERFACES
