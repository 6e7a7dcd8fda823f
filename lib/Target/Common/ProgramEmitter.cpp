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
//===----------------------------------------------------------------------===//

#include "pcc/Target/ProgramEmitter.h"

#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GemmOperands.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"
#include "pcc/Target/BufferPlan.h"
#include "pcc/Target/CallGraph.h"
#include "pcc/Target/LoopNest.h"
#include "pcc/Target/ScalarExpr.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <memory>

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
static Type elemOf(Value v) { return getElementTypeOrSelf(v.getType()); }

namespace {

/// What the functions of one translation unit share.
struct Program {
  const CppEmitOptions &options;
  const ProgramCallGraph &graph;
  const MeshLayout &mesh;
  AbiTables &tables;
  TargetHooks &hooks;
  /// The C++ name of every function.
  llvm::DenseMap<func::FuncOp, std::string> functionNames;
  /// Per function: the pipeline ranks whose entry reaches it, a mask of
  /// coordinates along the pipeline axis (0 when not pipelined).
  llvm::DenseMap<func::FuncOp, uint64_t> holders;
};

/// Emits one function of the program: its constants, the declarations of
/// its buffers, its ops and the copies of its results. An entry's
/// signature maps onto the ABI's tables (inputs, outputs, state in the
/// weights table), which it reads through `in`, `out` and `w`; any other
/// function takes its arguments and result buffers as arrays of pointers.
class FunctionEmitter {
public:
  FunctionEmitter(Program &program, func::FuncOp func, std::string &body)
      : func(func), isEntry(program.graph.isEntry(func)), program(program),
        options(program.options), tables(program.tables), mesh(program.mesh),
        hooks(program.hooks), body(body) {}

  /// Maps an entry's signature onto the ABI's tables; every entry's before
  /// any function is emitted, so that the tables are complete.
  LogicalResult collectInterface();
  /// Emits the function; returns the workspace it needs for itself (its
  /// calls get the workspace after that).
  FailureOr<int64_t> emit();

private:
  /// What a result of the entry is for.
  enum class Role { Output, Grad, StateUpdate };

  /// Arguments and results of any other function are plain buffers.
  void collectCalleeInterface();
  LogicalResult emitConstants();
  void declareBuffers(const BufferPlan &plan);
  LogicalResult emitOp(Operation *op);
  void emitResultCopies(const BufferPlan &plan);
  /// The outputs-table entry of result `k` of the entry (an output or a
  /// gradient): its key in the tables.
  FailureOr<unsigned> addOutput(unsigned k);

  /// The name of `v`'s buffer, for code that reads or writes it: a read of
  /// the weight it lies in is counted (AbiTables::noteWeightRead).
  std::string ptr(Value v) {
    Value root =
        bufferPlan && bufferPlan->isView(v) ? bufferPlan->getRoot(v) : v;
    if (int64_t index = constantIndex.lookup_or(root, -1); index >= 0)
      tables.noteWeightRead(index, /*prepared=*/false);
    return names.lookup(v);
  }
  /// Emits product `call`, counting a read of B through its prepared
  /// operand where the target makes one.
  void emitGemm(const GemmCall &call) {
    hooks.emitGemm(call);
    if (call.constantB >= 0 && hooks.readsPreparedB(call))
      tables.noteWeightRead(call.constantB, /*prepared=*/true);
  }
  std::string type(Value v) { return hooks.getTypeName(elemOf(v)); }
  /// Declares `name`, a pointer to `v`'s element type, as `init`.
  void declare(Value v, StringRef name, StringRef init) {
    body += llvm::formatv("  {0}* {1} = ({0}*){2};\n", type(v), name, init);
  }

  /// out[...] = f(in0[...], in1[...], ...), with broadcasting.
  void elementwise(Operation *op, ArrayRef<Value> ins,
                   function_ref<std::string(ArrayRef<std::string>)> f);
  /// Strided copy of `src` into `dst` over `shape`.
  void copy(Value src, const Access &srcAccess, Value dst,
            const Access &dstAccess, ArrayRef<int64_t> shape);
  /// The same from a pointer expression into `src`'s buffer.
  void copyFrom(StringRef srcPointer, Value src, const Access &srcAccess,
                Value dst, const Access &dstAccess, ArrayRef<int64_t> shape);
  /// A graph.fusion: its body per element of one loop nest.
  void fusion(FusionOp fusion);
  /// The statements, appended to `text`, that compute `fusion`'s body for
  /// one element whose operands are read by the expressions `inputs`; the
  /// names of the locals that hold its results.
  SmallVector<std::string> fusionScalars(FusionOp fusion,
                                         ArrayRef<std::string> inputs,
                                         std::string &text);
  void rowSoftmax(Operation *softmax, FusionOp fusion, bool log);
  /// The epilogue of `product` (M x N, its C contiguous): `bias` (a
  /// graph.gemm's C, scaled by `beta`), then `consumer`; either may be
  /// null.
  GemmEpilogue getEpilogue(Operation *product, int64_t m, int64_t n, Value bias,
                           float beta, Operation *consumer);
  /// One loop nest writing `results` (of one shape, contiguous) and reading
  /// `ins` broadcast to it; `statement` gets a name and an offset per
  /// result, then per operand.
  void elementwiseNest(
      ValueRange results, ValueRange ins,
      function_ref<std::string(ArrayRef<std::string>, ArrayRef<std::string>)>
          statement);
  /// `v`'s buffer as a loop nest reads (or writes) it.
  LoopBuffer buffer(Value v, bool written = false) {
    return {ptr(v), elemOf(v), written};
  }
  /// A call of a gather/scatter kernel over slices of `shape` ([outer, k,
  /// inner] around `axis`) at the indices.
  void slicesAlongAxis(StringRef kernel, Operation *op, Value src, Value idx,
                       ArrayRef<int64_t> shape, int64_t axis);
  /// A call of an element-wise gather/scatter kernel, which walks the
  /// indices' shape and needs both shapes as arrays.
  LogicalResult elementsAlongAxis(StringRef kernel, Operation *op, Value src,
                                  Value idx, ArrayRef<int64_t> dataShape,
                                  int64_t axis);
  /// The padded dimension and real extent of argument `arg` ({-1, 0}).
  std::pair<int64_t, int64_t> paddingOfArg(unsigned arg);

  func::FuncOp func;
  bool isEntry;
  Program &program;
  const CppEmitOptions &options;
  AbiTables &tables;
  const MeshLayout &mesh;
  TargetHooks &hooks;
  std::string &body;

  /// The pointer expression of every value.
  llvm::DenseMap<Value, std::string> names;
  /// The function's buffer plan, while it is emitted.
  const BufferPlan *bufferPlan = nullptr;
  /// The data movement that products read in place, and how they read
  /// their operands.
  std::optional<GemmOperands> gemmOperands;
  bool isReadInPlace(Operation *op) const {
    return gemmOperands && gemmOperands->isReadInPlace(op);
  }
  /// Values held outside the workspace: constants in the code and weights
  /// (and blocks of them) in the weights table.
  llvm::DenseSet<Value> external;
  /// Large anonymous splat constants, filled into the workspace.
  llvm::DenseSet<Operation *> splatsInWorkspace;
  /// CONSTANT weights (and the blocks of them loaded as such): their index
  /// in the weights table.
  llvm::DenseMap<Value, int64_t> constantIndex;
  /// The weights-table index of the CONSTANT weight whose buffer `v` is
  /// (itself or a view of it from its start), else -1.
  int64_t getConstantIndex(Value v) const {
    if (bufferPlan && bufferPlan->isView(v))
      v = bufferPlan->getRoot(v);
    return constantIndex.lookup_or(v, -1);
  }
  /// The weights-table index of the constant that product operand `v`,
  /// read as `m`, is the whole of (from its start), else -1.
  int64_t getProductConstantIndex(const MatrixOperand &m, Value v) const {
    if (m.offset != 0 ||
        getNumElements(shapeOf(v)) != getNumElements(shapeOf(m.buffer)))
      return -1;
    return getConstantIndex(m.buffer);
  }
  /// Fusions that the softmax reading them computes on the fly, and the
  /// softmax of each.
  llvm::DenseMap<Operation *, Operation *> absorbed;
  /// Per product: the element-wise op that runs as its epilogue; per such
  /// op, its product.
  llvm::DenseMap<Operation *, Operation *> epilogueConsumer, epilogueProduct;
  /// dist.all_slice ops of a weight that the weights table holds as the
  /// rank's block: no code, no buffer.
  llvm::DenseSet<Operation *> loadedSlices;
  /// The workspace the function needs for itself.
  int64_t ownWorkspace = 0;
  /// Whether the function started sends, which it waits for at the end.
  bool startedSends = false;
  /// Collectives are started where they are and completed just before the
  /// first op that reads their result (or communicates, or calls), else at
  /// the end, so that what does not depend on them runs meanwhile: the
  /// collectives each op waits for first, those waited for at the end, and
  /// each one's request variable.
  llvm::DenseMap<Operation *, std::string> requests;
  /// The request variables of the sends that a dist.wait_send completes,
  /// by send and by wait.
  llvm::DenseMap<Operation *, std::string> sendRequests;
  /// The variable of a collective's request, named when it is started.
  std::string requestOf(Operation *collective) {
    std::string &name = requests[collective];
    if (name.empty())
      name = "q" + std::to_string(requests.size() - 1);
    return name;
  }
  /// The arrays of argument and result buffers: the ABI's inputs and
  /// outputs for the entry, the caller's for any other function.
  StringRef argArray() const { return isEntry ? "in" : "args"; }
  StringRef resultArray() const { return isEntry ? "out" : "results"; }
  /// Per argument: its index in the inputs table, or, for a state, in the
  /// weights table (argWeight >= 0).
  SmallVector<int64_t> argInput, argWeight;
  /// Per result: its role, and its index in the outputs table (its key in
  /// the tables until every entry's interface is known) or, for a state
  /// update, the weights table index of the state it updates.
  SmallVector<Role> resultRole;
  SmallVector<int64_t> resultIndex;
  /// State updates that read another updated state's old value, which that
  /// state's own update may overwrite first: result index -> the name of a
  /// workspace copy taken before any update lands.
  llvm::DenseMap<int64_t, std::string> updateSnapshots;
};

} // namespace

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
      FailureOr<int64_t> index = tables.addInput(
          func.getLoc(),
          onnx ? onnx.getValue().str() : "input_" + std::to_string(i),
          cast<RankedTensorType>(arg.getType()), *shard, readBy);
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
             << name << "': " << hooks.getTargetName() << " needs a dense " << kInitAttr
             << " value";
    WeightEntry entry{name.str(), init, WeightKind::State};
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
      func.getLoc(), name, cast<RankedTensorType>(v.getType()), isGrad, *shard,
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
      return op.emitError() << hooks.getTargetName()
                              << " needs dense constants";
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
        declare(v, n, names[plan.getRoot(v)]);
      else if (std::optional<unsigned> k = plan.getResultSlot(v))
        declare(v, n,
                (resultArray() + "[" + Twine(resultIndex[*k]) + "]").str());
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

void FunctionEmitter::elementwise(
    Operation *op, ArrayRef<Value> ins,
    function_ref<std::string(ArrayRef<std::string>)> f) {
  elementwiseNest(
      op->getResults(), ins,
      [&](ArrayRef<std::string> name, ArrayRef<std::string> off) {
        SmallVector<std::string> args;
        for (unsigned k = 0; k < ins.size(); ++k)
          args.push_back(name[k + 1] + "[" + off[k + 1] + "]");
        return name[0] + "[" + off[0] + "] = " + f(args) + ";";
      });
}

void FunctionEmitter::elementwiseNest(
    ValueRange results, ValueRange ins,
    function_ref<std::string(ArrayRef<std::string>, ArrayRef<std::string>)>
        statement) {
  // The results are written in order over their shape, the operands read
  // broadcast to it. A state that a result updates in place is one buffer
  // read and written at the same elements: one parameter (restrict-
  // qualified parameters must not overlap), through which the operand is
  // read.
  ArrayRef<int64_t> space = shapeOf(results.front());
  SmallVector<Access> accesses;
  SmallVector<LoopBuffer> buffers;
  SmallVector<unsigned> param;
  for (Value r : results) {
    param.push_back(accesses.size());
    accesses.push_back(Access::contiguous(space));
    buffers.push_back(buffer(r, /*written=*/true));
  }
  for (Value in : ins) {
    auto same = llvm::find_if(results, [&](Value r) {
      return bufferPlan && bufferPlan->isUpdatedInPlace(r) &&
             bufferPlan->getRoot(r) == bufferPlan->getRoot(in);
    });
    if (same != results.end()) {
      param.push_back(param[std::distance(results.begin(), same)]);
      continue;
    }
    param.push_back(accesses.size());
    accesses.push_back(Access::broadcast(shapeOf(in), space));
    buffers.push_back(buffer(in));
  }
  hooks.emitParallelLoop(
      LoopNest(space, accesses), buffers,
      [&](ArrayRef<std::string> paramName, ArrayRef<std::string> paramOff) {
        SmallVector<std::string> name, off;
        for (unsigned k : param) {
          name.push_back(paramName[k]);
          off.push_back(paramOff[k]);
        }
        return statement(name, off);
      });
}

void FunctionEmitter::copy(Value src, const Access &srcAccess, Value dst,
                           const Access &dstAccess, ArrayRef<int64_t> shape) {
  copyFrom(ptr(src), src, srcAccess, dst, dstAccess, shape);
}

void FunctionEmitter::copyFrom(StringRef srcPointer, Value src,
                               const Access &srcAccess, Value dst,
                               const Access &dstAccess,
                               ArrayRef<int64_t> shape) {
  LoopNest nest(shape, {dstAccess, srcAccess});
  // A dense block onto a dense block (a concat's piece, a split's part, a
  // slice of whole rows) is one copy, not a loop of its own: a gradient
  // bucket packs a piece per parameter.
  ArrayRef<int64_t> bounds = nest.getBounds();
  if (!nest.isEmpty() && bounds.size() <= 1 &&
      (bounds.empty() || (nest.getAccess(0).strides[0] == 1 &&
                          nest.getAccess(1).strides[0] == 1))) {
    auto at = [](StringRef pointer, int64_t base) {
      return base ? "(" + pointer.str() + " + " + std::to_string(base) + ")"
                  : pointer.str();
    };
    int64_t elementBytes =
        getTensorBytes(RankedTensorType::get({1}, elemOf(src)));
    hooks.emitCopy(at(ptr(dst), nest.getAccess(0).base),
                   at(srcPointer, nest.getAccess(1).base),
                   nest.getNumIterations() * elementBytes, /*mayAlias=*/true);
    return;
  }
  LoopBuffer from{srcPointer.str(), elemOf(src)};
  hooks.emitParallelLoop(
      nest, {buffer(dst, true), from},
      [&](ArrayRef<std::string> name, ArrayRef<std::string> off) {
        return name[0] + "[" + off[0] + "] = " + name[1] + "[" + off[1] + "];";
      });
}

SmallVector<std::string>
FunctionEmitter::fusionScalars(FusionOp fusion, ArrayRef<std::string> inputs,
                               std::string &text) {
  // Each body op becomes a local of the iteration.
  Block &block = fusion.getBody().front();
  llvm::DenseMap<Value, std::string> scalar;
  auto local = [&](Value v, StringRef init) {
    std::string n = "t" + std::to_string(scalar.size());
    text += type(v) + " " + n + " = " + init.str() + "; ";
    scalar[v] = n;
  };
  for (BlockArgument arg : block.getArguments())
    if (!arg.use_empty())
      local(arg, inputs[arg.getArgNumber()]);
  for (Operation &op : block.without_terminator()) {
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      auto value = cast<DenseElementsAttr>(constant.getValue());
      Type et = value.getElementType();
      local(constant,
            type(constant) + "(" +
                getLiterals(value.resizeSplat(RankedTensorType::get({1}, et))) +
                ")");
      continue;
    }
    SmallVector<std::string> operands;
    for (Value v : op.getOperands())
      operands.push_back(scalar.lookup(v));
    local(op.getResult(0), *getScalarExpr(&op, operands, hooks));
  }
  SmallVector<std::string> results;
  for (Value v : block.getTerminator()->getOperands())
    results.push_back(scalar.lookup(v));
  return results;
}

void FunctionEmitter::fusion(FusionOp fusion) {
  // One loop nest over the results' shape, each operand read broadcast to
  // that shape.
  unsigned numResults = fusion.getNumResults();
  elementwiseNest(
      fusion.getResults(), fusion.getInputs(),
      [&](ArrayRef<std::string> name, ArrayRef<std::string> off) {
        SmallVector<std::string> reads;
        for (unsigned k = 0; k < fusion.getInputs().size(); ++k)
          reads.push_back(name[numResults + k] + "[" + off[numResults + k] +
                          "]");
        std::string text;
        SmallVector<std::string> results = fusionScalars(fusion, reads, text);
        for (auto [k, r] : llvm::enumerate(results))
          text += name[k] + "[" + off[k] + "] = " + r + "; ";
        return text;
      });
}

GemmEpilogue FunctionEmitter::getEpilogue(Operation *product, int64_t m,
                                          int64_t n, Value bias, float beta,
                                          Operation *consumer) {
  Value result = product->getResult(0);
  GemmEpilogue e;
  auto add = [&](Value v, bool written, int64_t row, int64_t column) {
    e.buffers.push_back(buffer(v, written));
    e.rowStrides.push_back(row);
    e.columnStrides.push_back(column);
  };
  add(result, /*written=*/true, n, 1);
  if (bias) {
    Access a = Access::broadcast(shapeOf(bias), {m, n});
    add(bias, false, a.strides[0], a.strides[1]);
  }
  // The consumer's results, then its operands other than the product's
  // result (each once); `reads[k]` is the buffer of consumer operand k, or
  // -1 for the product's value.
  SmallVector<int> reads;
  unsigned firstResult = e.buffers.size();
  ArrayRef<int64_t> space;
  unsigned t = 0;
  if (consumer) {
    space = shapeOf(consumer->getResult(0));
    t = *pcc::getRowDims(space, n);
    for (Value r : consumer->getResults())
      add(r, /*written=*/true, n, 1);
    llvm::SmallPtrSet<Value, 4> views;
    pcc::getViewChain(result, views);
    llvm::DenseMap<Value, int> seen;
    for (Value in : consumer->getOperands()) {
      if (views.contains(in)) {
        reads.push_back(-1);
        continue;
      }
      auto [it, inserted] = seen.try_emplace(in, e.buffers.size());
      if (inserted) {
        auto [row, column] = *pcc::getRowColumnStrides(
            Access::broadcast(shapeOf(in), space).strides, space, t);
        add(in, false, row, column);
      }
      reads.push_back(it->second);
    }
  }
  std::string t0 = type(result);
  e.element = [=, this](ArrayRef<std::string> name,
                        ArrayRef<std::string> off) -> std::string {
    std::string value = name[0] + "[" + off[0] + "]";
    if (bias)
      value = t0 + "(" + value + " + " + t0 + "(" +
              getFloatLiteral(beta, true) + ") * " + name[1] + "[" + off[1] +
              "])";
    if (!consumer)
      return name[0] + "[" + off[0] + "] = " + value + ";";
    std::string text = t0 + " c = " + value + "; ";
    SmallVector<std::string> args;
    for (int k : reads)
      args.push_back(k < 0 ? std::string("c") : name[k] + "[" + off[k] + "]");
    SmallVector<std::string> results;
    if (auto f = dyn_cast<FusionOp>(consumer))
      results = fusionScalars(f, args, text);
    else
      results.push_back(*getScalarExpr(consumer, args, hooks));
    for (auto [k, r] : llvm::enumerate(results))
      text += name[firstResult + k] + "[" + off[firstResult + k] + "] = " + r +
              "; ";
    return text;
  };
  return e;
}

void FunctionEmitter::rowSoftmax(Operation *softmax, FusionOp fusion,
                                 bool log) {
  // The rows are the leading dimensions; each operand of the fusion is
  // read broadcast to the softmax's shape, from its row start plus its
  // step along the row.
  ArrayRef<int64_t> shape = shapeOf(softmax->getResult(0));
  ArrayRef<int64_t> outer = shape.drop_back();
  int64_t n = shape.back();
  Access out = Access::contiguous(outer);
  for (int64_t &st : out.strides)
    st *= n;
  SmallVector<Access> rows{out};
  SmallVector<int64_t> columnStrides{1};
  SmallVector<LoopBuffer> buffers{buffer(softmax->getResult(0), true)};
  for (Value in : fusion.getInputs()) {
    Access a = Access::broadcast(shapeOf(in), shape);
    columnStrides.push_back(a.strides.back());
    a.strides.pop_back();
    rows.push_back(a);
    buffers.push_back(buffer(in));
  }
  hooks.emitRowSoftmax(
      {elemOf(softmax->getResult(0)), LoopNest(outer, rows), columnStrides, n,
       log},
      buffers,
      [&](ArrayRef<std::string> name, ArrayRef<std::string> off,
          StringRef var) {
        SmallVector<std::string> reads;
        for (unsigned k = 1; k < name.size(); ++k)
          reads.push_back(name[k] + "[" + off[k] + "]");
        std::string text;
        SmallVector<std::string> results = fusionScalars(fusion, reads, text);
        return text + var.str() + " = " + results.front() + ";";
      });
}

void FunctionEmitter::slicesAlongAxis(StringRef kernel, Operation *op,
                                      Value src, Value idx,
                                      ArrayRef<int64_t> shape, int64_t axis) {
  hooks.emitKernelCall(
      kernel, {},
      {ptr(src), ptr(idx), ptr(op->getResult(0)),
       std::to_string(getNumElements(shape.take_front(axis))),
       std::to_string(shape[axis]),
       std::to_string(getNumElements(shape.drop_front(axis + 1))),
       std::to_string(getNumElements(shapeOf(idx)))},
      "PCCRT_ERR_INDEX_OUT_OF_RANGE");
}

LogicalResult FunctionEmitter::elementsAlongAxis(StringRef kernel,
                                                 Operation *op, Value src,
                                                 Value idx,
                                                 ArrayRef<int64_t> dataShape,
                                                 int64_t axis) {
  if (dataShape.size() > 16)
    return op->emitOpError("of rank above 16 is not supported by ")
           << hooks.getTargetName();
  std::string dataDims = hooks.emitIndexArray(dataShape);
  std::string indexDims = hooks.emitIndexArray(shapeOf(idx));
  hooks.emitKernelCall(kernel, {},
                       {ptr(src), ptr(idx), ptr(op->getResult(0)),
                        std::to_string(dataShape.size()), dataDims, indexDims,
                        std::to_string(axis)},
                       "PCCRT_ERR_INDEX_OUT_OF_RANGE");
  return success();
}

LogicalResult FunctionEmitter::emitOp(Operation *op) {
  {
    std::string comment;
    llvm::raw_string_ostream os(comment);
    os << op->getName().getStringRef() << " " << op->getLoc();
    hooks.emitComment(comment);
  }
  auto result = [&](unsigned i = 0) { return op->getResult(i); };
  std::string t = op->getNumResults() ? type(result()) : "";
  // An epilogue runs inside its product's call.
  if (epilogueProduct.contains(op))
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
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](FusionOp f) {
        // A fusion that a softmax computes on the fly has no code here.
        if (!absorbed.contains(f))
          fusion(f);
        return success();
      })
      .Case([&](ConstantOp c) {
        if (!splatsInWorkspace.contains(op))
          return success();
        // A large splat: filled here, in its workspace buffer.
        auto value = cast<DenseElementsAttr>(c.getValue());
        Type et = value.getElementType();
        std::string element =
            getLiterals(value.resizeSplat(RankedTensorType::get({1}, et)));
        hooks.emitFill(ptr(result()), value.getNumElements(),
                       t + "(" + element + ")");
        return success();
      })
      .Case([](WeightOp) { return success(); })
      .Case([&](MatMulOp m) {
        SmallVector<int64_t> a(shapeOf(m.getLhs())), b(shapeOf(m.getRhs()));
        if (a.size() == 1)
          a.insert(a.begin(), 1);
        if (b.size() == 1)
          b.push_back(1);
        int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
        if (M * N == 0)
          return success();
        // The operands are read where their data movement started (the
        // buffer its chain of views reads), as the layout says.
        MatrixOperand lhs = gemmOperands->get(m->getOpOperand(0));
        MatrixOperand rhs = gemmOperands->get(m->getOpOperand(1));
        SmallVector<int64_t> batch(
            *broadcastShapes(ArrayRef<int64_t>(a).drop_back(2),
                             ArrayRef<int64_t>(b).drop_back(2)));
        // Each operand's batch dimensions step by their strides in the
        // layout (0 where broadcast).
        auto batchAccess = [&](ArrayRef<int64_t> shape,
                               const MatrixOperand &operand) {
          return Access::broadcast(shape, batch, operand.batchStrides,
                                   operand.offset);
        };
        Access ac = Access::contiguous(batch);
        for (int64_t &s : ac.strides)
          s *= M * N;
        GemmCall call{
            elemOf(result()),
            M,
            N,
            K,
            t + "(1)",
            t + "(0)",
            ptr(lhs.buffer),
            ptr(rhs.buffer),
            ptr(result()),
            lhs.ld,
            rhs.ld,
            N,
            lhs.transposed,
            rhs.transposed,
            LoopNest(batch,
                     {batchAccess(ArrayRef<int64_t>(a).drop_back(2), lhs),
                      batchAccess(ArrayRef<int64_t>(b).drop_back(2), rhs), ac}),
            getNumElements(batch) == 1
                ? getProductConstantIndex(rhs, m.getRhs())
                : -1};
        GemmEpilogue epilogue;
        if (Operation *consumer = epilogueConsumer.lookup(op)) {
          epilogue = getEpilogue(op, M, N, Value(), 0.0f, consumer);
          call.epilogue = &epilogue;
        }
        emitGemm(call);
        return success();
      })
      .Case([&](GemmOp g) {
        ArrayRef<int64_t> c = shapeOf(result());
        ArrayRef<int64_t> as = shapeOf(g.getA()), bs = shapeOf(g.getB());
        int64_t K = g.getTransA() ? as[0] : as[1];
        float beta = g.getBeta().convertToFloat();
        // The bias is added as the product finishes each block of C where
        // the target runs epilogues; else C is scaled by beta first, then
        // accumulated into.
        Value bias = g.getC();
        bool biasAfter = bias && hooks.supportsGemmEpilogue();
        if (bias && !biasAfter)
          elementwise(op, {bias}, [&](ArrayRef<std::string> a) {
            return t + "(" + getFloatLiteral(beta, true) + " * " + a[0] + ")";
          });
        // The operands are read where their data movement started: a
        // transposed layout flips the flag, and the leading dimension and
        // offset are the layout's.
        MatrixOperand lhs = gemmOperands->get(g->getOpOperand(0));
        MatrixOperand rhs = gemmOperands->get(g->getOpOperand(1));
        GemmCall call{elemOf(result()),
                      c[0],
                      c[1],
                      K,
                      t + "(" +
                          getFloatLiteral(g.getAlpha().convertToFloat(), true) +
                          ")",
                      t + (bias && !biasAfter ? "(1)" : "(0)"),
                      ptr(lhs.buffer),
                      ptr(rhs.buffer),
                      ptr(result()),
                      lhs.ld,
                      rhs.ld,
                      c[1],
                      g.getTransA() != lhs.transposed,
                      g.getTransB() != rhs.transposed,
                      LoopNest({}, {Access{lhs.offset, {}},
                                    Access{rhs.offset, {}}, Access()}),
                      getProductConstantIndex(rhs, g.getB())};
        GemmEpilogue epilogue;
        Operation *consumer = epilogueConsumer.lookup(op);
        if (biasAfter || consumer) {
          epilogue = getEpilogue(op, c[0], c[1], biasAfter ? bias : Value(),
                                 beta, consumer);
          call.epilogue = &epilogue;
        }
        emitGemm(call);
        return success();
      })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto s) {
        if (auto f = s.getInput().template getDefiningOp<FusionOp>();
            f && absorbed.contains(f)) {
          rowSoftmax(op, f, isa<LogSoftmaxOp>(op));
          return success();
        }
        ArrayRef<int64_t> sh = shapeOf(s.getInput());
        int64_t axis = s.getAxis();
        hooks.emitKernelCall(
            "softmax", {elemOf(result())},
            {ptr(s.getInput()), ptr(result()),
             std::to_string(getNumElements(sh.take_front(axis))),
             std::to_string(sh[axis]),
             std::to_string(getNumElements(sh.drop_front(axis + 1))),
             isa<LogSoftmaxOp>(op) ? "true" : "false"});
        return success();
      })
      .Case([&](LayerNormOp l) -> LogicalResult {
        ArrayRef<int64_t> sh = shapeOf(l.getInput());
        int64_t n = getNumElements(sh.drop_front(l.getAxis()));
        for (Value v : {l.getScale(), l.getBias()})
          if (v && getNumElements(shapeOf(v)) != n)
            return op->emitError("LayerNormalization: broadcast scale/bias "
                                 "is not supported by ")
                   << hooks.getTargetName();
        hooks.emitKernelCall(
            "layerNorm", {elemOf(result())},
            {ptr(l.getInput()), ptr(l.getScale()),
             l.getBias() ? ptr(l.getBias()) : "nullptr", ptr(result(0)),
             ptr(result(1)), ptr(result(2)),
             std::to_string(getNumElements(sh.take_front(l.getAxis()))),
             std::to_string(n),
             t + "(" + getFloatLiteral(l.getEpsilon().convertToFloat(), true) +
                 ")"});
        return success();
      })
      .Case<ReduceMeanOp, ReduceSumOp, ReduceMaxOp, ReduceMinOp>([&](auto r) {
        // Iterate over the input; the output access has stride 0 along
        // reduced dimensions.
        ArrayRef<int64_t> in = shapeOf(r.getInput());
        SmallVector<int64_t> kept;
        for (size_t d = 0; d < in.size(); ++d)
          kept.push_back(llvm::is_contained(r.getAxes(), int64_t(d)) ? 1
                                                                     : in[d]);
        Access ao = Access::broadcast(kept, in);
        for (size_t d = 0; d < in.size(); ++d)
          if (llvm::is_contained(r.getAxes(), int64_t(d)))
            ao.strides[d] = 0;
        using Kind = ReductionLoop::Kind;
        Kind kind = isa<ReduceMaxOp>(op)   ? Kind::Max
                    : isa<ReduceMinOp>(op) ? Kind::Min
                    : isa<ReduceSumOp>(op) ? Kind::Sum
                                           : Kind::Mean;
        int64_t outN = getNumElements(shapeOf(result()));
        ReductionLoop loop{kind,
                           elemOf(result()),
                           ptr(r.getInput()),
                           ptr(result()),
                           LoopNest(in, {ao, Access::contiguous(in)}),
                           outN,
                           getNumElements(in) / std::max<int64_t>(outN, 1)};
        // Over an empty set (a dimension of extent 0 reduced), each output
        // is the reduction's identity: 0 for a sum, -inf for a max, NaN
        // (0 / 0) for a mean.
        if (getNumElements(in) == 0) {
          std::string identity = loop.getIdentity(t);
          if (kind == Kind::Mean && isa<FloatType>(elemOf(result())))
            identity = "std::numeric_limits<" + t + ">::quiet_NaN()";
          hooks.emitFill(ptr(result()), outN, identity);
          return success();
        }
        hooks.emitReduction(loop);
        return success();
      })
      .Case([&](TransposeOp tr) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        SmallVector<int64_t> st = getContiguousStrides(shapeOf(tr.getInput()));
        Access src;
        for (int64_t p : tr.getPerm())
          src.strides.push_back(st[p]);
        copy(tr.getInput(), src, result(), Access::contiguous(outShape),
             outShape);
        return success();
      })
      .Case([&](ExpandOp e) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        copy(e.getInput(), Access::broadcast(shapeOf(e.getInput()), outShape),
             result(), Access::contiguous(outShape), outShape);
        return success();
      })
      .Case([&](SliceOp s) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        SmallVector<int64_t> st = getContiguousStrides(shapeOf(s.getInput()));
        Access src;
        for (size_t d = 0; d < st.size(); ++d) {
          src.base += s.getStarts()[d] * st[d];
          src.strides.push_back(s.getSteps()[d] * st[d]);
        }
        copy(s.getInput(), src, result(), Access::contiguous(outShape),
             outShape);
        return success();
      })
      .Case([&](ConcatOp c) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        SmallVector<int64_t> ost = getContiguousStrides(outShape);
        int64_t at = 0, axis = c.getAxis();
        for (Value in : c.getInputs()) {
          ArrayRef<int64_t> s = shapeOf(in);
          Access dst{at * ost[axis], ost};
          copy(in, Access::contiguous(s), result(), dst, s);
          at += s[axis];
        }
        return success();
      })
      .Case([&](SplitOp s) {
        ArrayRef<int64_t> inShape = shapeOf(s.getInput());
        SmallVector<int64_t> ist = getContiguousStrides(inShape);
        int64_t at = 0, axis = s.getAxis();
        for (Value o : s.getResults()) {
          ArrayRef<int64_t> os = shapeOf(o);
          Access src{at * ist[axis], ist};
          copy(s.getInput(), src, o, Access::contiguous(os), os);
          at += os[axis];
        }
        return success();
      })
      .Case([&](GatherOp g) {
        slicesAlongAxis("gather", op, g.getData(), g.getIndices(),
                        shapeOf(g.getData()), g.getAxis());
        return success();
      })
      .Case([&](GatherElementsOp g) {
        return elementsAlongAxis("gatherElements", op, g.getData(),
                                 g.getIndices(), shapeOf(g.getData()),
                                 g.getAxis());
      })
      .Case([&](CumSumOp c) {
        ArrayRef<int64_t> s = shapeOf(result());
        int64_t axis = c.getAxis();
        hooks.emitKernelCall(
            "cumSum", {elemOf(result())},
            {ptr(c.getInput()), ptr(result()),
             std::to_string(getNumElements(s.take_front(axis))),
             std::to_string(s[axis]),
             std::to_string(getNumElements(s.drop_front(axis + 1))),
             c.getExclusive() ? "true" : "false",
             c.getReverse() ? "true" : "false"});
        return success();
      })
      .Case([&](TriluOp tr) {
        ArrayRef<int64_t> s = shapeOf(tr.getInput());
        int64_t rows = s[s.size() - 2], cols = s.back();
        hooks.emitKernelCall("trilu", {},
                             {ptr(tr.getInput()), ptr(result()),
                              std::to_string(getNumElements(s) /
                                             std::max<int64_t>(rows * cols, 1)),
                              std::to_string(rows), std::to_string(cols),
                              tr.getUpper() ? "true" : "false",
                              std::to_string(tr.getK()) + "LL"});
        return success();
      })
      .Case([&](ScatterAddOp sc) {
        slicesAlongAxis("scatterAdd", op, sc.getUpdates(), sc.getIndices(),
                        shapeOf(result()), sc.getAxis());
        return success();
      })
      .Case([&](ScatterElementsAddOp sc) {
        return elementsAlongAxis("scatterElementsAdd", op, sc.getUpdates(),
                                 sc.getIndices(), shapeOf(result()),
                                 sc.getAxis());
      })
      .Case([&](InsertSliceOp is) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        ArrayRef<int64_t> srcShape = shapeOf(is.getSource());
        hooks.emitFill(ptr(result()), getNumElements(outShape), t + "(0)");
        SmallVector<int64_t> st = getContiguousStrides(outShape);
        Access dst;
        for (size_t d = 0; d < st.size(); ++d) {
          dst.base += is.getStarts()[d] * st[d];
          dst.strides.push_back(is.getSteps()[d] * st[d]);
        }
        copy(is.getSource(), Access::contiguous(srcShape), result(), dst,
             srcShape);
        return success();
      })
      .Case([&](dist::AllReduceOp r) {
        hooks.emitCollective({CollectiveCall::Kind::AllReduce,
                              mesh.getAxesMask(r.getAxes()), ptr(r.getInput()),
                              ptr(result()),
                              getNumElements(shapeOf(r.getInput())),
                              elemOf(result()), int32_t(r.getKind()),
                              requestOf(op)});
        return success();
      })
      .Case([&](dist::AllGatherOp g) -> LogicalResult {
        // Blocks are joined along the outermost dimension (partitioning
        // moves the gathered dimension there).
        ArrayRef<int64_t> in = shapeOf(g.getInput());
        if (g.getDimAttr().getInt() != 0 &&
            llvm::any_of(in.take_front(g.getDimAttr().getInt()),
                         [](int64_t d) { return d != 1; }))
          return g.emitError() << hooks.getTargetName()
                               << " gathers along the outermost dimension "
                                  "only";
        hooks.emitCollective({CollectiveCall::Kind::AllGather,
                              mesh.getAxesMask(g.getAxes()), ptr(g.getInput()),
                              ptr(result()), getNumElements(in),
                              elemOf(result()), 0, requestOf(op)});
        return success();
      })
      .Case([&](dist::ReduceScatterOp r) -> LogicalResult {
        ArrayRef<int64_t> out = shapeOf(result());
        int64_t dim = r.getDimAttr().getInt();
        if (dim != 0 &&
            llvm::any_of(out.take_front(dim), [](int64_t d) { return d != 1; }))
          return r.emitError() << hooks.getTargetName()
                               << " scatters along the outermost dimension "
                                  "only";
        hooks.emitCollective({CollectiveCall::Kind::ReduceScatter,
                              mesh.getAxesMask(r.getAxes()), ptr(r.getInput()),
                              ptr(result()), getNumElements(out),
                              elemOf(result()), int32_t(r.getKind()),
                              requestOf(op)});
        return success();
      })
      .Case([&](dist::AllSliceOp sl) {
        if (loadedSlices.contains(op))
          return success();
        // Viewed as [outer * groups, shards, block * inner]: keep this
        // rank's block of every group.
        ArrayRef<int64_t> in = shapeOf(sl.getInput());
        int64_t dim = sl.getDimAttr().getInt();
        int64_t groups = sl.getGroupsAttr().getInt();
        int64_t shards = sl.getGroupSize();
        int64_t outer = getNumElements(in.take_front(dim)) * groups;
        int64_t inner = getNumElements(in.drop_front(dim + 1));
        int64_t chunk = in[dim] / groups / shards * inner;
        // The rank's block starts at its group position times the block.
        std::string src =
            llvm::formatv("({0} + {1} * {2})", ptr(sl.getInput()),
                          mesh.getGroupPosition(sl.getAxes()), chunk);
        copyFrom(src, sl.getInput(), Access{0, {shards * chunk, 1}},
                 result(), Access{0, {chunk, 1}}, {outer, chunk});
        return success();
      })
      .Case([&](func::CallOp call) {
        SmallVector<std::string> args, results;
        for (Value v : call.getOperands())
          args.push_back(ptr(v));
        for (Value v : call.getResults())
          results.push_back(ptr(v));
        // A scheduled action (a pipeline step's F0, B1, O) is traced.
        auto action = call->getAttrOfType<StringAttr>(dist::kActionAttr);
        if (action)
          hooks.emitTrace(action.getValue(), /*begin=*/true);
        // The callee works in the workspace after this function's own.
        hooks.emitCall(
            program.functionNames.lookup(program.graph.getCallee(call)), args,
            results, "ws + " + std::to_string(ownWorkspace));
        if (action)
          hooks.emitTrace(action.getValue(), /*begin=*/false);
        return success();
      })
      .Case<dist::SendOp, dist::RecvOp>([&](auto op) -> LogicalResult {
        if (mesh.isSingleRank())
          return op.emitError("a transfer in a program of one rank");
        bool isSend = isa<dist::SendOp>(op);
        Value v = op->getNumResults() ? op->getResult(0) : op->getOperand(0);
        // A send that a dist.wait_send completes gets a request; the others
        // complete at the end.
        std::string request = sendRequests.lookup(op);
        hooks.emitTransfer(
            {isSend ? TransferCall::Kind::Send : TransferCall::Kind::Recv,
             mesh.getAxesMask(op.getAxes()), int64_t(op.getPeer()),
             int64_t(op.getTag()), ptr(v), getNumElements(shapeOf(v)),
             elemOf(v), request});
        startedSends |= isSend && request.empty();
        return success();
      })
      .Case([&](dist::WaitSendOp w) {
        hooks.emitSendWait(sendRequests.lookup(w));
        return success();
      })
      .Case([&](dist::AxisIndexOp a) {
        hooks.emitFill(ptr(result()), 1, mesh.getGroupPosition(a.getAxes()));
        return success();
      })
      .Default([&](Operation *o) {
        return o->emitError() << hooks.getTargetName() << " cannot lower '"
               << o->getName() << "'";
      });
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
    hooks.emitCopy(target, ptr(v), getTensorBytes(v.getType()),
                   /*mayAlias=*/true);
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
  }
}

FailureOr<int64_t> FunctionEmitter::emit() {
  hooks.setBody(body);
  if (isEntry) {
    // Every entry's outputs are known: their keys become table indices.
    for (auto [k, role] : llvm::enumerate(resultRole))
      if (role != Role::StateUpdate)
        resultIndex[k] = tables.getOutputIndex(resultIndex[k]);
  } else {
    collectCalleeInterface();
  }
  if (failed(emitConstants()))
    return failure();
  gemmOperands.emplace(func);
  SmallVector<int64_t> writeBack;
  for (auto [k, role] : llvm::enumerate(resultRole))
    writeBack.push_back(role == Role::StateUpdate
                            ? int64_t(*getStateIndex(func, k, kUpdateAttr))
                            : -1);
  BufferPlanOptions planOptions;
  auto isExternal = [&](Value v) { return external.contains(v); };
  planOptions.isExternal = isExternal;
  planOptions.writeBack = writeBack;
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
  // What returns early on failure: index checks of gathers and scatters,
  // communication and calls.
  // A started collective's wait may fail (it is a Dist op).
  auto mayFail = [&](Operation *op) {
    return isa<GatherOp, GatherElementsOp, ScatterAddOp, ScatterElementsAddOp,
               func::CallOp>(op) ||
           isa<dist::DistDialect>(op->getDialect());
  };
  planOptions.mayFail = mayFail;
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
  BufferPlan plan(func, planOptions);
  bufferPlan = &plan;
  ownWorkspace = plan.getWorkspaceBytes();
  declareBuffers(plan);
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (failed(emitOp(&op)))
      return failure();
    // A collective that no dist.wait completes completes where it starts.
    if (dist::isStartedCollective(&op) && !dist::completesAtWait(&op))
      hooks.emitCollectiveWait(requestOf(&op));
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

/// Emits the program of `entries` in `module`: one per pipeline rank when
/// `pipelined`, else one.
static FailureOr<CppEmitResult>
emitEntries(ModuleOp module, ArrayRef<func::FuncOp> entries, bool pipelined,
            const MeshLayout &mesh, raw_ostream &os,
            const CppEmitOptions &options, TargetHooks &hooks) {
  FailureOr<ProgramCallGraph> graph = ProgramCallGraph::build(entries);
  if (failed(graph))
    return failure();
  for (func::FuncOp f : graph->getFunctions())
    if (!llvm::hasSingleElement(f.getBody()))
      return f.emitError() << hooks.getTargetName()
                           << " expects a single block";
  const std::string &p = options.symbolPrefix;
  AbiTables tables(p);
  // A pipeline's entry runs on the ranks of its coordinate along the
  // pipeline axis; what it reaches is held there.
  std::optional<unsigned> stageAxis;
  if (pipelined)
    stageAxis = mesh.getAxisIndex(dist::kPipelineAxis);
  llvm::DenseMap<func::FuncOp, uint64_t> holders;
  if (stageAxis) {
    if (entries.size() > 64)
      return module.emitError("a pipeline of ")
             << entries.size() << " ranks; the ABI's holder masks have 64";
    tables.setStageAxis(*stageAxis);
    for (auto [stage, entry] : llvm::enumerate(entries))
      for (func::FuncOp f : graph->getReachable(entry))
        holders[f] |= uint64_t(1) << stage;
  }

  // Node-based: the hooks and emitters hold references to the bodies.
  std::map<Operation *, std::string> bodies;
  hooks.setBody(bodies[entries.front()]);
  Program program{options, *graph, mesh, tables, hooks, nameFunctions(*graph),
                  holders};

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
  llvm::DenseMap<func::FuncOp, int64_t> ownWorkspace;
  for (auto [f, emitter] : llvm::zip(order, emitters)) {
    FailureOr<int64_t> bytes = emitter->emit();
    if (failed(bytes))
      return failure();
    ownWorkspace[f] = *bytes;
  }
  llvm::DenseMap<func::FuncOp, int64_t> workspace =
      graph->getWorkspaceWithCallees(ownWorkspace);
  // Each rank runs one entry: the program needs the most any one needs.
  int64_t programWorkspace = 0;
  for (func::FuncOp entry : entries)
    programWorkspace = std::max(programWorkspace, workspace[entry]);

  hooks.printFilePrologue(os);
  os << "namespace " << tables.getNamespace() << " {\n" << hooks.getGlobals();
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
    for (auto [stage, entry] : llvm::enumerate(graph->getEntries()))
      os << "\n// @" << func::FuncOp(entry).getSymName() << ", pipeline rank "
         << stage << ": " << ownWorkspace[entry] << " bytes of workspace, "
         << workspace[entry] << " with its calls\n"
         << hooks.getFunctionAttributes() << " static int "
         << program.functionNames[entry] << "(const pccrt_context *ctx) {\n"
         << kEntryPreamble << bodies[entry] << "  return PCCRT_OK;\n}\n";
  // Operands derived from the CONSTANT weights, made by the runtime once
  // before the runs (and again after a weight changes).
  std::string preparedBytes = hooks.getPreparedBytes();
  if (!preparedBytes.empty())
    os << "\n// The operands prepared from the constant weights.\n"
       << hooks.getFunctionAttributes()
       << " static int prepare(const pccrt_context *ctx) {\n"
       << "  if (ctx->abi_version != PCCRT_ABI_VERSION) "
          "return PCCRT_ERR_ABI_MISMATCH;\n"
       << hooks.getRunPrologue(options.threads)
       << "  void *const *w = ctx->weights;\n"
       << "  char *prepared = (char *)ctx->prepared;\n"
       << "  (void)w; (void)prepared;\n"
       << hooks.getPrepareBody() << "  return PCCRT_OK;\n}\n";
  os << "} // namespace " << tables.getNamespace() << "\n\n";
  tables.printModelInfo(os, mesh, programWorkspace, hooks.getDevice(),
                        preparedBytes);
  os << "\nextern \"C\" " << hooks.getFunctionAttributes() << " int " << p
     << "_model_run(const pccrt_context *ctx) {\n"
     << "  using namespace " << tables.getNamespace() << ";\n"
     << "  if (ctx->abi_version != PCCRT_ABI_VERSION) "
        "return PCCRT_ERR_ABI_MISMATCH;\n"
     << (mesh.isSingleRank() ? ""
                             : "  if (!ctx->comm) return PCCRT_ERR_COMM;\n")
     << hooks.getRunPrologue(options.threads);
  if (pipelined) {
    // The rank's coordinate along the pipeline axis picks its step; a rank
    // outside the mesh has none.
    os << "  int rc = PCCRT_ERR_ABI_MISMATCH;\n"
       << "  switch (" << mesh.getCoordinate(dist::kPipelineAxis) << ") {\n";
    for (auto [stage, entry] : llvm::enumerate(entries))
      os << "  case " << stage << ": rc = " << program.functionNames[entry]
         << "(ctx); break;\n";
    os << "  }\n  if (rc != PCCRT_OK) return rc;\n"
       << "  " << hooks.getRunSuccess() << "\n}\n";
  } else {
    hooks.printRunBody(os, kEntryPreamble, bodies[entries.front()],
                       mesh.isSingleRank(), p + "_model_info");
    os << "}\n";
  }

  hooks.printFileEpilogue(os, p);

  CppEmitResult result;
  result.weights.assign(tables.getWeights().begin(), tables.getWeights().end());
  result.mesh = mesh.getAxes();
  result.stageAxis = tables.getStageAxis();
  result.workspaceBytes = programWorkspace;
  for (auto [stage, entry] : llvm::enumerate(entries))
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
  return emitEntries(module, {entry}, /*pipelined=*/false, *mesh, os, options,
                     hooks);
}

FailureOr<CppEmitResult> pcc::emitProgram(ModuleOp module, raw_ostream &os,
                                          const CppEmitOptions &options,
                                          TargetHooks &hooks) {
  FailureOr<MeshLayout> mesh = MeshLayout::get(module);
  if (failed(mesh))
    return failure();
  FailureOr<SmallVector<func::FuncOp>> entries =
      getEntryFunctions(module, mesh->getAxisSize(dist::kPipelineAxis));
  if (failed(entries))
    return failure();
  return emitEntries(module, *entries, isPipeline(*entries), *mesh, os,
                     options, hooks);
}
