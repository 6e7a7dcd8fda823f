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
  }];
  let useDefaultAttributePrinterParser = 1;
  let usePropertiesForAttributes = 0;
}

#endif // PCC_DIST_DIALECT
