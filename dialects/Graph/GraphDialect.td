//===- GraphDialect.td - The Graph dialect definition ------*- tablegen -*-===//

#ifndef PCC_GRAPH_DIALECT
#define PCC_GRAPH_DIALECT

include "mlir/IR/OpBase.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::pcc::graph";
  let summary = "Static-shaped tensor operations at the level of ONNX";
  let description = [{
    The Graph dialect is where every pcc compilation starts: the ONNX
    importer produces one `func.func` of `graph` operations on statically
    shaped tensors, and every later pass (loss, autodiff, sharding, pipeline
    partitioning, bufferization and code generation) consumes it.

    The operations follow ONNX semantics with the opset differences removed:
    operands that ONNX passes as constant tensors (axes, shapes, slice
    bounds, split sizes) are attributes here, normalized to non-negative
    axes, and every shape is static. Shape computations (`Shape`,
    `ConstantOfShape`, `Range`, ...) fold to constants during import.

    Each operation carries the name of the ONNX node it came from as its
    location, so diagnostics from any pass point at the node.

    Operations implement the interfaces later passes are generic over:
    `CostOpInterface` (flops and bytes), `ShardingRuleOpInterface` (a
    factor-based sharding rule) and `DifferentiableOpInterface` (the
    vector-Jacobian product).

    A training step states its contract with dialect attributes that the
    dialect verifies: on arguments `graph.state` (persistent state and its
    name), `graph.init` (its initial value) and `graph.state_of` (the
    parameter an optimizer state belongs to); on results `graph.update`
    (the new value of a state argument, by index), `graph.grad` (a
    parameter's gradient, by the index of its state argument) and
    `graph.loss`; on ops `graph.backward` (built by autodiff). An integer
    argument whose values the step takes as positions carries
    `graph.index_bound` (the extent they index) and `graph.index_node` (the
    ONNX node reading them), pcc-bound-indices' finding, which the runtime
    checks inputs against.
  }];
  let hasConstantMaterializer = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let usePropertiesForAttributes = 0;
}

#endif // PCC_GRAPH_DIALECT
