//===- ShardingSolver.h - Tensor layouts over one mesh axis -----*- C++ -*-===//
//
// The engine that the sharding passes share. It walks a function in program
// order and gives every value a layout over one axis of the mesh (whole,
// split along one dimension, or partial), choosing for every op which
// factor of its sharding rule to split from its operands' layouts, and
// counting the communication that the choices imply. The strategy pass runs
// it to try each way to split a parameter; the propagation pass runs it
// once, with every parameter decided, and records the result in the IR.
//
// A mesh of several axes is laid out one axis at a time, major to minor
// (data parallelism's `dp`, then tensor parallelism's `tp`): each axis's
// layouts are solved on the program that partitioning over the axes before
// it left, so an axis splitting a dimension that an earlier one split
// splits each earlier block (`#dist.sharding` lists the dimension's axes
// major to minor), and a value's `#dist.sharding` gathers every axis's
// layout.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TRANSFORMS_SHARDING_SHARDINGSOLVER_H
#define PCC_TRANSFORMS_SHARDING_SHARDINGSOLVER_H

#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <optional>

namespace pcc::sharding {

using ReductionKind = graph::ShardingRule::ReductionKind;

/// A value's layout over the split axis: whole on every rank, split along
/// `dim` (viewed as [groups, n], each rank holding its block of every
/// group's n), or partial results still to be combined by `kind`.
struct Layout {
  int64_t dim = -1;
  int64_t groups = 1;
  bool partial = false;
  ReductionKind kind = ReductionKind::Sum;

  static Layout split(int64_t dim, int64_t groups = 1) {
    return {dim, groups, false, ReductionKind::Sum};
  }
  static Layout partialOf(ReductionKind kind) { return {-1, 1, true, kind}; }
  bool isReplicated() const { return dim < 0 && !partial; }
  bool isSplit() const { return dim >= 0; }
  bool operator==(const Layout &o) const {
    return dim == o.dim && (dim < 0 || groups == o.groups) &&
           partial == o.partial && (!partial || kind == o.kind);
  }
  bool operator!=(const Layout &o) const { return !(*this == o); }
};

/// What the solver chose for one op: the split factor (-1: none) and the
/// layouts its operands must arrive in and its results leave in.
struct OpPlan {
  int64_t factor = -1;
  llvm::SmallVector<Layout> operands, results;
};

/// A split that a dimension could not carry, for the strategy's diagnostics
/// and its choice of groups.
struct Obstacle {
  mlir::Operation *op = nullptr;
  /// The factor's extent, and whether a factor after others in a compound
  /// dimension (a fused projection cut into parts) made groups necessary.
  int64_t extent = 0;
  int64_t suggestedGroups = 0;
  bool atReshape = false;
};

class Solver {
public:
  /// What to do with a root (a parameter) that has no layout yet.
  enum class Unseeded {
    Replicate, ///< keep it whole
    Stop,      ///< stop at its first use, for the strategy to decide it
    Adopt,     ///< give it whatever its first use wants (a trial's guess)
  };

  /// Lays out `func` over mesh axis `axis` of `shards` ranks.
  Solver(mlir::func::FuncOp func, llvm::StringRef axis, int64_t shards);

  /// The roots: parameters (state arguments that have a gradient, or float
  /// graph.weight ops of inference builds) whose layout the strategy
  /// decides. Optimizer state follows its parameter.
  llvm::ArrayRef<mlir::Value> getRoots() const { return roots; }
  /// The name of a root (its initializer's).
  llvm::StringRef getRootName(mlir::Value root) const;

  void setSeed(mlir::Value root, Layout layout) { seeds[root] = layout; }
  /// An attribute of a root: on its argument, or on its graph.weight op.
  mlir::Attribute getRootAttr(mlir::Value root, llvm::StringRef name) const;
  mlir::func::FuncOp getFunc() const { return func; }
  /// Seeds the roots whose layout over the axis the IR states
  /// (`dist.sharding` naming the axis); fails, naming the root, on one that
  /// does not split a dimension over the axis into whole blocks.
  mlir::LogicalResult seedStatedLayouts();
  /// Gives argument `arg` (a graph input, not a root) `layout` whenever a
  /// walk starts: data parallelism's batch split.
  void setArgumentLayout(mlir::BlockArgument arg, Layout layout) {
    argumentLayouts[arg] = layout;
  }
  /// Whether outputs other than state (logits) may leave the step split
  /// over the axis (the runtime joins them), rather than whole: true for
  /// training steps, and for any step once `keepOutputsSplit` is set. A
  /// result that an earlier axis split along another dimension is made
  /// whole over this one: the runtime's tensors split one dimension.
  void setKeepOutputsSplit(bool on) { keepOutputsSplit = on; }
  /// ZeRO over this axis (data parallelism's): from stage 1 a parameter's
  /// optimizer state is split along its first dimension the axis divides
  /// (the update is computed on that block, and the updated parameter
  /// gathered back); from stage 2 its gradient is too (reduce-scattered
  /// instead of all-reduced, and returned split).
  void setZeroStage(int64_t stage) { zeroStage = stage; }
  /// Sequence parallelism: activations between tensor-parallel regions are
  /// split along their token dimension (the second to last); partial sums
  /// are reduce-scattered onto it and gathered back before the next split
  /// region.
  void setSequenceParallel(bool on) { sequenceParallel = on; }
  /// The token dimension of `v` that sequence parallelism splits, or -1.
  int64_t tokenDim(mlir::Value v) const;
  /// Makes `op` produce its first result in `layout` (a split its rule
  /// allows), whatever its operands: propagation's backward adoption.
  void pin(mlir::Operation *op, Layout layout) { pinned[op] = layout; }
  void unpin(mlir::Operation *op) { pinned.erase(op); }
  void clearSeed(mlir::Value root) { seeds.erase(root); }
  std::optional<Layout> getSeed(mlir::Value root) const;

  struct Outcome {
    /// With Unseeded::Stop: the root whose first use stopped the walk.
    mlir::Value stoppedAt;
    mlir::Operation *stopOp = nullptr;
    unsigned stopOperand = 0;
    /// All-gathers forced where layouts disagree, and bytes communicated.
    int64_t conflicts = 0;
    double commBytes = 0;
    llvm::SmallVector<Obstacle> obstacles;
  };
  /// Walks the whole step once, roots without a seed whole (propagation).
  Outcome run();

  /// The strategy's walk, in steps: `startWalk` begins the forward, and
  /// each `walkToUndecided` goes on from where the last one stopped, to the
  /// first use of a root not decided yet (nothing stopped at: the end).
  /// `decide` then gives that root its layout, and the next call resumes at
  /// the op it stopped at. The whole walk visits each op once.
  void startWalk();
  Outcome walkToUndecided();
  void decide(mlir::Value root, Layout layout);
  /// What the op the walk stopped at wants of `root` (what Adopt gives).
  Layout wantedAtStop(mlir::Value root);
  /// Tries each of `candidates` for `root`, where the walk stopped, and
  /// returns each one's outcome: conflicts, bytes and obstacles from there
  /// to where the trials' layouts rejoin (every value still to be read,
  /// and every root decided on the way, laid out alike in all of them) or
  /// to the end. Past that point the trials cannot differ, so comparing
  /// these outcomes is comparing whole walks, at the cost of the region a
  /// parameter's layout reaches: a layer, not the model.
  llvm::SmallVector<Outcome> compareAtStop(mlir::Value root,
                                           llvm::ArrayRef<Layout> candidates);

  Layout getLayout(mlir::Value v);
  const OpPlan *getPlan(mlir::Operation *op) const;
  int64_t getShards() const { return shards; }
  llvm::StringRef getAxis() const { return axis; }

  /// The layout of a root's dimension `dim` seen at its first use: the
  /// kind of the factor it maps to there (col: parallel, row: reduction).
  std::optional<graph::ShardingRule::FactorKind>
  kindAtFirstUse(mlir::Value root, Layout layout);

private:
  enum class Step { Next, Stop, End };
  /// Clears the layouts and lays out or pends the roots for a new walk.
  void reset(Unseeded mode);
  /// Visits one op of a walk in `mode`.
  Step step(mlir::Operation &op, Unseeded mode, bool forwardOnly, Outcome &out);
  /// Visits the movement ops that the walk left pending on `root`, once it
  /// has a layout, in program order.
  void visitChain(mlir::Value root, Outcome &out);
  void visit(mlir::Operation *op, Unseeded mode, Outcome &out);
  void visitReturn(mlir::func::ReturnOp ret, Outcome &out, bool forwardOnly);
  /// Counts the communication of bringing `v` from `from` to `to`.
  void account(mlir::Value v, Layout from, Layout to, Outcome &out,
               bool atReturn = false);
  const graph::ShardingRule &ruleOf(mlir::Operation *op);
  /// The root a value derives from through movement ops, if undecided.
  mlir::Value pendingRoot(mlir::Value v) const;
  /// Pushes a wanted layout of `v` back through movement ops to its root.
  std::optional<Layout> pushBack(mlir::Value v, Layout wanted);
  /// Forward layout of a pending movement op's result once its root is set.
  Layout resolve(mlir::Value v);

  // Writes to the walk's state go through these; during a trial they are
  // journaled, and the journal undone after it.
  void setLayout(mlir::Value v, Layout l);
  void setPlan(mlir::Operation *op, OpPlan plan);
  void setPending(mlir::Value v, mlir::Value root);
  void setAdopted(mlir::Value root, Layout l);
  void rollback(size_t mark);
  /// The forward's index of the last op reading `v`, or of the last op
  /// reading what a root's movement ops make of it.
  size_t lastUse(mlir::Value v);

  struct Undo {
    enum class Kind : uint8_t { Layout, Plan, Pending, Adopted } kind;
    mlir::Value value;
    mlir::Operation *op = nullptr;
    bool had = false;
    Layout layout;
    mlir::Value root;
    OpPlan plan;
  };
  bool journaling = false;
  llvm::SmallVector<Undo> journal;

  mlir::func::FuncOp func;
  std::string axis;
  int64_t shards;
  llvm::DenseMap<mlir::Value, Layout> argumentLayouts;
  bool keepOutputsSplit = false;
  int64_t zeroStage = 0;
  /// With ZeRO: the layout of a parameter's optimizer state (and, from
  /// stage 2, of its gradient), when the axis divides a dimension of it.
  std::optional<Layout> stateLayout(mlir::Value param) const;
  /// The layout in which the optimizer and the return read the gradient of
  /// `param`: the parameter's, or with ZeRO 2 its optimizer state's.
  Layout gradientLayout(mlir::Value param);
  /// The incremental walk's position in forwardOps, and its outcome.
  size_t cursor = 0;
  Outcome walkOut;
  llvm::DenseMap<mlir::Operation *, size_t> forwardIndex;
  llvm::DenseMap<mlir::Value, size_t> lastUses;
  /// Each root's movement ops in program order (what the walk may pend).
  llvm::DenseMap<mlir::Value, llvm::SmallVector<mlir::Value>> chains;
  llvm::SmallVector<mlir::Value> roots;
  llvm::DenseMap<mlir::Value, mlir::Value> followRoot; ///< moments -> param
  /// Of followRoot's, the parameters' versions one update old (2bw).
  llvm::DenseSet<mlir::Value> versions;
  /// Gradients the step returns -> their parameter: the optimizer reads
  /// them in the parameter's layout.
  llvm::DenseMap<mlir::Value, mlir::Value> gradientOf;
  llvm::DenseMap<mlir::Value, Layout> seeds;
  llvm::DenseMap<mlir::Operation *, Layout> pinned;
  llvm::DenseMap<mlir::Value, Layout> layouts;
  llvm::DenseMap<mlir::Operation *, OpPlan> plans;
  llvm::DenseMap<mlir::Operation *, graph::ShardingRule> rules;
  /// Values computed by movement ops from a root not yet decided.
  llvm::DenseMap<mlir::Value, mlir::Value> pending;
  /// Roots decided during this run by Adopt.
  llvm::DenseMap<mlir::Value, Layout> adopted;
  /// Every root, by its name (a root's membership test too).
  llvm::DenseMap<mlir::Value, llvm::StringRef> rootNames;
  /// The step's ops in program order, and those of its forward (the
  /// terminator last), which the strategy's trials walk.
  llvm::SmallVector<mlir::Operation *> stepOps, forwardOps;
  /// Parameters and what movement ops make of them: never resharded when
  /// an activation can move instead.
  llvm::DenseSet<mlir::Value> parameterLike;
  bool sequenceParallel = false;
  /// Extents of token dimensions (sequence, batch x sequence), from the
  /// token ids; empty when the step has none.
  llvm::SmallVector<int64_t, 2> tokenExtents;
};

/// The factor of `rule` that `plan` splits, found from the layouts of its
/// operands and results (-1 when nothing is split), and its groups.
std::pair<int64_t, int64_t> findSplitFactor(const graph::ShardingRule &rule,
                                            const OpPlan &plan, int64_t shards);

/// Attribute names: a seed or an argument's layout (`dist.sharding`), and
/// the layouts propagation chose for an op's operands and results.
using dist::kOperandsAttr;
using dist::kResultsAttr;
using dist::kShardingAttr;
/// The tensor-parallel axis and the mesh the passes create.
using dist::kMeshName;
inline constexpr llvm::StringLiteral kTpAxis = dist::kTensorAxis;

/// `base` (a #dist.sharding of @mesh, or null: whole) with its layout over
/// `axis` replaced by `layout`: a split adds the axis to the dimension's
/// axes, minor to those already there.
dist::ShardingAttr toAttr(mlir::MLIRContext *context, llvm::StringRef axis,
                          Layout layout, int64_t rank,
                          dist::ShardingAttr base = {});
/// The layout a #dist.sharding gives over `axis` (whole where it does not
/// name it); fails where the axis splits two dimensions, or splits one and
/// leaves partial results.
mlir::FailureOr<Layout> fromAttr(dist::ShardingAttr attr, llvm::StringRef axis);
/// Whether `attr` names `axis`, in a dimension or among its partial axes.
bool namesAxis(dist::ShardingAttr attr, llvm::StringRef axis);
/// Whether `attr` names any axis (else it says the value is whole).
bool namesAnyAxis(dist::ShardingAttr attr);

/// Bytes of a whole tensor.
int64_t byteSize(mlir::Type type);

/// `collective` applied to `v` with dimension `dim` moved outermost (where
/// the communicator's blocks are), and the result moved back.
mlir::Value
alongOutermost(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
               int64_t dim,
               llvm::function_ref<mlir::Value(mlir::Value)> collective);

} // namespace pcc::sharding

#endif // PCC_TRANSFORMS_SHARDING_SHARDINGSOLVER_H
