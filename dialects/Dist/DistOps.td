//===- DistOps.td - Operations and attributes of the Dist dialect -*- tablegen -*-===//

#ifndef PCC_DIST_OPS
#define PCC_DIST_OPS

include "DistDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Dist_ReductionKind : I32EnumAttr<"ReductionKind",
    "How partial results combine", [
      I32EnumAttrCase<"Sum", 1, "sum">,
      I32EnumAttrCase<"Max", 2, "max">,
      I32EnumAttrCase<"Min", 3, "min">,
      I32EnumAttrCase<"Mean", 4, "mean">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::pcc::dist";
}

def Dist_ReductionKindAttr : EnumAttr<Dist_Dialect, Dist_ReductionKind,
                                      "reduction"> {
  let assemblyFormat = "$value";
}

def Dist_ShardingAttr : AttrDef<Dist_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "How a tensor is laid out on a mesh";
  let description = [{
    For each dimension of the tensor, the mesh axes that split it, major to
    minor (none: the dimension is whole on every rank); and the axes over
    which the ranks hold partial results still to be combined by
    `partial_kind`. A tensor that no axis splits and none leaves partial is
    replicated.

    `groups` (one count per dimension, 1 when left out) views a split
    dimension as [groups, n] and splits every group's n alike: a rank holds
    its block of each group. That is the layout of a fused projection whose
    output is cut into equal parts afterwards (GPT-2's QKV columns: groups
    3, so each rank holds its heads of Q, of K and of V).

    ```mlir
    #dist.sharding<@mesh, [["tp"], []]>                     // rows split
    #dist.sharding<@mesh, [[], ["tp"]] groups [1, 3]>       // fused QKV
    #dist.sharding<@mesh, [[], []], partial = ["tp"] sum>   // partial sums
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$dims,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$groups,
                        OptionalParameter<"::mlir::ArrayAttr">:$partial_axes,
                        DefaultValuedParameter<"::pcc::dist::ReductionKind",
                            "::pcc::dist::ReductionKind::Sum">:$partial_kind);
  let assemblyFormat = [{
    `<` $mesh `,` $dims (`groups` $groups^)?
    (`,` `partial` `=` $partial_axes^ custom<PartialKind>($partial_kind))? `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The axes splitting dimension `dim`.
    ::llvm::SmallVector<::llvm::StringRef> getDimAxes(unsigned dim) const;
    bool isReplicated() const;
    /// The groups of dimension `dim` (1 unless `groups` says otherwise).
    int64_t getDimGroups(unsigned dim) const;
  }];
}

//===----------------------------------------------------------------------===//
// Operations
//===----------------------------------------------------------------------===//

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

def Dist_MeshOp : Dist_Op<"mesh", [Symbol]> {
  let summary = "The ranks of a program, as a grid of named axes";
  let description = [{
    Declares a mesh: named axes and their sizes, major to minor; a rank's
    linear index runs over them in row-major order. Axis names are unique.

    ```mlir
    dist.mesh @mesh(pp = 2, tp = 4)
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat =
      "$sym_name `(` custom<MeshAxes>($axis_names, $shape) `)` attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The size of axis `name`, or nullopt.
    std::optional<int64_t> getAxisSize(::llvm::StringRef name);
    int64_t getNumRanks();
  }];
}

// Collectives over mesh axes of local tensors.
class Dist_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Dist_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  code extraCollectiveDecl = [{
    /// The product of the sizes of `axes`: the ranks of one group.
    int64_t getGroupSize();
  }];
}

def Dist_AllReduceOp : Dist_CollectiveOp<"all_reduce",
    [SameOperandsAndResultType]> {
  let summary = "Combines the tensors of every rank of each group";
  let description = [{
    Every rank of a group (the ranks that differ only along `axes`) ends with
    the combination (`kind`) of the group's tensors: Megatron's all-reduce
    after a row-parallel matmul, or a max for a vocabulary-parallel softmax.

    ```mlir
    %y = dist.all_reduce %x on @mesh axes ["tp"] sum : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Dist_ReductionKindAttr:$kind);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input `on` $mesh `axes` $axes custom<Reduction>($kind) attr-dict `:` "
                       "type($output)";
  let extraClassDeclaration = extraCollectiveDecl;
}

def Dist_AllGatherOp : Dist_CollectiveOp<"all_gather"> {
  let summary = "Concatenates the tensors of each group along a dimension";
  let description = [{
    Every rank of a group ends with the group's tensors concatenated along
    `dim` in rank order: the result's `dim` is the group size times the
    input's.

    ```mlir
    %y = dist.all_gather %x on @mesh axes ["tp"] dim 1 : tensor<2x4xf32> -> tensor<2x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input `on` $mesh `axes` $axes `dim` $dim attr-dict "
                       "`:` type($input) `->` type($output)";
  let extraClassDeclaration = extraCollectiveDecl;
}

def Dist_ReduceScatterOp : Dist_CollectiveOp<"reduce_scatter"> {
  let summary = "Combines the tensors of each group and scatters the result";
  let description = [{
    The group's tensors are combined (`kind`) and the result split along
    `dim` in rank order; each rank keeps its part. Sequence parallelism
    replaces an all-reduce by a reduce-scatter and an all-gather.

    ```mlir
    %y = dist.reduce_scatter %x on @mesh axes ["tp"] dim 0 sum : tensor<8x4xf32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim,
                       Dist_ReductionKindAttr:$kind);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input `on` $mesh `axes` $axes `dim` $dim custom<Reduction>($kind) "
                       "attr-dict `:` type($input) `->` type($output)";
  let extraClassDeclaration = extraCollectiveDecl;
}

def Dist_AllToAllOp : Dist_CollectiveOp<"all_to_all"> {
  let summary = "Exchanges parts of a tensor between the ranks of a group";
  let description = [{
    Each rank splits its tensor along `split_dim` into as many parts as the
    group has ranks, sends part i to rank i, and concatenates what it
    receives along `concat_dim`: a resharding from one dimension to another.

    ```mlir
    %y = dist.all_to_all %x on @mesh axes ["tp"] split 1 concat 0 : tensor<2x8xf32> -> tensor<8x2xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input `on` $mesh `axes` $axes `split` $split_dim "
                       "`concat` $concat_dim attr-dict `:` type($input) `->` "
                       "type($output)";
  let extraClassDeclaration = extraCollectiveDecl;
}

def Dist_AllSliceOp : Dist_CollectiveOp<"all_slice", [Pure]> {
  let summary = "Keeps this rank's block of a replicated tensor";
  let description = [{
    The inverse of `dist.all_gather`, and no communication: every rank of a
    group holds the whole `input` and keeps the block of `dim` at its
    position in the group. With `groups`, `dim` is viewed as [groups, n]
    and the rank keeps its block of every group's n. Partitioning uses it
    where a replicated value meets a sharded one.

    ```mlir
    %y = dist.all_slice %x on @mesh axes ["tp"] dim 1 groups 1 : tensor<2x16xf32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim, I64Attr:$groups);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input `on` $mesh `axes` $axes `dim` $dim `groups` "
                       "$groups attr-dict `:` type($input) `->` type($output)";
  let extraClassDeclaration = extraCollectiveDecl;
}

def Dist_AxisIndexOp : Dist_CollectiveOp<"axis_index", [Pure]> {
  let summary = "This rank's position in its group along mesh axes";
  let description = [{
    A rank-0 `i64` tensor: the position of the running rank in its group
    along `axes` (row-major over them). Partitioned ops that address their
    block (a vocabulary-parallel lookup offsets its indices) read it.

    ```mlir
    %r = dist.axis_index on @mesh axes ["tp"] : tensor<i64>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs 0DTensorOf<[I64]>:$output);
  let assemblyFormat = "`on` $mesh `axes` $axes attr-dict `:` type($output)";
  let extraClassDeclaration = extraCollectiveDecl;
}

def Dist_SendOp : Dist_CollectiveOp<"send"> {
  let summary = "Sends a tensor to one rank of the group";
  let description = [{
    Sends `input` to the rank at position `peer` of this rank's group along
    `axes` (the pipeline's next or previous stage along `pp`). `tag` pairs
    it with the `dist.recv` that receives it: a static schedule's verifier
    matches every send with one receive of the same tag, peer and type.

    ```mlir
    dist.send %x on @mesh axes ["pp"] to 1 tag 7 : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$peer, I64Attr:$tag);
  let assemblyFormat = "$input `on` $mesh `axes` $axes `to` $peer `tag` $tag "
                       "attr-dict `:` type($input)";
  let extraClassDeclaration = extraCollectiveDecl;
}

def Dist_RecvOp : Dist_CollectiveOp<"recv"> {
  let summary = "Receives a tensor from one rank of the group";
  let description = [{
    Receives the tensor that the rank at position `peer` of this rank's
    group along `axes` sends with the same `tag`.

    ```mlir
    %x = dist.recv on @mesh axes ["pp"] from 0 tag 7 : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$peer, I64Attr:$tag);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "`on` $mesh `axes` $axes `from` $peer `tag` $tag "
                       "attr-dict `:` type($output)";
  let extraClassDeclaration = extraCollectiveDecl;
}

#endif // PCC_DIST_OPS
