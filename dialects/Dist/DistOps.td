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
include "mlir/Interfaces/ViewLikeInterface.td"

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

def Dist_WaitOp : Dist_Op<"wait", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<ViewLikeOpInterface>]> {
  let summary = "Completes a started collective: its result is read after it";
  let description = [{
    `dist.all_reduce`, `dist.all_gather` and `dist.reduce_scatter` start
    their communication where they stand; a collective whose result is read
    only by `dist.wait` ops runs until the first of them, and the code in
    between (independent work) runs while it travels. The wait's result is
    the collective's (the same buffer); everything that reads the
    collective's result reads it through a wait. A collective read by
    anything else completes where it starts. Its input is read until the
    wait, so it stays alive until then. `pcc-overlap-collectives` places
    the waits: just before the first op that needs the result, or that
    keeps communication order with the collective (a later collective, a
    call).

    ```mlir
    %s = dist.all_reduce %x on @mesh axes ["dp"] sum : tensor<64xf32>
    ...                                         // runs during the reduction
    %r = dist.wait %s : tensor<64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The collective this op completes.
    ::mlir::Operation *getCollective() { return getInput().getDefiningOp(); }
  }];
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

def Dist_WaitSendOp : Dist_CollectiveOp<"wait_send"> {
  let summary = "Completes a send: its buffer is free after it";
  let description = [{
    Waits until the latest `dist.send` of `input` to `peer` with `tag`
    before it, in the same block, has been taken by its receive. A send
    reads its tensor until its wait, or, without one, until its function
    returns; so the wait is where a sent buffer's memory may go to other
    values. A pipeline schedule places these where its simulation says the
    receive has already run, so that they do not hold the rank up.

    ```mlir
    dist.send %x on @mesh axes ["pp"] to 1 tag 7 : tensor<2x8xf32>
    ...
    dist.wait_send %x on @mesh axes ["pp"] to 1 tag 7 : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$peer, I64Attr:$tag);
  let assemblyFormat = "$input `on` $mesh `axes` $axes `to` $peer `tag` $tag "
                       "attr-dict `:` type($input)";
  let hasVerifier = 1;
  let extraClassDeclaration = extraCollectiveDecl # [{
    /// The send this op completes.
    SendOp getSend();
  }];
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

//===----------------------------------------------------------------------===//
// Pipeline schedules
//===----------------------------------------------------------------------===//

def Dist_Phase : I32EnumAttr<"Phase", "A pipeline stage's computation", [
      I32EnumAttrCase<"F", 0>,
      I32EnumAttrCase<"B", 1>,
      I32EnumAttrCase<"W", 2>]> {
  let cppNamespace = "::pcc::dist";
}

def Dist_Direction : I32EnumAttr<"Direction",
    "Whether a rank sends, receives or completes a send", [
      I32EnumAttrCase<"Send", 0, "send">,
      I32EnumAttrCase<"Recv", 1, "recv">,
      I32EnumAttrCase<"Wait", 2, "wait">]> {
  let cppNamespace = "::pcc::dist";
}

def Dist_Payload : I32EnumAttr<"Payload",
    "What a pipeline transfer carries", [
      I32EnumAttrCase<"Act", 0, "act">,
      I32EnumAttrCase<"Grad", 1, "grad">]> {
  let cppNamespace = "::pcc::dist";
}

def Dist_NonNegativeI64 : ConfinedAttr<I64Attr, [IntNonNegative]>;
def Dist_PositiveI64 : ConfinedAttr<I64Attr, [IntPositive]>;

def Dist_ScheduleOp : Dist_Op<"schedule", [Symbol, NoTerminator,
                                            SingleBlock]> {
  let summary = "A static pipeline schedule: every rank's ordered actions";
  let description = [{
    Pipeline parallelism cuts a model into `ranks` x `virtual_stages`
    virtual stages and the batch into `microbatches`. Virtual stage `s`
    lives on rank `s % ranks` (Megatron's interleaved layout: rank `r`
    holds chunks `r`, `r + ranks`, `r + 2 * ranks`, ...; `virtual_stages`
    is the number of chunks per rank). The body holds one `dist.rank` per
    pipeline rank, in rank order, each listing what that rank does, in
    order: computations (`dist.compute`) and point-to-point transfers
    (`dist.transfer`). Sends do not block; receives do.

    `kind` names the generator that made the schedule (`gpipe`, `1f1b`,
    `interleaved`, `zb-h1`); the table, not the name, is what counts.
    Optional inputs to the simulation that `pcc-verify-schedule` runs:
    `costs` (per virtual stage the times of F, B and W, in seconds: three
    values a stage; when a schedule does not split backwards, a B costs
    B + W), `stash_bytes` (per virtual stage, the bytes one microbatch's
    forward keeps until its last backward action ends), `base_bytes`
    (per rank: parameters, optimizer state, workspace) and
    `transfer_costs` (per virtual stage, two values: the seconds from the
    send of its activations to their arrival at the next stage, and from
    the send of its input gradient to its arrival at the previous one,
    latency and bandwidth included; a receive ends no earlier than its
    send's arrival; free when absent) and `transfer_bytes` (per virtual
    stage, the bytes of the same two sends, which a rank holds from the
    send to its `wait`, or to the end of its step), and `deferred_costs`
    (per virtual stage, the seconds of the weight-gradient products that
    the stage runs once a step over all its microbatches, after its rank's
    last action, as Megatron-LM defers its embedding's; `costs` leave
    them out). A `wait` ends when the receive of its send has. The
    simulation
    writes back `makespan` and `bubble_fraction` (the share of rank-time
    spent idle: 1 - sum(busy) / (ranks * makespan)).

    `steps` (1 when absent) is the number of consecutive training steps the
    table covers without a flush between them; microbatch `k` of the table
    is microbatch `k % microbatches` of step `k / microbatches`. With
    `steps = 2` (PipeDream-2BW's `2bw`) the table is cut into the three
    calls a run makes of each rank: its `fill` (the forwards of the first
    step that run ahead, `lead` of them on a rank), the steady call that
    ends one step and starts the next (repeated for every step but the
    last), and the `drain` that ends the last. A forward of microbatch `k`
    on a rank of lead `l` belongs to the fill when `k < l`, to the steady
    call when `k < microbatches + l`, else to the drain; a backward to the
    steady call when `k < microbatches`, else to the drain; a transfer to
    the call of the computation that sends it. The verifier checks the
    fill followed by the drain, the fill, the steady call and the drain,
    and the fill, the steady call twice and the drain, each as a schedule.
    The simulation then times the steady call alone, every rank starting
    it at once: `makespan` and `bubble_fraction` are those of one step once
    the pipeline is full.

    `pipelines` (1 when absent) is the number of pipelines over the same
    ranks. With 2 (Chimera's bidirectional pipelines, one stage per rank
    each), the even microbatches flow down, stage `s` on rank `s`, and the
    odd ones up, stage `s` on rank `ranks - 1 - s`: every rank holds two
    stages, and each stage's weights are on two ranks.

    ```mlir
    dist.schedule @schedule {kind = "gpipe", microbatches = 1, ranks = 2, virtual_stages = 1} {
      dist.rank 0 {
        dist.compute F stage 0 microbatch 0
        dist.transfer send act stage 0 microbatch 0 peer 1
        dist.transfer recv grad stage 1 microbatch 0 peer 1
        dist.compute B stage 0 microbatch 0
      }
      dist.rank 1 {
        dist.transfer recv act stage 0 microbatch 0 peer 0
        dist.compute F stage 1 microbatch 0
        dist.compute B stage 1 microbatch 0
        dist.transfer send grad stage 1 microbatch 0 peer 0
      }
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$kind,
                       Dist_PositiveI64:$microbatches,
                       Dist_PositiveI64:$virtual_stages,
                       Dist_PositiveI64:$ranks,
                       OptionalAttr<DenseF64ArrayAttr>:$costs,
                       OptionalAttr<DenseI64ArrayAttr>:$stash_bytes,
                       OptionalAttr<DenseI64ArrayAttr>:$base_bytes,
                       OptionalAttr<DenseF64ArrayAttr>:$transfer_costs,
                       OptionalAttr<DenseI64ArrayAttr>:$transfer_bytes,
                       OptionalAttr<DenseF64ArrayAttr>:$deferred_costs,
                       OptionalAttr<F64Attr>:$bubble_fraction,
                       OptionalAttr<F64Attr>:$makespan,
                       OptionalAttr<Dist_PositiveI64>:$steps,
                       OptionalAttr<Dist_PositiveI64>:$pipelines);
  let regions = (region SizedRegion<1>:$body);
  // `@name {attributes} {ranks}`: the attributes are never empty (kind,
  // microbatches, ranks and virtual_stages are required), so the declarative
  // format's ambiguity between them and the region does not arise.
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumRanks() { return getRanksAttr().getInt(); }
    int64_t getNumMicrobatches() { return getMicrobatchesAttr().getInt(); }
    /// Consecutive steps the table covers without a flush (`steps`).
    int64_t getNumSteps() { return getSteps().value_or(1); }
    /// The microbatches of the table: those of all its steps.
    int64_t getNumTableMicrobatches() {
      return getNumMicrobatches() * getNumSteps();
    }
    /// All virtual stages: ranks x virtual_stages.
    int64_t getNumStages() {
      return getNumRanks() * getVirtualStagesAttr().getInt();
    }
    /// Pipelines over the same ranks (`pipelines`).
    int64_t getNumPipelines() { return getPipelines().value_or(1); }
    /// The pipeline rank that runs virtual stage `stage` of microbatch
    /// `microbatch`: rank `stage % ranks`, or in the second of two
    /// pipelines (odd microbatches) rank `ranks - 1 - stage`.
    int64_t getRankOf(int64_t stage, int64_t microbatch) {
      return getPipelineRank(stage, microbatch, getNumRanks(),
                             getNumPipelines());
    }
    /// The dist.rank ops of the body, in order.
    ::llvm::SmallVector<RankOp> getRankOps();
  }];
}

def Dist_RankOp : Dist_Op<"rank", [HasParent<"ScheduleOp">, NoTerminator,
                                    SingleBlock]> {
  let summary = "One pipeline rank's actions, in order";
  let description = [{
    The actions pipeline rank `rank` of the enclosing `dist.schedule` runs,
    in order. `pcc-verify-schedule` writes back, from its simulation,
    `busy` (the time the rank computes), `peak_stashed` (the most
    microbatch-chunks whose forward ran and whose last backward action has
    not) and, when the schedule gives bytes, `peak_bytes` (`base_bytes` plus
    the most stashed bytes at any time). `lead` (0 when absent), in a
    schedule of several steps, is how many forwards of the next step the
    rank runs before the current step ends.

    ```mlir
    dist.rank 1 attributes {busy = 6.0, peak_stashed = 1} {
      dist.transfer recv act stage 0 microbatch 0 peer 0
      dist.compute F stage 1 microbatch 0
      dist.compute B stage 1 microbatch 0
      dist.transfer send grad stage 1 microbatch 0 peer 0
    }
    ```
  }];
  let arguments = (ins Dist_NonNegativeI64:$rank,
                       OptionalAttr<I64Attr>:$peak_stashed,
                       OptionalAttr<I64Attr>:$peak_bytes,
                       OptionalAttr<F64Attr>:$busy,
                       OptionalAttr<Dist_NonNegativeI64>:$lead);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$rank attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getIndex() { return getRankAttr().getInt(); }
    int64_t getNumLead() { return getLead() ? getLeadAttr().getInt() : 0; }
    ScheduleOp getSchedule();
  }];
}

def Dist_ComputeOp : Dist_Op<"compute", [HasParent<"RankOp">]> {
  let summary = "Runs one phase of a virtual stage on one microbatch";
  let description = [{
    `F` is the forward of virtual `stage` on `microbatch`, `B` its backward
    (the input gradient, and the weight gradient too unless the schedule
    splits it off), `W` the weight gradient when split off (zero-bubble
    schedules). The stage must live on the enclosing rank.

    ```mlir
    dist.compute F stage 2 microbatch 0
    ```
  }];
  let arguments = (ins Dist_Phase:$phase, Dist_NonNegativeI64:$stage,
                       Dist_NonNegativeI64:$microbatch);
  let assemblyFormat = "$phase `stage` $stage `microbatch` $microbatch "
                       "attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getStageIndex() { return getStageAttr().getInt(); }
    int64_t getMicrobatchIndex() { return getMicrobatchAttr().getInt(); }
  }];
}

def Dist_TransferOp : Dist_Op<"transfer", [HasParent<"RankOp">]> {
  let summary = "Sends or receives a pipeline stage's output or gradient";
  let description = [{
    `act` is the forward output of virtual `stage`, which the rank of
    `stage` sends to the rank of `stage + 1`; `grad` is the input gradient
    of `stage`, which the rank of `stage` sends to the rank of `stage - 1`.
    `peer` is the other pipeline rank. Sends do not block; a receive blocks
    until its send has run. Between two ranks, receives take transfers in
    the order they were sent. Virtual stages on the same rank need no
    transfer. `wait` completes the rank's earlier send of the same
    payload, stage and microbatch: it blocks until the receive of that
    send has run, and frees what the send read (a send without a wait is
    complete when the rank's step ends).

    ```mlir
    dist.transfer send act stage 0 microbatch 3 peer 1
    dist.transfer recv grad stage 1 microbatch 3 peer 1
    dist.transfer wait act stage 0 microbatch 3 peer 1
    ```
  }];
  let arguments = (ins Dist_Direction:$direction,
                       Dist_Payload:$payload,
                       Dist_NonNegativeI64:$stage,
                       Dist_NonNegativeI64:$microbatch,
                       Dist_NonNegativeI64:$peer);
  let assemblyFormat = "$direction $payload `stage` $stage `microbatch` "
                       "$microbatch `peer` $peer attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getStageIndex() { return getStageAttr().getInt(); }
    int64_t getMicrobatchIndex() { return getMicrobatchAttr().getInt(); }
    int64_t getPeerRank() { return getPeerAttr().getInt(); }
    /// Whether this rank holds `stage` (a send or its wait), not the peer.
    bool holdsStage() { return getDirection() != Direction::Recv; }
  }];
}

#endif // PCC_DIST_OPS
