//===- DistDialect.td - The Dist dialect definition --------*- tablegen -*-===//

#ifndef PCC_DIST_DIALECT
#define PCC_DIST_DIALECT

include "mlir/IR/OpBase.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::pcc::dist";
  let summary = "Meshes of ranks, shardings, collectives and point-to-point "
                "transfers";
  let description = [{
    The Dist dialect describes how a program is spread over ranks. It uses
    the vocabulary of upstream MLIR's `shard` dialect (a mesh of named axes,
    a sharding per value that says which axes split which dimension and
    which leave partial results, collectives over mesh axes) and adds what
    a static pipeline schedule needs: point-to-point transfers with explicit
    peers and tags, which a schedule verifier can match.

    A `dist.mesh` names the axes of the program's ranks (`tp` for tensor
    parallelism now; `pp` and `dp` are axes like any other). A
    `#dist.sharding` attribute gives a tensor's layout on a mesh. After
    partitioning, values are local shards, and the collectives move data
    between the ranks that share the coordinates outside their `axes`.

    The passes also record their decisions as `dist.*` attributes on ops,
    function arguments and results, which the dialect verifies wherever
    they appear (an unknown `dist.*` name is an error too):

    | attribute | on | value |
    |---|---|---|
    | `dist.sharding` | argument, result, `graph.weight` | `#dist.sharding` of the value's rank |
    | `dist.operands`, `dist.results` | op | one `#dist.sharding` per operand / result |
    | `dist.padding` | argument, result, op | `array<i64: dim, extent>`, extent > 0 |
    | `dist.microbatches`, `dist.num_stages` | function | integer >= 1 |
    | `dist.step_schedule` | function | `@name` of its `dist.schedule`, in a program of several pipelined steps |
    | `dist.batch_dim` | argument, result | integer in [0, rank) |
    | `dist.stage`, `dist.rank` | op (function) | integer >= 0 |
    | `dist.stages` | op, argument | non-empty `array<i64>` of stages >= 0 |
    | `dist.weight_grad`, `dist.grad_sum` | op | unit |
    | `dist.stage_costs`, `dist.transfer_costs`, `dist.deferred_costs` | function | `array<f64>` >= 0, 3 (2, 1) per stage |
    | `dist.stash_bytes`, `dist.transfer_bytes`, `dist.base_bytes` | function | `array<i64>` >= 0 |
    | `dist.heaviest_op_time` | function | float >= 0 |
    | `dist.phase` | function | `"forward"`, `"backward"`, `"weight"` or `"optimizer"` |
    | `dist.input`, `dist.state`, `dist.value`, `dist.output`, `dist.grad`, `dist.update`, `dist.result_index` | argument / result | integer >= 0 |
    | `dist.reduce_axes` | result | non-empty array of axis names |
    | `dist.action` | `func.call` | `"O"`, or F, B or W and a microbatch |
  }];
  let useDefaultAttributePrinterParser = 1;
  // Every `dist.*` attribute on an op, an argument or a result is checked
  // (DistNames.h lists them).
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let usePropertiesForAttributes = 0;
}

#endif // PCC_DIST_DIALECT
