//===- EmitElementwise.cpp - Element-wise ops of the program --------------===//
//
// The program emitter's element-wise code: the loop nests of single
// element-wise ops and of graph.fusion (one nest, its body per element),
// the fill of a large splat constant, and nothing for a weight.
//
//===----------------------------------------------------------------------===//

#include "FunctionEmitter.h"

#include "pcc/Target/ScalarExpr.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::detail;
using namespace pcc::graph;

void FunctionEmitter::elementwise(
    Operation *op, ArrayRef<Value> ins,
    function_ref<std::string(ArrayRef<std::string>)> f) {
  elementwiseNest(op->getResults(), ins,
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
        statement,
    function_ref<std::string(ArrayRef<std::string>)> prologue) {
  // The results are written in order over their shape, the operands read
  // broadcast to it. An operand that a result is computed over in place
  // (a state it updates, a buffer the op reads last) is one buffer read
  // and written at the same elements: one parameter (restrict-qualified
  // parameters must not overlap), through which the operand is read.
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
  auto names = [&](ArrayRef<std::string> paramName) {
    return llvm::map_to_vector(param, [&](unsigned k) { return paramName[k]; });
  };
  auto withNames = [&](ArrayRef<std::string> paramName) {
    return prologue(names(paramName));
  };
  auto emitNest = [&](const LoopNest &nest, ArrayRef<LoopBuffer> loopBuffers) {
    hooks.emitParallelLoop(
        nest, loopBuffers,
        [&](ArrayRef<std::string> paramName, ArrayRef<std::string> paramOff) {
          SmallVector<std::string> off;
          for (unsigned k : param)
            off.push_back(paramOff[k]);
          return statement(names(paramName), off);
        },
        prologue ? function_ref<std::string(ArrayRef<std::string>)>(withNames)
                 : nullptr);
  };
  if (!emitInPreparedChunks(results, space, accesses, buffers, emitNest))
    emitNest(LoopNest(space, accesses), buffers);
}

bool FunctionEmitter::emitInPreparedChunks(
    ValueRange results, ArrayRef<int64_t> space, ArrayRef<Access> accesses,
    ArrayRef<LoopBuffer> buffers,
    function_ref<void(const LoopNest &, ArrayRef<LoopBuffer>)> emitNest) {
  // The update of a state that products read prepared, computed in the
  // state's buffer: the nest runs a chunk of the state's rows at a time,
  // and the chunk's part of the prepared operands is made right after it,
  // while its rows are in the caches, instead of from memory once the
  // whole update is done (GPT-2 124M's AdamW updates, then 300 MB of
  // packing for the tied embedding's two prepared operands alone).
  if (!bufferPlan)
    return false;
  Value update;
  int64_t index = -1;
  for (Value r : results) {
    auto it = stateUpdateArg.find(r);
    if (it == stateUpdateArg.end() || bufferPlan->getRoot(r) != it->second ||
        preparedUpdates.contains(r))
      continue;
    update = r;
    index = program.updatedStates.lookup(it->second);
    break;
  }
  if (!update)
    return false;
  ArrayRef<int64_t> shape = shapeOf(update);
  int64_t pitch =
      hooks.getPreparedRowPitch(index, shape.empty() ? 1 : shape.back());
  int64_t elements = getNumElements(space);
  if (pitch <= 0 || elements % pitch != 0)
    return false;
  // Every access walks the whole space in order or reads one element (the
  // optimizer's scalars), so a chunk is a range of each walked buffer.
  SmallVector<int64_t> dense = getContiguousStrides(space);
  SmallVector<bool> walked;
  for (const Access &a : accesses) {
    bool whole = a.base == 0 && a.strides == dense;
    if (!whole && (a.base != 0 ||
                   llvm::any_of(a.strides, [](int64_t s) { return s != 0; })))
      return false;
    walked.push_back(whole);
  }
  // Chunks of about 256 KB of the state, in whole 32-row panels of a
  // transposed operand's columns.
  constexpr int64_t kChunkBytes = 256 << 10, kRowsPerPanel = 32;
  int64_t rows = elements / pitch;
  int64_t rowBytes =
      pitch * std::max<int64_t>(1, elemOf(update).getIntOrFloatBitWidth() / 8);
  int64_t chunkRows =
      std::max<int64_t>(1, kChunkBytes / rowBytes / kRowsPerPanel) *
      kRowsPerPanel;
  if (chunkRows >= rows)
    return false;
  auto chunk = [&](int64_t count, StringRef first) {
    SmallVector<LoopBuffer> inChunk(buffers);
    SmallVector<Access> chunkAccesses;
    int64_t length = count * pitch;
    for (auto [k, whole] : llvm::enumerate(walked)) {
      chunkAccesses.push_back(whole ? Access::contiguous({length})
                                    : Access::broadcast({1}, {length}));
      if (whole)
        inChunk[k].pointer = "(" + inChunk[k].pointer + " + " + first.str() +
                             " * " + std::to_string(pitch) + ")";
    }
    emitNest(LoopNest({length}, chunkAccesses), inChunk);
  };
  std::string weight = ptr(update);
  hooks.emitRowChunks(rows, chunkRows, [&](StringRef first, int64_t count) {
    chunk(count, first);
    hooks.emitPrepareWeightRows(index, weight, first,
                                first.str() + " + " + std::to_string(count),
                                rows, pitch);
  });
  preparedUpdates.insert(update);
  return true;
}

void FunctionEmitter::fusionLocals(FusionOp fusion,
                                   ArrayRef<std::string> inputs,
                                   function_ref<bool(Value)> include,
                                   StringRef qualifier,
                                   llvm::DenseMap<Value, std::string> &scalar,
                                   std::string &text) {
  // Each body value becomes a local, named in the order made.
  Block &block = fusion.getBody().front();
  auto local = [&](Value v, StringRef init) {
    std::string n = "t" + std::to_string(scalar.size());
    text += qualifier.str() + type(v) + " " + n + " = " + init.str() + "; ";
    scalar[v] = n;
  };
  auto wanted = [&](Value v) { return !scalar.count(v) && include(v); };
  for (BlockArgument arg : block.getArguments())
    if (!arg.use_empty() && wanted(arg))
      local(arg, inputs[arg.getArgNumber()]);
  for (Operation &op : block.without_terminator()) {
    if (!wanted(op.getResult(0)))
      continue;
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
}

SmallVector<std::string>
FunctionEmitter::fusionScalars(FusionOp fusion, ArrayRef<std::string> inputs,
                               std::string &text,
                               llvm::DenseMap<Value, std::string> given) {
  llvm::DenseMap<Value, std::string> scalar = std::move(given);
  fusionLocals(
      fusion, inputs, [](Value) { return true; }, "", scalar, text);
  SmallVector<std::string> results;
  for (Value v : fusion.getBody().front().getTerminator()->getOperands())
    results.push_back(scalar.lookup(v));
  return results;
}

llvm::DenseSet<Value> FunctionEmitter::fusionInvariants(FusionOp fusion) {
  Block &block = fusion.getBody().front();
  llvm::DenseSet<Value> invariant;
  bool read = false, computed = false;
  for (BlockArgument arg : block.getArguments())
    if (!arg.use_empty() &&
        getNumElements(shapeOf(fusion.getInputs()[arg.getArgNumber()])) == 1) {
      invariant.insert(arg);
      read = true;
    }
  for (Operation &op : block.without_terminator())
    if (op.getNumResults() == 1 && llvm::all_of(op.getOperands(), [&](Value v) {
          return invariant.contains(v);
        })) {
      invariant.insert(op.getResult(0));
      computed |= !isa<ConstantOp>(op);
    }
  if (!read && !computed)
    invariant.clear();
  return invariant;
}

void FunctionEmitter::fusion(FusionOp fusion) {
  // One loop nest over the results' shape, each operand read broadcast to
  // that shape. What is the same for every element is computed once,
  // before the nest.
  unsigned numResults = fusion.getNumResults();
  llvm::DenseSet<Value> invariant = fusionInvariants(fusion);
  llvm::DenseMap<Value, std::string> hoisted;
  // Made once per kernel: a nest emitted in chunks has two.
  auto prologue = [&](ArrayRef<std::string> name) {
    hoisted.clear();
    SmallVector<std::string> reads;
    for (unsigned k = 0; k < fusion.getInputs().size(); ++k)
      reads.push_back(name[numResults + k] + "[0]");
    std::string text;
    fusionLocals(
        fusion, reads, [&](Value v) { return invariant.contains(v); }, "const ",
        hoisted, text);
    return text;
  };
  elementwiseNest(
      fusion.getResults(), fusion.getInputs(),
      [&](ArrayRef<std::string> name, ArrayRef<std::string> off) {
        SmallVector<std::string> reads;
        for (unsigned k = 0; k < fusion.getInputs().size(); ++k)
          reads.push_back(name[numResults + k] + "[" + off[numResults + k] +
                          "]");
        std::string text;
        SmallVector<std::string> results =
            fusionScalars(fusion, reads, text, hoisted);
        for (auto [k, r] : llvm::enumerate(results))
          text += name[k] + "[" + off[k] + "] = " + r + "; ";
        return text;
      },
      invariant.empty()
          ? function_ref<std::string(ArrayRef<std::string>)>(nullptr)
          : function_ref<std::string(ArrayRef<std::string>)>(prologue));
}

std::optional<LogicalResult> FunctionEmitter::emitElementwiseOp(Operation *op) {
  auto result = [&](unsigned i = 0) { return op->getResult(i); };
  std::string t = op->getNumResults() ? type(result()) : "";
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
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
      .Default([](Operation *) { return std::nullopt; });
}
