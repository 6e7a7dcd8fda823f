//===- ProgramEmitter.cpp - Graph dialect to C++ for every target ---------===//
//
// Lowers a program of Graph ops on static tensors to straight-line C++ (or
// CUDA C++), op by op, on the shared foundation of the targets: the
// ProgramCallGraph orders its functions, a BufferPlan per function places
// every value, LoopNest and ScalarExpr give element-wise ops, reductions and
// data movement their loops, AbiTables the exported tables, and the
// target's TargetHooks print them (C++ loops and pcc_kernels.h on the CPU,
// kernels, cuBLASLt and a device stream on CUDA). The entry
// is `<prefix>_model_run` (with one entry per pipeline rank, each is a
// static function that `<prefix>_model_run` picks by the rank's pipeline
// coordinate); every other function a static C++ function that its callers
// call with their buffers and the workspace after their own. For a
// training step, state arguments live in the weights table and the state
// updates are copied back into it once everything else is computed.
//
// This file emits the program and its functions, and what every op shares;
// the code of each family of ops is in Emit<Family>.cpp.
//
//===----------------------------------------------------------------------===//

#include "pcc/Target/ProgramEmitter.h"
#include "FunctionEmitter.h"

#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Target/ScalarExpr.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <map>
#include <memory>

using namespace mlir;
using namespace pcc;
using namespace pcc::detail;
using namespace pcc::graph;

/// `op` in words for a run that fails in it: its kind, its ONNX node and,
/// for one that reads positions, their extent.
static std::string describeErrorSite(Operation *op) {
  std::string site = op->getName().getStringRef().str();
  if (StringRef node = getNodeName(op->getLoc()); !node.empty())
    site += " node '" + node.str() + "'";
  if (auto indexing = dyn_cast<IndexingOpInterface>(op))
    site += " (indices into " + std::to_string(indexing.getIndexedExtent()) +
            " positions)";
  return site;
}

std::pair<int64_t, int64_t> FunctionEmitter::paddingOfArg(unsigned arg) {
  // Optimizer state is padded like its parameter.
  if (auto of = func.getArgAttrOfType<IntegerAttr>(arg, kStateOfAttr))
    arg = of.getInt();
  if (auto pad =
          func.getArgAttrOfType<DenseI64ArrayAttr>(arg, dist::kPaddingAttr))
    return {pad[0], pad[1]};
  return {-1, 0};
}

LogicalResult FunctionEmitter::collectInterface() {
  // The training contract (graph.state, graph.update, graph.grad) was
  // checked by the Graph dialect's verifier when the IR was verified, as it
  // is after parsing and after every pass; this maps it onto the ABI's
  // tables. An entry holds the inputs and state it reads and the outputs it
  // makes.
  Block &block = func.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  uint64_t holders = program.holders.lookup(func);
  for (auto [i, arg] : llvm::enumerate(block.getArguments())) {
    uint64_t readBy = arg.use_empty() ? 0 : holders;
    StringRef name = getStateName(func, i);
    auto sharding =
        func.getArgAttrOfType<dist::ShardingAttr>(i, dist::kShardingAttr);
    FailureOr<ShardFields> shard = mesh.getShardFields(
        func.getLoc(), sharding, mesh.getWholeShape(shapeOf(arg), sharding));
    if (failed(shard))
      return failure();
    if (name.empty()) {
      auto onnx = func.getArgAttrOfType<StringAttr>(i, kOnnxNameAttr);
      IndexBound bound;
      if (auto extent = func.getArgAttrOfType<IntegerAttr>(i, kIndexBoundAttr))
        bound.extent = extent.getInt();
      if (auto node = func.getArgAttrOfType<StringAttr>(i, kIndexNodeAttr))
        bound.node = node.str();
      FailureOr<int64_t> index = tables.addInput(
          program.entryPoints.lookup(func), func.getLoc(),
          onnx ? onnx.getValue().str() : "input_" + std::to_string(i),
          cast<RankedTensorType>(arg.getType()), *shard, readBy,
          std::move(bound));
      if (failed(index))
        return failure();
      argInput.push_back(*index);
      argWeight.push_back(-1);
      continue;
    }
    auto init = func.getArgAttrOfType<ElementsAttr>(i, kInitAttr);
    if (!init ||
        (!isa<DenseElementsAttr>(init) && !graph::getStoredBytes(init)))
      return func.emitError("state '")
             << name << "': " << hooks.getTargetName() << " needs a dense "
             << kInitAttr << " value";
    WeightEntry entry{name.str(), init,
                      func.getArgAttr(i, kCacheAttr) ? WeightKind::Cache
                                                     : WeightKind::State};
    entry.localType = cast<RankedTensorType>(arg.getType());
    entry.padding = paddingOfArg(i);
    entry.holders = readBy;
    entry.shardAxes = shard->axes;
    entry.shardDim = shard->dim;
    entry.shardGroups = shard->groups;
    entry.shardOuterAxes = shard->outerAxes;
    FailureOr<int64_t> index =
        tables.addWeight(func.getLoc(), std::move(entry));
    if (failed(index))
      return failure();
    argInput.push_back(-1);
    argWeight.push_back(*index);
  }

  for (unsigned k = 0; k < ret.getNumOperands(); ++k) {
    if (std::optional<unsigned> state = getStateIndex(func, k, kUpdateAttr)) {
      resultRole.push_back(Role::StateUpdate);
      resultIndex.push_back(argWeight[*state]);
      continue;
    }
    resultRole.push_back(getStateIndex(func, k, kGradAttr) ? Role::Grad
                                                           : Role::Output);
    FailureOr<unsigned> key = addOutput(k);
    if (failed(key))
      return failure();
    resultIndex.push_back(*key);
  }
  return success();
}

bool FunctionEmitter::isOptionalResult(unsigned k) const {
  return isEntry && resultRole[k] == Role::Grad;
}

std::string FunctionEmitter::resultSlot(unsigned k) const {
  return (resultArray() + "[" + Twine(resultIndex[k]) + "]").str();
}

DenseMap<Operation *, SmallVector<unsigned>>
FunctionEmitter::getOptionalOnlyOps() {
  // The optional results each op feeds, from the last op up.
  DenseMap<Operation *, SmallVector<unsigned>> feeds;
  if (!isEntry ||
      llvm::none_of(llvm::seq<unsigned>(0, resultRole.size()),
                    [&](unsigned k) { return isOptionalResult(k); }))
    return feeds;
  Block &block = func.getBody().front();
  Operation *ret = block.getTerminator();
  for (Operation &op : llvm::reverse(block.without_terminator())) {
    // (Ops of no operands, constants and weights, only name a buffer.)
    if (op.getNumResults() == 0 || op.getNumOperands() == 0 ||
        !isa<graph::GraphDialect>(op.getDialect()) ||
        op.hasTrait<graph::OpTrait::UpdatesInPlace>() || mayReturnEarly(&op))
      continue;
    SmallVector<unsigned> ks;
    bool onlyOptional = true;
    for (OpOperand &use : op.getUses()) {
      if (use.getOwner() == ret && isOptionalResult(use.getOperandNumber())) {
        ks.push_back(use.getOperandNumber());
        continue;
      }
      auto it = feeds.find(use.getOwner());
      if (it == feeds.end()) {
        onlyOptional = false;
        break;
      }
      llvm::append_range(ks, it->second);
    }
    if (!onlyOptional || ks.empty())
      continue;
    llvm::sort(ks);
    ks.erase(llvm::unique(ks), ks.end());
    feeds[&op] = ks;
  }
  return feeds;
}

FailureOr<unsigned> FunctionEmitter::addOutput(unsigned k) {
  Value v = cast<func::ReturnOp>(func.getBody().front().getTerminator())
                .getOperand(k);
  // A gradient is named by its parameter.
  bool isGrad = resultRole[k] == Role::Grad;
  std::string name = "output_" + std::to_string(k);
  if (isGrad)
    name = getStateName(func, *getStateIndex(func, k, kGradAttr)).str();
  else if (auto onnx = func.getResultAttrOfType<StringAttr>(k, kOnnxNameAttr))
    name = onnx.getValue().str();
  // A split result's whole extents are the local ones times the shards.
  auto sharding =
      func.getResultAttrOfType<dist::ShardingAttr>(k, dist::kShardingAttr);
  SmallVector<int64_t> whole = mesh.getWholeShape(shapeOf(v), sharding);
  // Padding is cut from a split output when gathered: a gradient is
  // padded like its parameter.
  std::pair<int64_t, int64_t> pad{-1, 0};
  if (isGrad)
    pad = paddingOfArg(*getStateIndex(func, k, kGradAttr));
  else if (auto p = func.getResultAttrOfType<DenseI64ArrayAttr>(
               k, dist::kPaddingAttr))
    pad = {p[0], p[1]};
  if (pad.first >= 0)
    whole[pad.first] = pad.second;
  // A pipeline's entries list their outputs as the whole step does.
  auto order = func.getResultAttrOfType<IntegerAttr>(k, dist::kResultIndexAttr);
  FailureOr<ShardFields> shard =
      mesh.getShardFields(func.getLoc(), sharding, whole);
  if (failed(shard))
    return failure();
  return tables.addOutput(
      program.entryPoints.lookup(func), func.getLoc(), name, cast<RankedTensorType>(v.getType()), isGrad, *shard,
      order ? order.getInt() : int64_t(k), program.holders.lookup(func));
}

void FunctionEmitter::collectCalleeInterface() {
  // Argument and result attributes are the entry's business: only its
  // signature is the model's interface.
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    argInput.push_back(i);
    argWeight.push_back(-1);
  }
  for (unsigned k = 0; k < func.getNumResults(); ++k) {
    resultRole.push_back(Role::Output);
    resultIndex.push_back(k);
  }
}

void FunctionEmitter::collectUpdatedStates() {
  Operation *ret = func.getBody().front().getTerminator();
  for (auto [k, role] : llvm::enumerate(resultRole)) {
    if (role != Role::StateUpdate ||
        tables.getWeights()[resultIndex[k]].kind != WeightKind::State)
      continue;
    Value arg = func.getArgument(*getStateIndex(func, k, kUpdateAttr));
    if (ret->getOperand(k) != arg)
      program.updatedStates[arg] = resultIndex[k];
  }
}

/// Adds to `states` (Program::updatedStates) each argument of a function
/// that every call of it passes the same state of `states`.
static void propagateUpdatedStates(const ProgramCallGraph &graph,
                                   DenseMap<Value, int64_t> &states) {
  // Per callee argument: the state every call so far passed, or -1.
  DenseMap<Value, int64_t> passed;
  // Callers before their callees: a function's calls are all seen when
  // it is reached.
  for (func::FuncOp f : llvm::reverse(graph.getFunctions())) {
    if (!graph.isEntry(f))
      for (BlockArgument arg : f.getArguments())
        if (int64_t index = passed.lookup_or(arg, -1); index >= 0)
          states[arg] = index;
    for (auto call : f.getBody().front().getOps<func::CallOp>()) {
      func::FuncOp callee = graph.getCallee(call);
      for (auto [operand, arg] :
           llvm::zip(call.getOperands(), callee.getArguments())) {
        int64_t index = states.lookup_or(operand, -1);
        auto [it, inserted] = passed.try_emplace(arg, index);
        if (!inserted && it->second != index)
          it->second = -1;
      }
    }
  }
}

/// Whether `v` (an argument), or a view of it, is read as a product's B,
/// here or in a function it is passed to.
static bool feedsProductB(Value v, const ProgramCallGraph &graph) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen{v};
  while (!work.empty()) {
    Value x = work.pop_back_val();
    for (OpOperand &use : x.getUses()) {
      Operation *user = use.getOwner();
      SmallVector<Value> next;
      if (isa<MatMulOp, GemmOp>(user)) {
        if (use.getOperandNumber() == 1)
          return true;
      } else if (auto call = dyn_cast<func::CallOp>(user)) {
        next.push_back(
            graph.getCallee(call).getArgument(use.getOperandNumber()));
      } else if (isa<ViewLikeOpInterface, TransposeOp>(user)) {
        llvm::append_range(next, user->getResults());
      }
      for (Value n : next)
        if (seen.insert(n).second)
          work.push_back(n);
    }
  }
  return false;
}

void FunctionEmitter::collectPreparedStates() {
  Operation *ret = func.getBody().front().getTerminator();
  for (auto [k, role] : llvm::enumerate(resultRole)) {
    if (role != Role::StateUpdate)
      continue;
    Value arg = func.getArgument(*getStateIndex(func, k, kUpdateAttr));
    if (!program.updatedStates.count(arg) || !feedsProductB(arg, program.graph))
      continue;
    stateUpdateArg[ret->getOperand(k)] = arg;
    program.preparedStates[func].insert(program.updatedStates.lookup(arg));
  }
}

LogicalResult FunctionEmitter::emitConstants() {
  for (Operation &op : func.getBody().front()) {
    if (!isa<ConstantOp, WeightOp>(op))
      continue;
    Value v = op.getResult(0);
    auto weight = dyn_cast<WeightOp>(op);
    // A weight's value may view the model's external data file (written
    // to the weights file without a copy); a constant's is dense.
    ElementsAttr value =
        weight ? weight.getValue() : cast<ConstantOp>(op).getValue();
    if (!isa<DenseElementsAttr>(value) &&
        !(weight && graph::getStoredBytes(value)))
      return op.emitError()
             << hooks.getTargetName() << " needs dense constants";
    if (!weight && value.isSplat() &&
        value.getNumElements() > options.maxInlineElements) {
      // Autodiff creates large zero tensors: writing them to the weights
      // file would cost disk and load time for nothing. They get a
      // workspace buffer, which emitOp fills.
      splatsInWorkspace.insert(&op);
      continue;
    }
    std::string n = hooks.makeName("c");
    names[v] = n;
    external.insert(v);
    std::string t = type(v);
    // Small constants live in the code; parameters and large constants in
    // the weights file.
    if (!weight && value.getNumElements() <= options.maxInlineElements) {
      hooks.emitGlobal(
          llvm::formatv("static const {0} {1}_data[] = {{{2}};\n", t, n,
                        value.getNumElements()
                            ? getLiterals(cast<DenseElementsAttr>(value))
                            : "0")
              .str());
      declare(v, n, n + "_data");
      continue;
    }
    std::string wname =
        weight ? weight.getName().str()
               : "pcc.const." + std::to_string(tables.getWeights().size());
    WeightEntry entry{wname, value};
    entry.localType = cast<RankedTensorType>(v.getType());
    entry.holders = program.holders.lookup(func);
    if (weight)
      if (auto pad =
              weight->getAttrOfType<DenseI64ArrayAttr>(dist::kPaddingAttr))
        entry.padding = {pad[0], pad[1]};
    // A weight read only through its dist.all_slice: the table holds the
    // rank's block, which the runtime cuts from the whole tensor.
    Value loadedBlock;
    if (weight && v.hasOneUse())
      if (auto slice = dyn_cast<dist::AllSliceOp>(*v.getUsers().begin())) {
        entry.localType = cast<RankedTensorType>(slice.getType());
        entry.shardAxes = mesh.getAxesMask(slice.getAxes());
        entry.shardDim = slice.getDimAttr().getInt();
        entry.shardGroups = slice.getGroupsAttr().getInt();
        loadedSlices.insert(slice);
        loadedBlock = slice.getResult();
        names[loadedBlock] = n;
        external.insert(loadedBlock);
      }
    FailureOr<int64_t> index = tables.addWeight(op.getLoc(), std::move(entry));
    if (failed(index))
      return failure();
    constantIndex[v] = *index;
    if (loadedBlock)
      constantIndex[loadedBlock] = *index;
    declare(v, n, "w[" + std::to_string(*index) + "]");
  }
  return success();
}

void FunctionEmitter::declareBuffers(const BufferPlan &plan) {
  Block &block = func.getBody().front();
  for (auto [i, arg] : llvm::enumerate(block.getArguments())) {
    std::string n = "a" + std::to_string(i);
    names[arg] = n;
    if (argWeight[i] >= 0)
      declare(arg, n, "w[" + std::to_string(argWeight[i]) + "]");
    else
      declare(arg, n, (argArray() + "[" + Twine(argInput[i]) + "]").str());
  }
  for (Operation &op : block.without_terminator()) {
    for (Value v : op.getResults()) {
      if (external.contains(v))
        continue;
      std::string n = hooks.makeName("v");
      names[v] = n;
      if (plan.isView(v))
        declare(v, n,
                plan.getViewOffset(v)
                    ? "((char*)" + names[plan.getRoot(v)] + " + " +
                          std::to_string(plan.getViewOffset(v)) + ")"
                    : names[plan.getRoot(v)]);
      else if (std::optional<unsigned> k = plan.getResultSlot(v))
        declare(v, n, resultSlot(*k));
      else
        declare(v, n,
                "(ws + " + std::to_string(*plan.getWorkspaceOffset(v)) + ")");
    }
  }
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (std::optional<int64_t> offset = plan.getSnapshotOffset(k)) {
      std::string n = hooks.makeName("snap");
      declare(v, n, "(ws + " + std::to_string(*offset) + ")");
      updateSnapshots[k] = n;
    }
}

LogicalResult FunctionEmitter::emitOp(Operation *op) {
  {
    std::string comment;
    llvm::raw_string_ostream os(comment);
    os << op->getName().getStringRef() << " " << op->getLoc();
    hooks.emitComment(comment);
  }
  // An epilogue runs inside its product's call, a sum into which a product
  // or a scatter_add adds itself in place inside that op's.
  if (epilogueProduct.contains(op) || accumulatedSums.contains(op))
    return success();
  // A wait completes its collective; its result is the collective's.
  if (auto wait = dyn_cast<dist::WaitOp>(op)) {
    hooks.emitCollectiveWait(requestOf(wait.getCollective()));
    return success();
  }
  // Views have no code: they are their source's buffer.
  if (isa<ViewLikeOpInterface>(op) || isReadInPlace(op))
    return success();
  // Element-wise ops: one expression per element.
  if (op->getNumResults() == 1 && !isa<ConstantOp, WeightOp>(op)) {
    SmallVector<std::string> probe(op->getNumOperands(), "x");
    if (getScalarExpr(op, probe, hooks)) {
      SmallVector<Value> ins(op->getOperands());
      elementwise(op, ins, [&](ArrayRef<std::string> a) {
        return *getScalarExpr(op, a, hooks);
      });
      return success();
    }
  }
  // Any other op is its family's (FunctionEmitter.h).
  for (auto emitFamily :
       {&FunctionEmitter::emitElementwiseOp, &FunctionEmitter::emitProductOp,
        &FunctionEmitter::emitReductionOp, &FunctionEmitter::emitMovementOp,
        &FunctionEmitter::emitCommunicationOp,
        &FunctionEmitter::emitAttentionOp})
    if (std::optional<LogicalResult> emitted = (this->*emitFamily)(op))
      return *emitted;
  return op->emitError() << hooks.getTargetName() << " cannot lower '"
                         << op->getName() << "'";
}

void FunctionEmitter::emitResultCopies(const BufferPlan &plan) {
  // Outputs that are not computed in place are copied. Then the state
  // updates land, last, so that every read of a state (outputs and
  // gradients that alias one included) sees its old value.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    if (resultRole[k] == Role::StateUpdate)
      continue;
    std::string target = llvm::formatv("(({0}*){1}[{2}])", type(v),
                                       resultArray(), resultIndex[k])
                             .str();
    // A gradient goes out where the caller gave it a buffer.
    bool optional = isOptionalResult(k);
    if (optional)
      hooks.emitLine("if (" + resultSlot(k) + ") {");
    hooks.emitCopy(target, ptr(v), getTensorBytes(v.getType()),
                   /*mayAlias=*/true);
    if (optional)
      hooks.emitLine("}");
    // A called function's update of a prepared state, where its caller
    // gives it the state's buffer.
    if (!isEntry && stateUpdateArg.count(v) && !preparedUpdates.contains(v)) {
      emitPrepareUpdated(v, target);
      preparedUpdates.insert(v);
    }
  }
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (auto it = updateSnapshots.find(k); it != updateSnapshots.end())
      hooks.emitCopy(it->second, ptr(v), getTensorBytes(v.getType()),
                     /*mayAlias=*/false);
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    if (resultRole[k] != Role::StateUpdate)
      continue;
    std::string target =
        llvm::formatv("(({0}*)w[{1}])", type(v), resultIndex[k]).str();
    auto snapshot = updateSnapshots.find(k);
    std::string src =
        snapshot != updateSnapshots.end() ? snapshot->second : ptr(v);
    hooks.emitComment(
        ("state update '" + tables.getWeights()[resultIndex[k]].name + "'"));
    hooks.emitCopy(target, src, getTensorBytes(v.getType()),
                   /*mayAlias=*/true);
    if (stateUpdateArg.count(v) && !preparedUpdates.contains(v))
      emitPrepareUpdated(v, target);
  }
}

/// The argument of `func`, a called function, whose buffer its result `k`
/// is computed into (dist.accumulates) where that argument is a state that
/// every entry reaching `func` reads prepared (Program::preparedStates),
/// else null.
static Value getPreparedStateArg(const Program &program, func::FuncOp func,
                                 unsigned k) {
  auto into = func.getResultAttrOfType<IntegerAttr>(k, dist::kAccumulatesAttr);
  if (!into || into.getInt() < 0 ||
      into.getInt() >= int64_t(func.getNumArguments()))
    return {};
  Value arg = func.getArgument(unsigned(into.getInt()));
  auto it = program.updatedStates.find(arg);
  if (it == program.updatedStates.end())
    return {};
  for (func::FuncOp entry : program.graph.getEntries()) {
    if (!program.graph.getReachable(entry).contains(func))
      continue;
    auto read = program.preparedStates.find(entry);
    if (read == program.preparedStates.end() ||
        !read->second.contains(it->second))
      return {};
  }
  return arg;
}

bool FunctionEmitter::calleePrepares(func::CallOp call, unsigned k) const {
  return bool(getPreparedStateArg(program, program.graph.getCallee(call), k));
}

void FunctionEmitter::emitPrepareUpdated(Value update, StringRef pointer) {
  int64_t index = program.updatedStates.lookup(stateUpdateArg.lookup(update));
  hooks.emitComment("the prepared operands of '" +
                    tables.getWeights()[index].name + "', updated");
  hooks.emitPrepareWeight(index, pointer);
}

FailureOr<int64_t> FunctionEmitter::emit() {
  hooks.setBody(body);
  if (isEntry) {
    // Every entry's outputs are known: their keys become table indices.
    for (auto [k, role] : llvm::enumerate(resultRole))
      if (role != Role::StateUpdate)
        resultIndex[k] = tables.getOutputIndex(
            program.entryPoints.lookup(func), resultIndex[k]);
  } else {
    collectCalleeInterface();
  }
  if (failed(emitConstants()))
    return failure();
  gemmOperands.emplace(func);
  SmallVector<int64_t> writeBack;
  // A called function's result that the caller gives its argument's
  // buffer (a partial sum, dist.accumulates) is written back there too.
  for (auto [k, role] : llvm::enumerate(resultRole)) {
    auto into = func.getResultAttrOfType<IntegerAttr>(unsigned(k),
                                                      dist::kAccumulatesAttr);
    writeBack.push_back(role == Role::StateUpdate
                            ? int64_t(*getStateIndex(func, k, kUpdateAttr))
                        : into && !isEntry ? into.getInt()
                                           : -1);
  }
  BufferPlanOptions planOptions;
  auto isExternal = [&](Value v) { return external.contains(v); };
  planOptions.isExternal = isExternal;
  planOptions.writeBack = writeBack;
  // (The options hold function_refs: the callable outlives the plan.)
  auto isOptional = [&](unsigned k) { return isOptionalResult(k); };
  planOptions.isOptionalResult = isOptional;
  DenseMap<Operation *, SmallVector<unsigned>> optionalOnly =
      getOptionalOnlyOps();
  auto runsOnlyWhenAsked = [&](unsigned k, Value v) {
    auto it = optionalOnly.find(v.getDefiningOp());
    return it != optionalOnly.end() && it->second == ArrayRef<unsigned>(k);
  };
  planOptions.runsOnlyWhenAsked = runsOnlyWhenAsked;
  // A send reads its buffer until its dist.wait_send (which reads it too),
  // or, without one, until the function waits for its sends, at the end.
  for (auto wait : func.getBody().front().getOps<dist::WaitSendOp>()) {
    std::string name = "sendq" + std::to_string(sendRequests.size() / 2);
    sendRequests[wait.getSend()] = name;
    sendRequests[wait] = name;
  }
  auto readsUntilEnd = [&](OpOperand &operand) {
    return isa<dist::SendOp>(operand.getOwner()) &&
           !sendRequests.count(operand.getOwner());
  };
  planOptions.readsUntilEnd = readsUntilEnd;
  auto viewSource = [&](Operation *op) {
    return isReadInPlace(op) ? op->getOperand(0) : Value();
  };
  planOptions.getViewSource = viewSource;
  // The state a failed step must leave as it was is the entry's; a
  // called function's partial sums are the caller's temporaries.
  planOptions.mayFail = isEntry ? mayReturnEarly : neverFails;
  // What pcc-fuse decided the target computes inside another op's loop:
  // a softmax that computes its producing fusion per row reads the
  // fusion's operands, which stay alive until it ran; a product that runs
  // the element-wise op after it as its epilogue has that op write its
  // results while the product still reads its operands, likewise.
  for (Operation &op : func.getBody().front()) {
    if (auto f = dyn_cast<FusionOp>(op); f && f->hasAttr(kRowPrologueAttr)) {
      Operation *softmax = *f->getUsers().begin();
      absorbed[f] = softmax;
    }
    if (op.hasAttr(kEpilogueAttr) && hooks.supportsGemmEpilogue()) {
      llvm::SmallPtrSet<Value, 4> views;
      Operation *consumer = pcc::getViewChain(op.getResult(0), views);
      epilogueConsumer[&op] = consumer;
      epilogueProduct[consumer] = &op;
    }
  }
  llvm::DenseMap<Operation *, Operation *> absorbedBy;
  for (auto [f, softmax] : absorbed)
    absorbedBy[softmax] = f;
  auto extraReads = [&](Operation *op, SmallVectorImpl<Value> &reads) {
    if (Operation *f = absorbedBy.lookup(op))
      llvm::append_range(reads, cast<FusionOp>(f).getInputs());
    if (Operation *product = epilogueProduct.lookup(op))
      llvm::append_range(reads, product->getOperands());
    // A collective reads its input until it is waited for.
    if (auto wait = dyn_cast<dist::WaitOp>(op))
      reads.push_back(wait.getCollective()->getOperand(0));
  };
  planOptions.getExtraReads = extraReads;
  // Products and scatter_adds add themselves into partial sums updated in
  // place (beta 1, an accumulating scatter), on every target.
  planOptions.getAccumulation = getAccumulatingSum;
  planOptions.concatInPlace = true;
  // An all-reduce runs in place on its result (TargetHooks::emitCollective);
  // a slice that is one block of its input is that block.
  planOptions.reducesInPlace = isReducedInPlace;
  planOptions.sliceViews = true;
  // An element-wise op computes in the buffer of an operand it reads last.
  planOptions.elementwiseInPlace = true;
  BufferPlan plan(func, planOptions);
  bufferPlan = &plan;
  // The updates of states that a product may read prepared: their
  // prepared operands are made again where each lands (after the op that
  // computes it in the state's buffer, else after its copy there at the
  // end); an entry's are known (collectPreparedStates).
  if (!isEntry) {
    Operation *ret = func.getBody().front().getTerminator();
    for (unsigned k = 0; k < func.getNumResults(); ++k)
      if (Value arg = getPreparedStateArg(program, func, k))
        stateUpdateArg[ret->getOperand(k)] = arg;
  }
  // Such an op runs with no epilogue; its sum has no code of its own.
  for (Operation &op : func.getBody().front()) {
    if (op.getNumResults() != 1 || !plan.isAccumulated(op.getResult(0)))
      continue;
    Operation *sum = getAccumulatingSum(&op).first.getDefiningOp();
    accumulateInto[&op] = sum;
    accumulatedSums.insert(sum);
    if (epilogueConsumer.lookup(&op) == sum) {
      epilogueConsumer.erase(&op);
      epilogueProduct.erase(sum);
    }
  }
  ownWorkspace = plan.getWorkspaceBytes();
  declareBuffers(plan);
  for (Operation &op : func.getBody().front().without_terminator()) {
    std::string test;
    if (auto it = optionalOnly.find(&op); it != optionalOnly.end())
      test = llvm::join(
          llvm::map_range(it->second,
                          [&](unsigned k) { return resultSlot(k); }),
          " || ");
    if (!test.empty())
      hooks.emitLine("if (" + test + ") {");
    // Ops that name a buffer (views; constants and weights, of no
    // operands) or call a traced stage have no time of their own.
    std::string label;
    if (options.profileLabel && op.getNumOperands() &&
        !isa<ViewLikeOpInterface>(op) && !isa<func::CallOp>(op))
      label = options.profileLabel(&op);
    if (!label.empty())
      hooks.emitTrace(label, /*begin=*/true);
    hooks.setErrorSite(describeErrorSite(&op));
    LogicalResult emitted = emitOp(&op);
    hooks.setErrorSite("");
    if (failed(emitted))
      return failure();
    if (!label.empty())
      hooks.emitTrace(label, /*begin=*/false);
    if (!test.empty())
      hooks.emitLine("}");
    // A collective that no dist.wait completes completes where it starts.
    if (dist::isStartedCollective(&op) && !dist::completesAtWait(&op))
      hooks.emitCollectiveWait(requestOf(&op));
    // A state that this op updated in its own buffer, while it may still
    // be in the caches (one that a later dist.wait completes, at the end).
    if (!dist::isStartedCollective(&op) || !dist::completesAtWait(&op))
      for (OpResult r : op.getResults()) {
        auto it = stateUpdateArg.find(r);
        if (it == stateUpdateArg.end() || preparedUpdates.contains(r))
          continue;
        auto call = dyn_cast<func::CallOp>(op);
        if (call && calleePrepares(call, r.getResultNumber())) {
          preparedUpdates.insert(r);
        } else if (plan.getRoot(r) == it->second) {
          emitPrepareUpdated(r, ptr(r));
          preparedUpdates.insert(r);
        }
      }
  }
  // Before the results land, since a state update may overwrite a buffer a
  // send still reads.
  if (startedSends)
    hooks.emitWaitForSends();
  emitResultCopies(plan);
  return ownWorkspace;
}

/// A C++ identifier for each function, from its symbol name.
static llvm::DenseMap<func::FuncOp, std::string>
nameFunctions(const ProgramCallGraph &graph) {
  llvm::DenseMap<func::FuncOp, std::string> names;
  llvm::StringSet<> taken;
  for (func::FuncOp f : graph.getFunctions()) {
    std::string name = "fn_";
    for (char c : f.getSymName())
      name += llvm::isAlnum(c) ? c : '_';
    std::string unique = name;
    for (int n = 1; !taken.insert(unique).second; ++n)
      unique = name + "_" + std::to_string(n);
    names[f] = unique;
  }
  return names;
}

/// What `<prefix>_model_run` and the entries of a pipeline start with: the
/// context's tables and workspace.
static const char kEntryPreamble[] =
    "  void *const *in = ctx->inputs;\n"
    "  void *const *out = ctx->outputs;\n"
    "  void *const *w = ctx->weights;\n"
    "  char *ws = (char *)ctx->workspace;\n"
    "  (void)in; (void)out; (void)w; (void)ws;\n";

/// Emits the program of the entry points `points` of `module`.
static FailureOr<CppEmitResult>
emitEntryPoints(ModuleOp module, ArrayRef<EntryPoint> points,
                const MeshLayout &mesh, raw_ostream &os,
                const CppEmitOptions &options, TargetHooks &hooks) {
  SmallVector<func::FuncOp> entries;
  for (const EntryPoint &point : points)
    entries.append(point.functions);
  FailureOr<ProgramCallGraph> graph = ProgramCallGraph::build(entries);
  if (failed(graph))
    return failure();
  for (func::FuncOp f : graph->getFunctions())
    if (!llvm::hasSingleElement(f.getBody()))
      return f.emitError() << hooks.getTargetName()
                           << " expects a single block";
  const std::string &p = options.symbolPrefix;
  AbiTables tables(p);
  llvm::DenseMap<func::FuncOp, unsigned> entryPoints;
  for (const EntryPoint &point : points) {
    unsigned index = tables.addEntryPoint(point.name);
    for (func::FuncOp f : point.functions)
      entryPoints[f] = index;
  }
  // A pipeline's entry runs on the ranks of its coordinate along the
  // pipeline axis; what it reaches is held there.
  bool pipelined = isPipeline(entries);
  std::optional<unsigned> stageAxis;
  if (pipelined)
    stageAxis = mesh.getAxisIndex(dist::kPipelineAxis);
  llvm::DenseMap<func::FuncOp, uint64_t> holders;
  if (stageAxis) {
    tables.setStageAxis(*stageAxis);
    for (const EntryPoint &point : points) {
      if (point.functions.size() > 64)
        return module.emitError("a pipeline of ")
               << point.functions.size()
               << " ranks; the ABI's holder masks have 64";
      for (auto [stage, entry] : llvm::enumerate(point.functions))
        for (func::FuncOp f : graph->getReachable(entry))
          holders[f] |= uint64_t(1) << stage;
    }
  }

  // Node-based: the hooks and emitters hold references to the bodies.
  std::map<Operation *, std::string> bodies;
  hooks.setBody(bodies[entries.front()]);
  Program program{options, *graph, mesh, tables, hooks, nameFunctions(*graph),
                  holders, entryPoints};

  // The entries first: their interfaces make the tables (inputs, outputs
  // and state), and their constants follow their state in the weights
  // table as for a program of one function; then the other functions.
  std::vector<std::unique_ptr<FunctionEmitter>> emitters;
  SmallVector<func::FuncOp> order(entries);
  for (func::FuncOp f : llvm::reverse(graph->getFunctions()))
    if (!graph->isEntry(f))
      order.push_back(f);
  for (func::FuncOp f : order)
    emitters.push_back(
        std::make_unique<FunctionEmitter>(program, f, bodies[f]));
  for (auto [f, emitter] : llvm::zip(order, emitters))
    if (graph->isEntry(f) && failed(emitter->collectInterface()))
      return failure();
  for (auto [f, emitter] : llvm::zip(order, emitters))
    if (graph->isEntry(f))
      emitter->collectUpdatedStates();
  propagateUpdatedStates(*graph, program.updatedStates);
  for (auto [f, emitter] : llvm::zip(order, emitters))
    if (graph->isEntry(f))
      emitter->collectPreparedStates();
  llvm::DenseMap<func::FuncOp, int64_t> ownWorkspace;
  for (auto [f, emitter] : llvm::zip(order, emitters)) {
    FailureOr<int64_t> bytes = emitter->emit();
    if (failed(bytes))
      return failure();
    ownWorkspace[f] = *bytes;
  }
  llvm::DenseMap<func::FuncOp, int64_t> workspace =
      graph->getWorkspaceWithCallees(ownWorkspace);
  // Each rank runs one entry of an entry point at a time: an entry point
  // needs the most any of its entries needs, the program the most of those.
  SmallVector<uint64_t> pointWorkspace;
  for (const EntryPoint &point : points) {
    uint64_t bytes = 0;
    for (func::FuncOp entry : point.functions)
      bytes = std::max<uint64_t>(bytes, workspace[entry]);
    pointWorkspace.push_back(bytes);
  }
  // A pipeline rank runs its coordinate's function of each entry point
  // (a pipeline along a mesh axis: one stage's microbatches have none).
  SmallVector<uint64_t> stageWorkspace;
  if (stageAxis)
    for (const EntryPoint &point : points) {
      stageWorkspace.resize(point.functions.size(), 0);
      for (auto [stage, entry] : llvm::enumerate(point.functions))
        stageWorkspace[stage] =
            std::max<uint64_t>(stageWorkspace[stage], workspace[entry]);
    }

  hooks.printFilePrologue(os);
  // The entry points' runs may name the model's info before it is defined,
  // and the info names the first entry point's run.
  os << "extern \"C\" const pccrt_model_info *" << p << "_model_info(void);\n"
     << "extern \"C\" " << hooks.getFunctionAttributes() << " int " << p
     << "_model_run(const pccrt_context *ctx);\n"
     << "namespace " << tables.getNamespace() << " {\n"
     << hooks.getGlobals() << hooks.getPrepareWeightFunctions();
  tables.printTables(os, mesh);
  // Callees come before their callers.
  for (func::FuncOp f : graph->getFunctions()) {
    if (graph->isEntry(f))
      continue;
    os << "\n// @" << f.getSymName() << ": " << ownWorkspace[f]
       << " bytes of workspace, " << workspace[f] << " with its calls\n"
       << hooks.getFunctionAttributes() << " static int "
       << program.functionNames[f]
       << "(const pccrt_context *ctx, void *const *args, "
          "void *const *results, char *ws) {\n"
       << "  void *const *w = ctx->weights;\n"
       << "  (void)ctx; (void)args; (void)results; (void)w; (void)ws;\n"
       << bodies[f] << "  return PCCRT_OK;\n}\n";
  }
  // A pipeline's entries: each pipeline rank's step on the context.
  if (pipelined)
    for (const EntryPoint &point : points)
      for (auto [stage, entry] : llvm::enumerate(point.functions))
        os << "\n// @" << func::FuncOp(entry).getSymName() << ", pipeline rank " << stage
           << ": " << ownWorkspace[entry] << " bytes of workspace, "
           << workspace[entry] << " with its calls\n"
           << hooks.getFunctionAttributes() << " static int "
           << program.functionNames[entry] << "(const pccrt_context *ctx) {\n"
           << kEntryPreamble << bodies[entry] << "  return PCCRT_OK;\n}\n";
  // Operands derived from the weights, made by the runtime once before the
  // runs (and again after it changes a weight); a run that updates a state
  // makes that state's again itself.
  std::string preparedBytes = hooks.getPreparedBytes();
  if (!preparedBytes.empty())
    os << "\n// The operands prepared from the weights.\n"
       << hooks.getFunctionAttributes()
       << " static int prepare(const pccrt_context *ctx) {\n"
       << "  if (ctx->abi_version != PCCRT_ABI_VERSION) "
          "return PCCRT_ERR_ABI_MISMATCH;\n"
       << hooks.getRunPrologue(options.threads)
       << "  void *const *w = ctx->weights;\n"
       << "  char *prepared = (char *)ctx->prepared;\n"
       << "  (void)w; (void)prepared;\n"
       << hooks.getPrepareBody() << "  return PCCRT_OK;\n}\n";
  // Each entry point's run: the rank's coordinate along the pipeline axis
  // picks its step (a rank outside the mesh has none). Entry point 0's is
  // `<prefix>_model_run`, the others' are static functions.
  auto printRun = [&](unsigned index, const EntryPoint &point) {
    os << "  if (ctx->abi_version != PCCRT_ABI_VERSION) "
          "return PCCRT_ERR_ABI_MISMATCH;\n"
       << (mesh.isSingleRank() ? ""
                               : "  if (!ctx->comm) return PCCRT_ERR_COMM;\n")
       << hooks.getRunPrologue(options.threads);
    if (pipelined) {
      os << "  int rc = PCCRT_ERR_ABI_MISMATCH;\n"
         << "  switch (" << mesh.getCoordinate(dist::kPipelineAxis) << ") {\n";
      for (auto [stage, entry] : llvm::enumerate(point.functions))
        os << "  case " << stage << ": rc = " << program.functionNames[entry]
           << "(ctx); break;\n";
      os << "  }\n  if (rc != PCCRT_OK) return rc;\n"
         << "  " << hooks.getRunSuccess() << "\n}\n";
    } else {
      hooks.printRunBody(os, kEntryPreamble, bodies[point.functions.front()],
                         mesh.isSingleRank(), p + "_model_info");
      os << "}\n";
    }
  };
  for (auto [index, point] : llvm::enumerate(points)) {
    if (index == 0)
      continue;
    os << "\n// Entry point '" << point.name << "'.\n"
       << hooks.getFunctionAttributes() << " static int "
       << AbiTables::getRunFunction(index) << "(const pccrt_context *ctx) {\n";
    printRun(index, point);
  }
  os << "} // namespace " << tables.getNamespace() << "\n\n";
  tables.printModelInfo(os, mesh, pointWorkspace, stageWorkspace,
                        hooks.getDevice(),
                        preparedBytes);
  os << "\nextern \"C\" " << hooks.getFunctionAttributes() << " int " << p
     << "_model_run(const pccrt_context *ctx) {\n"
     << "  using namespace " << tables.getNamespace() << ";\n";
  printRun(0, points.front());

  hooks.printFileEpilogue(os, p);

  CppEmitResult result;
  result.weights.assign(tables.getWeights().begin(), tables.getWeights().end());
  result.mesh = mesh.getAxes();
  result.stageAxis = tables.getStageAxis();
  result.workspaceBytes = *llvm::max_element(pointWorkspace);
  result.stageWorkspaceBytes.assign(stageWorkspace.begin(),
                                    stageWorkspace.end());
  result.preparedBytes = uint64_t(hooks.getPreparedBytesAtLeast());
  for (size_t i = 0; i < result.weights.size(); ++i)
    result.weightPreparedBytes.push_back(
        uint64_t(hooks.getWeightPreparedBytesAtLeast(int64_t(i))));
  for (const EntryPoint &point : points)
    for (auto [stage, entry] : llvm::enumerate(point.functions))
      result.entries.push_back({func::FuncOp(entry).getSymName().str(),
                                pipelined ? int64_t(stage) : -1,
                                uint64_t(workspace[entry])});
  return result;
}

FailureOr<CppEmitResult> pcc::emitProgram(func::FuncOp entry, raw_ostream &os,
                                          const CppEmitOptions &options,
                                          TargetHooks &hooks) {
  auto module = entry->getParentOfType<ModuleOp>();
  FailureOr<MeshLayout> mesh = MeshLayout::get(module);
  if (failed(mesh))
    return failure();
  return emitEntryPoints(module, {EntryPoint{"main", {entry}}}, *mesh, os,
                         options, hooks);
}

FailureOr<CppEmitResult> pcc::emitProgram(ModuleOp module, raw_ostream &os,
                                          const CppEmitOptions &options,
                                          TargetHooks &hooks) {
  FailureOr<MeshLayout> mesh = MeshLayout::get(module);
  if (failed(mesh))
    return failure();
  FailureOr<SmallVector<EntryPoint>> points =
      getEntryPoints(module, mesh->getAxisSize(dist::kPipelineAxis));
  if (failed(points))
    return failure();
  return emitEntryPoints(module, *points, *mesh, os, options, hooks);
}
