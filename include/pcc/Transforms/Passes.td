//===- Passes.td - pcc's passes ----------------------------*- tablegen -*-===//

#ifndef PCC_TRANSFORMS_PASSES
#define PCC_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def CheckStaticShapes : Pass<"pcc-check-static-shapes", "::mlir::func::FuncOp"> {
  let summary = "Checks that every tensor has a static shape";
  let description = [{
    Code generation plans every buffer at compile time, so every value in the
    function must be a ranked tensor of static shape with an element type
    the targets support. Fails naming the operation (its ONNX node) that
    produces the first offending value.
  }];
}

def BoundIndices : Pass<"pcc-bound-indices", "::mlir::func::FuncOp"> {
  let summary = "Bounds the positions a step reads from its inputs and constants";
  let description = [{
    A gather reads its indices as positions along an axis
    (IndexingOpInterface), and one out of range either fails the run with
    no word of where or, once tensor parallelism splits the axis (a
    vocabulary-parallel embedding masks the rows a rank does not hold),
    reads zeros and gives wrong results without failing. This pass finds
    both before a step runs:

    - An integer argument whose every element reaches the indices of such
      an op (through reshapes, transposes, broadcasts, concatenations and
      widening casts) gets `graph.index_bound`, the smallest extent it
      indexes, and `graph.index_node`, that op's ONNX node. Later passes
      keep argument attributes, the targets write both into the ABI's
      tables, and the runtime checks an input against them before a run,
      naming the input, the element, its value, the node and the bound.
    - Constant indices out of range (a position table shorter than the
      sequence `--shape` asked for) fail the compile, naming the node.

    It runs on the steps as imported (a generation build's as derived),
    before any pass pads or splits the axes the indices index.
  }];
}

def SelectTrainable : Pass<"pcc-select-trainable", "::mlir::func::FuncOp"> {
  let summary = "Decides which initializers a training step updates";
  let description = [{
    Marks `trainable` the float initializers (`graph.weight`) that are the
    model's parameters, and only those: exporters also store masks, rotary
    tables and scalars as float initializers, and training those changes
    the model after the first step. In order:

    1. What the exporter recorded (`exported_as`, the dynamo exporter's
       `InputSpec.kind`): a parameter is trainable, a buffer or constant
       tensor is not.
    2. Otherwise a structural rule: the initializer is followed through
       ops that combine it only with other constants until it meets the
       model's activations, and judged by the role it plays there
       (`DifferentiableOpInterface::getOperandRole`). An operand of a
       matrix product, a table looked up by the inputs, a normalization's
       scale or bias, a per-feature scale or bias, and an additive table
       that does not feed a softmax (a learned position embedding) are
       parameters; scalars, additive masks feeding a softmax, fixed
       sinusoidal position tables (each column a unit sine or cosine of
       the position), tables that multiply activations (rotary cos/sin),
       values selected by a condition and anything never combined with the
       inputs are constants.
    3. `freeze` (a regular expression over initializer names) removes,
       `trainable` adds; `freeze` wins.

    Warns when an annotated export holds unannotated initializers that the
    rule trains (the exporter folded parameters: transposed copies, slices)
    and when one trainable initializer is the per-feature scale or bias of
    several layers (the exporter merged equal parameters of a fresh model).
    With `remarks`, emits one remark per initializer with the decision and
    its reason (how `pcc compile` reports them).
  }];
  let options = [
    Option<"trainable", "trainable", "std::string", /*default=*/"\"\"",
           "Regular expression of initializer names to train regardless">,
    Option<"freeze", "freeze", "std::string", /*default=*/"\"\"",
           "Regular expression of initializer names not to train">,
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark with each initializer's decision">,
  ];
}

def DeriveGeneration : Pass<"pcc-derive-generation", "::mlir::ModuleOp"> {
  let summary = "Derives prefill and decode steps over a paged KV cache";
  let description = [{
    Replaces the module's forward, a causal language model imported at one
    sequence of the longest length (`[1, S]` token ids to `[1, S, V]`
    logits) with its attention fused (`pcc-fuse-attention`), by the two
    steps a server runs, public functions named by `pcc.entry`: `prefill`
    of `max-tokens` tokens and `decode` of `decode-tokens` (0:
    `max-batch`). Each takes the tokens' ids `[1, N]`, their positions
    `[N]`, the rows of their sequences in the block table (`slots`, -1 for
    a padding token) `[N]`, the block table `[max-batch, ceil(S /
    kv-block)]` and the indices of the tokens whose logits it returns
    `[R]`, and returns those logits `[R, V]`: R is `max-batch` for the
    prefill, the decode's tokens for the decode.

    Each `graph.attention` (causal, without a bias) becomes a
    `graph.cache_write` of the step's keys and of its values (after rotary
    embeddings, before grouped-query attention repeats them) into caches
    `[blocks, kv heads, kv-block, features]`, function arguments marked
    `graph.state = "kv_cache.<i>.key"` (and `.value`) and `graph.cache`,
    which both steps share, and a `graph.paged_attention` of the step's
    queries over them.

    The token dimension is followed from the ids through the ops' sharding
    rules, never by names: an operand that does not depend on the ids but
    runs along the tokens (a position table, rotary cos/sin) is gathered at
    the tokens' positions, and every op but attention must treat the
    tokens one by one. Ops that only the returned logits need (the LM head,
    the last norm) run on those rows alone. A forward where this fails (no
    causal attention, an op that mixes tokens, a mask input) is refused at
    the op, in one line.
  }];
  let options = [
    Option<"maxBatch", "max-batch", "int64_t", /*default=*/"8",
           "Sequences at once (the block table's rows)">,
    Option<"maxTokens", "max-tokens", "int64_t", /*default=*/"256",
           "The prefill step's tokens">,
    Option<"decodeTokens", "decode-tokens", "int64_t", /*default=*/"0",
           "The decode step's tokens and logits (0: max-batch; a pipeline "
           "decodes a group of its sequences per stage)">,
    Option<"kvBlock", "kv-block", "int64_t", /*default=*/"16",
           "Positions per cache block">,
    Option<"kvBlocks", "kv-blocks", "int64_t", /*default=*/"0",
           "Blocks in the cache (0: every sequence at the longest length)">,
  ];
  let dependentDialects = ["::pcc::graph::GraphDialect",
                           "::mlir::func::FuncDialect"];
}

def DeriveEvaluation : Pass<"pcc-derive-evaluation", "::mlir::ModuleOp"> {
  let summary = "Adds an evaluation step that shares a training step's state";
  let description = [{
    Beside the module's training step (the public function with a
    `graph.loss` result, after `pcc-optimizer`), adds the step that
    evaluates the loss at the current parameters: a public function
    `eval` of the ops the loss depends on (the forward and the loss, none
    of the backward or the update), reading the same inputs and the same
    `graph.state` arguments, which it only reads. The training step becomes
    entry point `train` and the new one `eval` (`pcc.entry`): one program of
    two steps, which share one copy of the parameters, laid out alike by
    the later passes (a pipeline's evaluation follows the training step's
    stages).
  }];
  let dependentDialects = ["::pcc::graph::GraphDialect",
                           "::mlir::func::FuncDialect"];
}

def Untie : Pass<"pcc-untie", "::mlir::ModuleOp"> {
  let summary = "Gives each consumer of a shared initializer its own copy";
  let description = [{
    A freshly initialized model exported with the dynamo exporter's default
    optimizer has its equal parameters merged into one initializer (all the
    LayerNorm weights of a fresh GPT-2 become one tensor), and training
    updates them as one. For every float initializer (`graph.weight`) whose
    name matches `regex` and that more than one operation consumes, each
    consumer gets its own `graph.weight` with the same value, named
    `<initializer>@<consumer's ONNX node>` (with `#k`, the consumer's
    position among the initializer's consumers, where the node has no name
    or several consumers share it); the shared initializer goes away.

    ```mlir
    %w = graph.weight "ln.weight" dense<1.0> : tensor<4xf32>
    // consumed by node_layer_norm and node_layer_norm_1 becomes
    %w0 = graph.weight "ln.weight@node_layer_norm" dense<1.0> : tensor<4xf32>
    %w1 = graph.weight "ln.weight@node_layer_norm_1" dense<1.0> : tensor<4xf32>
    ```

    Runs before `pcc-select-trainable`, which then judges and trains each
    copy on its own; checkpoints name the copies. Fails on an invalid
    regular expression; warns when it matches no initializer used more than
    once.
  }];
  let options = [
    Option<"regex", "regex", "std::string", /*default=*/"\"\"",
           "Regular expression of initializer names to untie">,
  ];
}

def AttachLoss : Pass<"pcc-attach-loss", "::mlir::func::FuncOp"> {
  let dependentDialects = ["::pcc::graph::GraphDialect"];
  let summary = "Appends the causal-LM cross-entropy loss as a result";
  let description = [{
    Builds, as Graph ops, the mean cross-entropy of `logits[:, :-1]` against
    `labels[:, 1:]`, computed stably (`log_softmax`, then the negated mean
    of the label's log-probability), and returns it as a rank-0 result named
    `loss` and marked `graph.loss`. The tensors are found by type, not by name: the labels are the
    first int64 argument of rank 2, the logits the first float result of
    rank 3; `labels` and `logits` name them explicitly (ONNX names).
    Expressing the loss in Graph ops lets later passes transform it (a
    vocabulary-parallel cross-entropy, the loss on the last stage).

    With `pieces` N > 1 the loss is the sum of N parts over consecutive
    runs of positions, each made from its own copy of the ops that compute
    the logits row by row from an earlier `[batch, seq, features]` value
    (the LM head: products with weights, reshapes, element-wise ops with
    weights), divided by the count of predicted positions. The logits then
    leave the results, and no op makes them for the whole sequence: a
    pipeline can place the pieces of a heavy head on consecutive stages.
    `pieces = 0` chooses N from `chunks` by the cost model (`target`,
    `machine`, `cost-table`, `dtype`). A piece runs the head's ops on a
    part of the rows but reads their weights whole, and adds its part of
    the loss. For each N, the forward's other ops in program order (in
    blocks, between the places where no more crosses than the head's
    input) and the N pieces are cut into `chunks` contiguous chunks as
    evenly as they allow. A count pays where its slowest chunk is within
    1% of the fastest any count gives. N is 1 where one piece pays; else
    the smallest count that pays with pieces of at most a sixth of a mean
    chunk, which leaves the partition room to even the stages around them
    (or the smallest that pays, where none that fine does).
  }];
  let options = [
    Option<"labels", "labels", "std::string", /*default=*/"\"\"",
           "ONNX name of the labels input (default: first int64 [B, T] input)">,
    Option<"logits", "logits", "std::string", /*default=*/"\"\"",
           "ONNX name of the logits output (default: first float rank-3 "
           "output)">,
    Option<"pieces", "pieces", "int64_t", /*default=*/"1",
           "Parts of the sequence the LM head and the loss are computed in "
           "(0: as many as `chunks` needs)">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"1",
           "With pieces=0: the pipeline chunks (stages, or ranks x "
           "virtual stages) the step is cut into">,
    Option<"costTable", "cost-table", "std::string", /*default=*/"\"\"",
           "JSON table of measured throughputs">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Target whose default throughputs the cost model uses">,
    Option<"machine", "machine", "std::string", /*default=*/"\"\"",
           "Machine description (a name pcc ships or a JSON file) whose "
           "throughputs the cost model uses instead">,
    Option<"dtype", "dtype", "std::string", /*default=*/"\"f32\"",
           "The products' element type, for the machine's throughput">,
  ];
}

def Autodiff : Pass<"pcc-autodiff", "::mlir::func::FuncOp"> {
  let dependentDialects = ["::pcc::graph::GraphDialect"];
  let summary = "Reverse-mode differentiation of the loss";
  let description = [{
    Differentiates the result marked `graph.loss` with respect to every
    `graph.weight` marked `trainable` (by `pcc-select-trainable`) that
    reaches the loss through a differentiable path. Walks the
    ops in reverse and asks each op on the path for its vector-Jacobian
    product through `DifferentiableOpInterface`; gradients of values used in
    several places (a tied embedding and LM head) accumulate. Integer and
    boolean values carry no gradient, nor do the exponents of `graph.pow`
    (model constants, as in PyTorch). Each differentiated parameter becomes
    a state argument of the step (`graph.state = "<name>"`, `graph.init =
    <its value>`) and its gradient is appended as a result marked
    `graph.grad = <the argument's index>`; the backward ops carry the unit
    attribute `graph.backward`. Only the forward
    values the backward ops read stay alive (the emitter's buffer planning
    frees the rest).
  }];
}

def DelayWeights : Pass<"pcc-delay-weights", "::mlir::func::FuncOp"> {
  let summary = "Trains on the weights one update old (PipeDream-2BW)";
  let description = [{
    PipeDream-2BW's rule, with a delay of one step: the forward and the
    backward read each trained parameter's previous version, and the
    gradients they make update the newest,
    `W(t+1) = W(t) - lr * grad f_t(W(t-1))`, with `W(-1) = W(0)`. Every
    state argument with a gradient result gets a second state argument,
    named `<parameter>.2bw.previous`, marked `graph.state_of` the
    parameter and starting at the parameter's `graph.init`; the
    parameter's readers read it instead, and the step returns the
    parameter as its update. Runs after `pcc-autodiff` and before
    `pcc-optimizer`, which then updates the parameter itself; refuses a
    function whose parameters already have updates. The previous version
    is marked `graph.previous_version`, so that a schedule without a flush
    (`2bw`) can give the next step's forwards the newest weights.
  }];
}

def Optimizer : Pass<"pcc-optimizer", "::mlir::func::FuncOp"> {
  let dependentDialects = ["::pcc::graph::GraphDialect"];
  let summary = "Appends the optimizer update of every trained parameter";
  let description = [{
    For every state argument that has a gradient result (`graph.grad`), adds
    the optimizer's moments as state arguments initialized to zero and
    marked `graph.state_of = <the parameter's index>`, and returns the
    updated parameter and moments marked `graph.update = <index of the
    state argument>`. A step counter (the state `pcc.step`) drives AdamW's
    bias correction. Refuses a function whose parameters already have
    updates. Semantics follow PyTorch:
    AdamW with decoupled weight decay (`p *= 1 - lr * wd`, then
    `p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`); SGD with
    optional momentum and L2 weight decay.

    `clip-grad` X scales every gradient the update reads by
    min(1, X / (norm + 1e-6)), norm the L2 norm of all of them together
    (PyTorch's `clip_grad_norm_`); the gradients the step returns are
    those before clipping. Sharding makes the norm's sums of squares
    partial over the axes that split a gradient, so a split parameter
    counts by all its shards and a replicated one once.

    `lr-schedule` makes the learning rate a function of the steps already
    taken, s (the state `pcc.step`, which a checkpoint keeps, so a resumed
    run continues the schedule): `constant`; or `linear` / `cosine`,
    lr * (s + 1) / W for s < W = `warmup-steps`, then from lr down to
    `min-lr` over steps W..N = `decay-steps` (cosine: min + (lr - min) *
    (1 + cos(pi * (s - W) / (N - W))) / 2), and `min-lr` after N. The step
    then returns the rate it used, as the output `learning_rate`.

    The rate's values are no constants of the step but f32 scalar state
    that the options only initialize: `pcc.lr`, and, where the schedule
    reads them, `pcc.warmup_steps`, `pcc.min_lr` and `pcc.decay_steps`.
    Checkpoints keep them (as PyTorch's optimizer state keeps its groups'
    rates), and `pcc run --lr`, `--min-lr`, `--warmup-steps` and
    `--decay-steps` change them when a run resumes, without a new build.
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"adamw\"",
           "adamw or sgd">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1",
           "Weight decay (default: 0.01 for adamw, 0 for sgd)">,
    Option<"momentum", "momentum", "double", /*default=*/"0",
           "SGD momentum">,
    Option<"clipGrad", "clip-grad", "double", /*default=*/"0",
           "Clip the gradients' global L2 norm to this (0: no clipping)">,
    Option<"lrSchedule", "lr-schedule", "std::string",
           /*default=*/"\"constant\"", "constant, linear or cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Steps of linear warmup">,
    Option<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "The step at which the decay reaches min-lr">,
    Option<"minLr", "min-lr", "double", /*default=*/"0",
           "The learning rate at the end of the decay">,
  ];
}

def HoistUpdates : Pass<"pcc-hoist-updates", "::mlir::func::FuncOp"> {
  let summary = "Moves each state update to just after what it reads";
  let description = [{
    A training step's optimizer appends its updates after the whole
    backward, where each reads a gradient made long before, out of the
    caches by then. This pass moves every op that only feeds state updates
    (its results read only by such ops or returned as `graph.update`
    results: the optimizer's, not the backward's, whose gradients a step
    returns too), in order, up to just after the last op it depends on:
    the producers of its operands and, for a state argument it reads that
    a result replaces, every other reader of that state, also through
    views (so that the update stays the state's last reader and is
    computed in its buffer). An update then runs right after its
    parameter's gradient is final, on the gradient still in the caches,
    and the gradient's buffer is free from there on. Only ops without side
    effects move, and only earlier: the step computes the same ops on the
    same values (pcc-fuse, after, groups them in their new order, and a
    C++ compiler may contract that loop into other fused multiply-adds).
  }];
}

def PrintShardingRules : Pass<"pcc-print-sharding-rules",
                               "::mlir::func::FuncOp"> {
  let summary = "Reports each op's factor-based sharding rule as a remark";
  let description = [{
    For every op implementing `ShardingRuleOpInterface`, emits a remark at
    the op with its rule in Shardy's notation, e.g.
    `([i, j, k], [k, l]) -> ([i, j, l]) {i=2, j=3, k=4, l=5} reduction={k}`
    (compound dimensions as their factors run together, `reduction={k:max}`
    for reductions other than sums, `need_replication={...}` and
    `permutation={...}`). An op without a rule gets the remark `no sharding
    rule: replicated`, which is what partitioning does with it. A debugging
    aid and the way lit tests pin the rules.
  }];
}

def PadVocabulary : Pass<"pcc-pad-vocabulary", "::mlir::func::FuncOp"> {
  let dependentDialects = ["::pcc::graph::GraphDialect"];
  let summary = "Pads vocabularies that tensor parallelism does not divide";
  let description = [{
    Megatron's vocabulary padding: a table looked up by token ids
    (`graph.gather` on a `graph.weight`) whose looked-up extent `tp` does not
    divide gets zero rows up to the next multiple of `tp`, and so does every
    weight that mirrors it (an untied LM head, its bias). Values computed
    from the padded extent keep it; a softmax or log-softmax over it reads
    the lowest float in the padding (so the loss ignores it); results are
    cut back to the real extent. Padded weights record `dist.padding =
    [dimension, real extent]`, which the targets and the runtime use so that
    weights files, checkpoints, gradients and dumps never show the padding.
    A table is padded only when every use of the padded extent is one the
    pass knows to be safe (lookups, label picks, matmul outputs,
    element-wise ops, transposes, softmaxes, results); otherwise it is left
    as it is. Runs before autodiff, so the backward follows the padded
    forward.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", /*default=*/"1",
           "Ranks of the tensor-parallel axis">,
  ];
}

def ShardStrategy : Pass<"pcc-shard-strategy", "::mlir::ModuleOp"> {
  let dependentDialects = ["::pcc::dist::DistDialect"];
  let summary = "Decides how tensor parallelism splits each parameter";
  let description = [{
    Creates `dist.mesh @mesh(tp = N)` and marks each parameter that tensor
    parallelism splits with `dist.sharding` (a state argument's attribute,
    or a `graph.weight`'s), from the graph's structure alone: parameters
    are decided in the order the step first uses them, each by trying
    every dimension that `tp` divides (and the groups a fused projection
    cut into equal parts needs) and keeping the split that forces no
    all-gather of an activation and communicates least. This reproduces
    Megatron-LM's plan: a matmul pair around an element-wise op splits the
    first by columns and the second by rows; Q/K/V projections split by
    heads and the output projection by rows; grouped-query KV heads split
    when `tp` divides them (where they divide `tp`, pcc-replicate-kv-heads
    first repeats them on the ranks that read them, so that they split); token embeddings and the LM head split by vocabulary;
    norms stay whole. `shard` overrides it per initializer name:
    `REGEX=col` (split the dimension the first use keeps), `REGEX=row` (the
    one it reduces or looks up), `REGEX=rep` (whole); several separated by
    `;`. Attention heads that `tp` neither divides nor is a multiple of are
    an error naming the reshape, its extent and the `tp` values that work.
    With `remarks`, reports each decision.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", /*default=*/"1",
           "Ranks of the tensor-parallel axis">,
    Option<"shard", "shard", "std::string", /*default=*/"\"\"",
           "Overrides: REGEX=col|row|rep, separated by ';'">,
    Option<"sequenceParallel", "sequence-parallel", "bool",
           /*default=*/"false",
           "Judge splits as sequence parallelism will place them">,
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark with each parameter's layout">,
  ];
}

def ReplicateKVHeads : Pass<"pcc-replicate-kv-heads", "::mlir::func::FuncOp"> {
  let summary = "Gives each tensor-parallel rank a copy of its key/value head";
  let description = [{
    Where `tp` is a multiple of an attention's grouped key/value heads G
    (and divides its query heads H), the heads cannot split over `tp`: each
    rank would need a part of one head. vLLM replicates each key/value head
    on the `tp / G` ranks whose query heads read it instead, and so does this
    pass: the key and value of each such `graph.attention` are taken at
    heads `[0, 0, .., 1, 1, ..]` (a `graph.gather` along the head axis, each
    head `tp / G` times), so that the attention reads `tp` key/value heads
    that split one per rank, with the KV cache that a generation step
    derives from them; a training step's gradient of each copy flows back
    to its head through the gather's adjoint (a sum). Attention whose heads
    `tp` divides is left as it is.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", /*default=*/"1",
           "Ranks of the tensor-parallel axis">,
  ];
  let dependentDialects = ["::pcc::graph::GraphDialect"];
}

def PropagateSharding : Pass<"pcc-propagate-sharding", "::mlir::ModuleOp"> {
  let dependentDialects = ["::pcc::dist::DistDialect"];
  let summary = "Gives every value of the step a layout over one mesh axis";
  let description = [{
    Lays the step out over mesh axis `axis` (`tp` unless given; a mesh of
    several axes is laid out one axis at a time, tp before dp, each on
    the program that partitioning over the ones before it left). From the
    `dist.sharding` of the parameters and of the arguments that name the
    axis (data parallelism's batched inputs), walks the step in program order
    (forward, backward and optimizer) and gives each op the layouts its
    operands must arrive in (`dist.operands`) and its results leave in
    (`dist.results`): the op splits the factor of its sharding rule that
    its operands are split along (the cheapest when they disagree), a whole
    operand meeting a split one is cut locally, partial results are
    combined where they are first used. Optimizer state, gradients and
    updates take their parameter's layout; outputs of a training step (and
    of any step with `outputs-split`) stay split, those of an inference
    build are made whole, and so is an output that an earlier axis split
    along another dimension (a tensor of the runtime splits one). Ops that
    read and make only whole values carry no annotation.

    With `zero` (ZeRO over a data-parallel axis), a parameter's optimizer
    state is split along its first dimension the axis divides, so each
    rank updates its block of the parameter and the update is gathered
    back (stage 1, which all-reduces the gradient); from stage 2 the
    gradient is reduce-scattered onto that block instead and returned
    split, never whole.

    With `sequence-parallel` (Megatron's sequence parallelism), partial
    sums may instead be reduce-scattered onto their token dimension (the
    second to last): the activations between tensor-parallel regions
    (norms, residual adds) are then split along the sequence, and gathered
    again before the next column-parallel matmul, so an all-gather and a
    reduce-scatter replace each all-reduce.
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"tp\"",
           "The mesh axis to lay out">,
    Option<"sequenceParallel", "sequence-parallel", "bool",
           /*default=*/"false",
           "Split activations between tensor-parallel regions by tokens">,
    Option<"outputsSplit", "outputs-split", "bool", /*default=*/"false",
           "Let an inference step's outputs stay split">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage over the axis: 1 splits the optimizer state, 2 the "
           "gradients too">,
  ];
}

def Partition : Pass<"pcc-partition", "::mlir::ModuleOp"> {
  let dependentDialects = ["::pcc::dist::DistDialect"];
  let summary = "Rewrites a step with layouts into every rank's program";
  let description = [{
    Makes each value its local block and each op a computation on local
    operands (through `ShardingRuleOpInterface::partition`), inserting
    collectives where a value's layout differs from what its user reads:
    `dist.all_reduce` for partial results, `dist.all_gather` for split
    values needed whole, `dist.all_slice` where a whole value meets a split
    one. Extents in attributes and result types become local. Split
    parameters' arguments and results get local types and keep their
    `dist.sharding`; a split `graph.weight` is read through its
    `dist.all_slice`, which targets load as the rank's block. Only the
    layouts over `axis` are applied; those over other axes stay for their
    own partitioning.
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"tp\"",
           "The mesh axis to partition over">,
  ];
}

def DataParallel : Pass<"pcc-data-parallel", "::mlir::ModuleOp"> {
  let dependentDialects = ["::pcc::dist::DistDialect"];
  let summary = "Splits the batch of the step over a data-parallel axis";
  let description = [{
    Adds the axis `dp` of `dp` ranks to `dist.mesh @mesh` (outermost: the
    mesh is dp x pp x tp, so that a stage's tensor-parallel ranks stay
    neighbours) and marks every graph input with a batch dimension (the
    leading extent of the first input, shared by the others) split along
    it over `dp`. `pcc-propagate-sharding{axis=dp}` and
    `pcc-partition{axis=dp}` then make each replica compute its share of
    the batch: the parameters stay whole, so their gradients are partial
    sums over `dp`, combined where each is final, and the loss, a mean over
    the batch, is combined as a mean. A batch that `dp` does not divide is
    an error naming the input.

    With `zero=3` (parameters held split over `dp`, gathered where read),
    every value the backward reads that is computed from parameters alone
    (a transposed weight) is computed again for the backward, so that the
    backward gathers the parameter again and the forward's gathered copy
    is free once the forward has read it.
  }];
  let options = [
    Option<"dp", "dp", "int64_t", /*default=*/"1",
           "Ranks of the data-parallel axis">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "The ZeRO stage the step is laid out for">,
  ];
}

def Microbatch : Pass<"pcc-microbatch", "::mlir::func::FuncOp"> {
  let dependentDialects = ["::pcc::graph::GraphDialect"];
  let summary = "Rewrites the forward to compute one microbatch";
  let description = [{
    Microbatching is sharding the batch dimension in time. The batch is the
    leading extent of the first graph input; every input with that leading
    extent is sliced, and its batch dimension is followed through each op's
    sharding rule, so that result types (reshape targets among them) and
    extents held in attributes become those of one microbatch, through the
    same partition hooks that tensor parallelism uses. A constant that
    spans the batch (a mask the exporter expanded to it) is cut to its
    first block when all blocks are equal. Sliced arguments and joined
    results are marked `dist.batch_dim`, the function
    `dist.microbatches = M`. Runs on the forward, before the loss is
    attached: the loss is then a microbatch's mean, and the pipeline
    averages the microbatches' losses and gradients. An op that combines
    the examples of the batch, and an M that does not divide the batch,
    are errors naming the node.
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Slices of the batch">,
    Option<"defaulted", "defaulted", "bool", /*default=*/"false",
           "Whether `microbatches` is the default (one per pipeline rank), "
           "which an error then names as such">,
  ];
}

def PipelineSchedule : Pass<"pcc-pipeline-schedule", "::mlir::ModuleOp"> {
  let dependentDialects = ["::pcc::dist::DistDialect"];
  let summary = "Builds a static pipeline schedule";
  let description = [{
    Adds `dist.schedule @schedule` (renamed if the module already has one;
    in a module of several pipelined steps, one `@<step>_schedule` per step,
    which the step names with `dist.step_schedule`)
    with every pipeline rank's ordered computations and transfers for
    `ranks` ranks, `virtual-stages` model chunks per rank (virtual stage `s`
    on rank `s % ranks`) and `microbatches` microbatches. `kind`:

    - `gpipe`: every forward, then every backward.
    - `1f1b` (PipeDream-Flush): rank `r` runs `min(ranks - r - 1,
      microbatches)` warm-up forwards, then alternates a forward and a
      backward, then drains the backwards; at most `ranks - r` microbatches
      are in flight.
    - `interleaved` (Megatron-LM's interleaved 1F1B, `virtual-stages` >= 2,
      `microbatches` a multiple of `ranks`): the same over the rank's
      chunks, `ranks` microbatches per chunk at a time, with
      `(ranks - r - 1) * 2 + (virtual-stages - 1) * ranks` warm-up steps.
    - `zb-h1` (zero bubble H1): backwards split into B (input gradient) and
      W (weight gradient); a list scheduler driven by `costs` (unit times
      when absent) runs B as soon as its gradient arrives, else F while
      fewer than `ranks - r` microbatches are in flight (1F1B's memory),
      else a pending W, which so fills 1F1B's bubbles.
    - `2bw` (PipeDream-2BW, at least `ranks - 1` microbatches): 1F1B over
      two steps' microbatches without a flush between them (`steps = 2`),
      rank `r` leading by its `ranks - r - 1` warm-up forwards into the
      next step; `pcc-lower-schedule` cuts it into the calls of a run.
    - `chimera` (Chimera's bidirectional pipelines, an even number of ranks
      and of microbatches): the even microbatches flow down (stage `s` on
      rank `s`), the odd ones up (stage `s` on rank `ranks - 1 - s`,
      `pipelines = 2`). Two list schedulers over simulated time make
      candidate orders: forwards first (the oldest forward whose input has
      arrived while its stage `s` has fewer than 1F1B's `ranks - s`
      chunks in flight on the rank, else the oldest backward whose
      gradient has), and backwards first with no cap. The
      one the timed simulation finishes first is kept (at a tie, the one
      with fewer chunks in flight). Each rank sends to a peer in the order
      the peer receives (transfers between two ranks match in order).

    A receive comes right before the computation that reads it, a send right
    after the one that produces it; stages on the same rank need none.
    `ranks=0` takes the size of axis `pp` of `dist.mesh @mesh`. `costs`
    (F, B and W times per virtual stage), `stash-bytes` (per virtual stage)
    and `base-bytes` (per rank) are recorded on the schedule for
    `pcc-verify-schedule`. Bad options are one-line errors.
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved, zb-h1, 2bw or chimera">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Microbatches per step">,
    Option<"virtualStages", "virtual-stages", "int64_t", /*default=*/"1",
           "Model chunks per pipeline rank">,
    Option<"ranks", "ranks", "int64_t", /*default=*/"0",
           "Pipeline ranks (0: the size of axis pp of dist.mesh @mesh)">,
    ListOption<"costs", "costs", "double",
               "F, B and W times of each virtual stage">,
    ListOption<"stashBytes", "stash-bytes", "int64_t",
               "Bytes a microbatch's forward keeps, per virtual stage">,
    ListOption<"baseBytes", "base-bytes", "int64_t",
               "Bytes held throughout, per rank">,
  ];
}

def VerifySchedule : Pass<"pcc-verify-schedule", "::mlir::ModuleOp"> {
  let summary = "Checks static pipeline schedules and records their bubble";
  let description = [{
    For every `dist.schedule`, fails at the offending action unless every F
    and B (and every W, when any W appears) of every virtual stage and
    microbatch runs exactly once on the rank that holds the stage; each
    action comes after what it consumes in its rank's order (F after the
    previous stage's F or the receive of its activation, B after its F and
    the next stage's B or the receive of its gradient, W after its B, a send
    after the computation it sends); between every two ranks the sends and
    the receives name the same transfers in the same order; and a
    simulation in which sends never block and receives do finishes (a
    deadlock names every blocked rank and its action).

    Then times the schedule with its `costs` (unit F, B and W when absent;
    a B of a schedule that does not split backwards costs B + W; transfers
    are free) and writes back `makespan` and `bubble_fraction` (1 -
    sum(busy) / (ranks * makespan)) on the schedule, and `busy`,
    `peak_stashed` (microbatch-chunks whose F ran and whose last backward
    action has not) and, with `stash_bytes` or `base_bytes`, `peak_bytes`
    on each rank. With `remarks`, summarizes them in a remark.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark with each schedule's bubble and peaks">,
  ];
}

def PipelineStages : Pass<"pcc-pipeline-stages", "::mlir::ModuleOp"> {
  let dependentDialects = ["::pcc::dist::DistDialect"];
  let summary = "Assigns every op of the step to a pipeline stage";
  let description = [{
    Cuts the step into `pp` x `virtual-stages` contiguous stages and adds the
    `pp` axis to `dist.mesh @mesh` (outermost). The forward (the ops that
    compute outputs and the loss, in program order) is cut where the cost
    model (CostOpInterface's flops and bytes at the target's throughput,
    or a measured `cost-table`) balances the stages, each paying for the
    tensors that cross into it, so cuts prefer small boundaries; `split`
    names the ONNX nodes after which stages end instead. Each backward op
    runs on the latest stage that has the forward values it reads and that
    does not follow a stage whose backward values it reads; optimizer ops
    run on every stage holding their parameter, so a parameter used on
    several stages (a tied embedding and LM head) keeps a copy and an
    optimizer on each. Ops computed from parameters and constants alone
    get no stage: each stage recomputes what it needs. Writes `dist.stage`
    (forward and backward ops), `dist.stages` (optimizer ops, and state
    arguments: their holders) and the function's `dist.num_stages`.

    A module of several steps (a generation build's `prefill` and
    `decode`, which share the weights and the KV cache) is cut once: the
    first step by its costs (or `split`), and every other so that each op
    runs on a stage that holds the weights and state it reads, as the
    first step placed them (each stage starting at the first op that reads
    something no earlier stage holds). Where that cannot be, the step is
    refused.
  }];
  let options = [
    Option<"pp", "pp", "int64_t", /*default=*/"1", "Pipeline ranks">,
    Option<"virtualStages", "virtual-stages", "int64_t", /*default=*/"1",
           "Stages per pipeline rank (interleaved schedules)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"\"",
           "The schedule the stages will run (gpipe, 1f1b, interleaved): "
           "the balanced cuts then move while its simulated makespan "
           "shrinks; empty: balance alone">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"0",
           "Microbatches of that schedule">,
    Option<"split", "split", "std::string", /*default=*/"\"\"",
           "ONNX nodes after which a stage ends, comma-separated">,
    Option<"costTable", "cost-table", "std::string", /*default=*/"\"\"",
           "JSON table of measured throughputs">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Target whose default throughputs the cost model uses">,
    Option<"machine", "machine", "std::string", /*default=*/"\"\"",
           "Machine description (a name pcc ships or a JSON file) whose "
           "throughputs the cost model uses instead">,
    Option<"dtype", "dtype", "std::string", /*default=*/"\"f32\"",
           "The products' element type, for the machine's throughput">,
  ];
}

def PipelineOutline : Pass<"pcc-pipeline-outline", "::mlir::ModuleOp"> {
  let dependentDialects = ["::pcc::dist::DistDialect"];
  let summary = "Moves each pipeline stage into functions";
  let description = [{
    For a step marked by `pcc-pipeline-stages`, creates per virtual stage a
    forward and (training) a backward function, which a schedule's action
    calls once per microbatch, and per pipeline rank an optimizer function,
    called once after the flush. Values computed from parameters and
    constants alone are recomputed in each function that needs them.
    Arguments and results say what they are: `dist.input = k` (this
    microbatch's slice of graph input k), `dist.state = k` (state argument
    k of the step), `dist.value = n` (a tensor one function makes and
    another reads: a stage boundary, an activation kept for the backward),
    `dist.output = k` (this microbatch's part of result k), `dist.grad = k`
    (a stage's contribution to gradient result k; the optimizer's argument
    is the whole gradient) and `dist.update = k`. With `split-backward`
    (zero-bubble schedules), the ops `pcc-pipeline-stages` marked
    `dist.weight_grad` go to a third function per stage, the W that runs
    apart from the input gradient B. The step function stays for
    `pcc-lower-schedule` to read its signature.
  }];
  let options = [
    Option<"splitBackward", "split-backward", "bool", /*default=*/"false",
           "Give each stage's weight gradient its own function (W)">,
  ];
}

def LowerSchedule : Pass<"pcc-lower-schedule", "::mlir::ModuleOp"> {
  let dependentDialects = ["::pcc::dist::DistDialect",
                           "::pcc::graph::GraphDialect"];
  let summary = "Compiles a verified schedule into each rank's step";
  let description = [{
    Replaces the pipelined step by one public function per pipeline rank
    (`dist.rank = r`, and the step's `pcc.entry` where it is one of several
    entry points, each lowered with the schedule its `dist.step_schedule`
    names): the rank's actions of the module's `dist.schedule`
    in order, each compute action a `func.call` of an outlined stage
    function (`pcc-pipeline-outline`) on one microbatch, each transfer a
    `dist.send` or `dist.recv` of the tensors crossing that stage boundary
    (values that skip stages are relayed by the ranks between). Graph
    inputs are sliced per microbatch (`dist.batch_dim`), outputs joined
    along it, the loss averaged. Gradients accumulate over microbatches on
    the stage that computes them: from the second microbatch on, a stage
    function's calls go to its accumulating variant (`<name>_accumulate`,
    made once beside it), which takes the partial sums as arguments after
    its own and returns each gradient added to its partial sum, the sum made
    where the gradient is made. Each such result is marked
    `dist.accumulates = j` (its partial sum is argument j) and lives in that
    argument's buffer: the caller gives both the same buffer, so that the
    products add themselves to the partial sum (beta 1), an embedding's
    scatter adds its rows into it, neither with a buffer of its own, and
    nothing is copied. After the flush, the ranks holding a
    parameter receive the other stages' parts of its gradient (a tied
    embedding and LM head), sum them in rank order so every copy stays
    equal, and call their optimizer, which divides the sums by the
    microbatch count first (pcc-fuse folds the division into the update's
    loop; the gradients the step returns are divided apart, and their code
    runs only when the caller asks for them). The optimizer's update of a
    state is marked `dist.accumulates = j` too (the state is its argument
    j) where every call of it allows
    (`mayWriteIntoOperand`: the caller returns the result as that state's
    update and reads the state no more after the call): it writes the
    weights and moments in place instead of into results that the step
    would copy back at its end. A rank's
    function takes every graph input and the state it holds, and returns
    the outputs, gradients and updates it makes, with the step's
    attributes; state the forward updates in place (a KV cache's writes)
    is written through the argument the rank passes its stage, and no
    function returns it.

    A schedule of two steps without a flush (`2bw`) lowers to four
    functions per rank: the step with a flush (the fill, then the drain),
    and the entry points `<entry>_start` (the fill: the forwards that lead
    into a step), `<entry>_overlap` (ends a step and starts the next, on
    the batch it takes) and `<entry>_finish` (ends the last step). What a
    call leaves for the next (the stash of the forwards run ahead, the
    activations received for them, the batch) is state the runs keep
    (`graph.cache`, named `<step>.in_flight.rank<r>...`); the next step's
    forwards read the newest weights in place of the versions one update
    old (`graph.previous_version`).
  }];
}

def MixedPrecision : Pass<"pcc-mixed-precision", "::mlir::func::FuncOp"> {
  let summary = "Runs matrix products on 16-bit floats, everything else in f32";
  let description = [{
    `--dtype bf16`: each op with the `LowPrecisionProduct` trait (matmul,
    gemm) whose operands are f32 reads them cast to `dtype` and makes its
    result in `dtype`, which is cast back to f32 for its readers. The target
    accumulates the product in f32 and rounds its result once. Element-wise
    ops, normalizations, softmax, the loss and the optimizer stay in f32, as
    do the parameters (f32 master weights: their gradients come back through
    the casts' VJPs as f32) and the optimizer state: the policy of
    torch.autocast. Runs before autodiff, so that the backward's products
    are narrowed as their forward's are (each VJP of a product is a product
    of the narrowed values). Products already on narrower types are left
    alone.
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"bf16\"",
           "The products' element type: bf16 or f16">,
  ];
  let dependentDialects = ["::pcc::graph::GraphDialect"];
}

def NarrowStash : Pass<"pcc-narrow-stash", "::mlir::func::FuncOp"> {
  let summary = "With 16-bit products, the backward reads activations in 16 bits";
  let description = [{
    Runs on a training step after pcc-mixed-precision and pcc-autodiff. Each
    f32 forward activation that a backward op reads and that the forward
    also holds in 16 bits (the value it was cast up from, or a cast of it
    down for a product) is read as that 16-bit copy, cast up where the
    backward reads it (a cast marked `graph.backward`). The forward then
    keeps the 16-bit copy alone for its backward. Reading a value cast up
    from 16 bits this way changes nothing; reading a cast-down copy rounds
    an element-wise derivative's input to 16 bits, as torch.autocast's
    16-bit activations do. Values held only in f32 (the residual stream, a
    normalization's input) stay f32.
  }];
  let dependentDialects = ["::pcc::graph::GraphDialect"];
}

def OverlapCollectives
    : Pass<"pcc-overlap-collectives", "::mlir::func::FuncOp"> {
  let summary = "Starts each collective as early as its operand allows, "
                "and completes it where its result is needed";
  let description = [{
    The targets start a collective (`dist.all_reduce`, `all_gather`,
    `reduce_scatter`) where it stands and complete it at its `dist.wait`,
    which this pass places just before the first op that reads its result
    (views of the result follow the wait), or communicates, or calls: the
    ops in between run while it travels. Partitioning puts each collective right before its
    first reader; this pass moves it, with the ops it depends on since the
    last op that communicates, above the ops it does not depend on, so that,
    for example, the backward's all-reduce of a layer's input gradient
    overlaps the GEMM of its weight gradient. The ops keep their relative
    order otherwise, so the results are unchanged. A collective
    never moves above an earlier op that communicates or calls: every rank
    of a group keeps one order of its collectives and transfers. The
    collective's result is then alive from its new place, which costs
    memory for the time it travels.

    An all-gather of a function argument (a parameter ZeRO 3 holds split)
    goes the other way: it moves down, with the ops computed from its
    result alone (a transposed weight), to just before the first op that
    reads them otherwise, and is not hoisted, so that the gathered copy is
    alive only while the step reads it. Each such gather but the first then
    starts where the one before it stands, before that one's readers: it
    travels while they compute (a prefetch of one, as FSDP's), and at most
    two gathered copies are alive beyond those still read.
  }];
  let dependentDialects = ["::pcc::dist::DistDialect"];
}

def Recompute : Pass<"pcc-recompute", "::mlir::ModuleOp"> {
  let summary = "The backward recomputes the forward's activations";
  let description = [{
    With `mode=full`, each training step (a function with gradient
    results) keeps only its blocks' inputs for the backward, which
    recomputes the rest, as Megatron's full recomputation does. Blocks are
    found in the forward's dataflow: the positions of the forward where the
    fewest bytes cross (no more than the median of the local minima: a
    transformer's residual stream between layers, and between attention
    and MLP) are checkpoints, and the forward between two consecutive ones
    (and within one pipeline stage) is a block. A value that a block makes,
    that no later block reads and that the backward reads on the same
    stage, is recomputed: its op and those it needs back to kept values
    are cloned before the backward's first reader, marked `graph.backward`.
    The forward before the first checkpoint and after the last (embedding;
    head and loss) is kept. With `mode=selective`, only the values of a
    block at least twice the largest value crossing a checkpoint (the
    residual stream) and made by no product
    with a parameter (rank 2 or more) are recomputed: attention's scores
    and probabilities and the MLP's activation in a transformer, Megatron's
    selective recomputation.

    With `mode=auto`, the pass chooses, rank by rank, which of those values
    to recompute so that the rank's predicted peak fits `memory-budget`
    bytes: while it does not, the value that frees the most bytes (its own,
    less the operands that would be kept for it instead, times the
    microbatches the `schedule` keeps in flight on its stage) per flop made
    again. The peak is a pipelined rank's held bytes plus its stages'
    stash in flight, as the schedule's simulation gives it; without stages,
    what the buffer plan of the step holds (`getPlannedBytes`: its
    arguments, its results but the state updates, and its planned
    workspace), asked again after each round of choices: while the step
    the pass made still plans above the budget, it chooses more, up to
    three rounds.

    The pass runs on the laid-out mesh (sizes are shards) and after the
    stage partition, whose `dist.stash_bytes` and `dist.stage_costs` it
    updates. The module gets `graph.recompute = {ops, flops, bytes}`: the
    ops cloned, the flops they add per step, and the bytes the backward no
    longer reads from the forward; with stages, `stages` has them per
    stage; with auto, `budget` and `over`, the ranks still above it and
    their predicted peaks. `mode=none` changes nothing.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"none\"",
           "none, selective, full or auto">,
    Option<"memoryBudget", "memory-budget", "int64_t", /*default=*/"0",
           "With auto: the bytes each rank may hold">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "The pipeline schedule the stages will run">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Microbatches of that schedule">,
    Option<"virtualStages", "virtual-stages", "int64_t", /*default=*/"1",
           "Model chunks per pipeline rank">,
    Option<"costTable", "cost-table", "std::string", /*default=*/"\"\"",
           "JSON table of measured throughputs">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Target whose default throughputs the cost model uses">,
    Option<"machine", "machine", "std::string", /*default=*/"\"\"",
           "Machine description whose throughputs the cost model uses">,
    Option<"dtype", "dtype", "std::string", /*default=*/"\"f32\"",
           "The products' element type, for the machine's throughput">,
  ];
  let dependentDialects = ["::pcc::graph::GraphDialect"];
}

def BucketCollectives
    : Pass<"pcc-bucket-collectives", "::mlir::func::FuncOp"> {
  let summary = "Joins gradient all-reduces into buckets";
  let description = [{
    One all-reduce per parameter pays a collective's latency as many times
    per step as there are parameters; data-parallel trainers join the
    gradients into buckets of a few megabytes instead (PyTorch DDP's 25
    MB). This pass takes the sum all-reduces over exactly the mesh axes
    `axes` (`dp` unless given; several separated by `,`), in the order
    their inputs are ready, and joins consecutive ones into buckets of at
    most `bucket-bytes` (a larger tensor is a bucket of its own; 0 turns
    the pass off): the inputs are flattened and concatenated, one
    all-reduce sums the bucket, and slices give each member its part
    back. The bucket's all-reduce stands right after its last input is
    made, so that it starts once its last gradient is final; a bucket
    closes where the next input would be ready only after a member's result
    is read. The sums are the same, element by element.
  }];
  let options = [
    Option<"axes", "axes", "std::string", /*default=*/"\"dp\"",
           "The mesh axes of the all-reduces to join">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"26214400",
           "The most bytes of one bucket">,
  ];
  let dependentDialects = ["::pcc::dist::DistDialect",
                           "::pcc::graph::GraphDialect"];
}

def FuseAttention : Pass<"pcc-fuse-attention", "::mlir::func::FuncOp"> {
  let summary = "Forms graph.attention from the ops exporters write";
  let description = [{
    Finds scaled dot-product attention in the dataflow around each softmax
    over the last axis of a rank-4 value, whatever its nodes are named:
    `softmax(s * (q . k^T) + bias) . v`, with the scale on the scores
    (multiplied or divided, before or after the bias) or its square root on
    each of `q` and `k`, any number of added or subtracted biases and
    `where(mask, scores, -inf)` masks, PyTorch's guard
    `where(isnan(p), 0, p)` on the probabilities, and grouped-query
    attention's repeated key/value heads (an expand of a unit axis between
    two reshapes), which the op reads unrepeated. A constant causal mask
    (0 on and below the diagonal, -inf or below -1e4 above it) becomes the
    op's `causal` flag. Values that anything else reads (probabilities a
    model returns) are left as they are. Runs first, before the training
    passes, so that the backward is attention's own (FlashAttention's,
    recomputing the probabilities from the log-sum-exp). With
    `max-head-dim`, attention whose query/key or value heads are wider is
    left as it is (a target's kernels hold a head in fixed tiles).
  }];
  let options = [
    Option<"maxHeadDim", "max-head-dim", "int64_t", /*default=*/"0",
           "Leave attention with wider heads unfused (0: any width)">,
  ];
  let dependentDialects = ["::pcc::graph::GraphDialect"];
}

def AttentionLayout : Pass<"pcc-attention-layout", "::mlir::func::FuncOp"> {
  let summary = "Reads graph.attention's operands in the layout their "
                "producers write";
  let description = [{
    Exporters transpose the [B, T, H, D] queries, keys and values that the
    projections make to attention's [B, H, T, D], and its output back. A
    transpose that only attention reads costs nothing (the kernels read it
    in place); the one back from the output copies an activation. Where
    a transpose of dimensions 1 and 2 is the output's only reader, this
    pass sets the op's `sequence_first`, which the kernels write in place:
    the transposes that make its operands for it alone are dropped, and
    the other operands get one (which it reads in place). Code generation
    runs it after the parallelize pipeline: reverse mode, generation and
    the layout passes take attention as [B, H, T, D], and a training step's
    attention_grad, which reads the output too, keeps the transpose.
  }];
  let dependentDialects = ["::pcc::graph::GraphDialect"];
}

def Fuse : Pass<"pcc-fuse", "::mlir::func::FuncOp"> {
  let summary = "Groups element-wise ops into graph.fusion loop nests";
  let description = [{
    Gathers chains of element-wise ops (the `Elementwise` trait: their
    result element i depends only on their operands' elements at i) into
    `graph.fusion` ops, each of which a target runs as one loop nest (one
    kernel on a GPU): the values between the ops never reach memory. From
    each op that is not yet grouped, latest first, the group takes in the
    producers of its operands that have the group's shape, as long as every
    other reader of a producer comes after the group's last op (the fusion
    takes that op's place, so nothing moves); such a producer's value
    becomes a further result. Operands of other shapes are read broadcast;
    a one-element producer read only by the group is computed in it.
    A bias, GELU and residual chain, a mask and scale before a softmax, a
    loss gradient and an optimizer's update of one parameter each become
    one loop nest. Before grouping, element-wise expressions take cheaper
    equal forms: `1 + tanh(z)` (tanh-approximated GELU) becomes
    `2 sigmoid(2z)` where nothing else reads the tanh; `s - x`, where `s`
    is a `graph.scatter_elements_add` into zeros of one update a row read
    only there (a cross-entropy's labels), becomes `s + (-x)`. A scatter
    that adds a few rows or elements into a large sum this way (those
    labels, a tied embedding's rows into its head's gradient) moves to
    just before its add, which joins no group: the buffer plan then has it
    add into the sum's buffer, and the add has no code. Runs last, on the
    program that a target emits.

    It then decides what a target computes inside another op's loop, and
    says so on the ops, where a test can see it: a fusion that only a
    softmax (or log-softmax) over its last axis reads gets
    `graph.row_prologue` (the softmax computes it row by row, so
    attention's scaled and masked scores never reach memory); with
    `epilogues`, a product (`graph.gemm`, or a `graph.matmul` of one
    product) gets `graph.epilogue` where the element-wise op or fusion
    reading its result can run on each block of the product as it is done:
    its only reader through views, right after it (only views or data
    movement that products read in place between, no wait for a
    collective), over the product's elements, every operand read at an
    offset affine in the row and column, no result returned.
  }];
  let options = [
    Option<"epilogues", "epilogues", "bool", /*default=*/"false",
           "Mark GEMM epilogues (the target runs element-wise code inside "
           "its products)">,
  ];
  let dependentDialects = ["::pcc::graph::GraphDialect"];
}

#endif // PCC_TRANSFORMS_PASSES
