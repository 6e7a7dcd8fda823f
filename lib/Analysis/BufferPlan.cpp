//===- BufferPlan.cpp - Where each value of a function lives --------------===//

#include "pcc/Analysis/BufferPlan.h"

#include "pcc/Analysis/CostModel.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GemmOperands.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace pcc;

namespace {
/// First fit over the blocks alive at one point of the function.
class Allocator {
public:
  explicit Allocator(int64_t alignment) : alignment(alignment) {}

  int64_t allocate(Value owner) {
    int64_t size = std::max<int64_t>(getTensorBytes(owner.getType()), 1);
    size = (size + alignment - 1) / alignment * alignment;
    llvm::sort(live, [](const Block &a, const Block &b) {
      return a.offset < b.offset;
    });
    int64_t at = 0;
    for (const Block &b : live) {
      if (b.offset - at >= size)
        break;
      at = std::max(at, b.offset + b.size);
    }
    high = std::max(high, at + size);
    live.push_back({at, size, owner});
    return at;
  }
  void freeIf(llvm::function_ref<bool(Value)> dead) {
    llvm::erase_if(live, [&](const Block &b) { return dead(b.owner); });
  }
  int64_t getHighWaterMark() const { return high; }

private:
  struct Block {
    int64_t offset, size;
    Value owner;
  };
  int64_t alignment;
  SmallVector<Block> live;
  int64_t high = 0;
};
} // namespace

BufferPlan::BufferPlan(func::FuncOp func, const BufferPlanOptions &options) {
  Block &block = func.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  auto isExternal = [&](Value v) {
    return options.isExternal && options.isExternal(v);
  };
  auto writeBack = [&](unsigned k) -> int64_t {
    return k < options.writeBack.size() ? options.writeBack[k] : -1;
  };

  // Views alias their source; liveness is tracked per root buffer.
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  llvm::DenseMap<Value, int64_t> lastUse;
  // `v` lives where `source` does (its root, at its offset there).
  auto alias = [&](Value v, Value source) {
    roots[v] = getRoot(source);
    if (int64_t offset = getViewOffset(source))
      viewOffsets[v] = offset;
  };
  // `result`, a buffer of its own so far, and its views move into where
  // `source` lives: `result` is computed there, live as long as either.
  auto moveInto = [&](Value result, Value source) {
    Value root = getRoot(source);
    int64_t offset = getViewOffset(source);
    for (auto &entry : roots)
      if (entry.second == result) {
        entry.second = root;
        if (offset)
          viewOffsets[entry.first] += offset;
      }
    alias(result, source);
    lastUse[root] = std::max(lastUse.lookup(root), lastUse.lookup(result));
  };
  for (auto [i, op] : llvm::enumerate(ops)) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(op))
      alias(view.getViewDest(), view.getViewSource());
    // An update in place (a KV cache's write) takes its operand's buffer,
    // unless that is a constant the target holds, which it must not write.
    else if (op->hasTrait<graph::OpTrait::UpdatesInPlace>() &&
             !isExternal(getRoot(op->getOperand(0))))
      alias(op->getResult(0), op->getOperand(0));
    else if (Value source =
                 options.getViewSource ? options.getViewSource(op) : Value())
      for (Value result : op->getResults())
        roots[result] = getRoot(source);
    // A call's result that its callee writes into the buffer of one of its
    // arguments (a partial sum it adds to) is that operand's buffer.
    else if (auto call = dyn_cast<func::CallOp>(op))
      for (auto [k, operand] : getAccumulatedOperands(call))
        alias(call.getResult(k), operand);
    // A slice that is one block of a buffer computed here is that part of
    // it: the gradients sliced out of an all-reduced bucket, the logits
    // the loss reads of a batch of one.
    else if (std::optional<int64_t> offset =
                 options.sliceViews ? getSliceOffset(op) : std::nullopt) {
      Value input = op->getOperand(0), root = getRoot(input);
      if (isa<OpResult>(root) && !isExternal(root)) {
        roots[op->getResult(0)] = root;
        viewOffsets[op->getResult(0)] = getViewOffset(input) + *offset;
      }
    }
    SmallVector<Value> reads(op->getOperands());
    if (options.getExtraReads)
      options.getExtraReads(op, reads);
    for (Value v : reads)
      lastUse[getRoot(v)] = std::max<int64_t>(lastUse.lookup(getRoot(v)), i);
  }

  // A state update whose op reads the state it replaces element by element
  // (an element-wise op or fusion, the state as an operand of the result's
  // shape), as the state's last reader, is computed in place in the
  // state's buffer: no workspace block and no copy at the end. Not when
  // the old state is also returned, nor when an op that may fail follows
  // (a failed step leaves the state as it was).
  if (options.mayFail && !options.writeBack.empty()) {
    int64_t lastMayFail = -1;
    for (auto [i, op] : llvm::enumerate(ops))
      if (options.mayFail(op))
        lastMayFail = int64_t(i);
    llvm::DenseMap<Operation *, int64_t> index;
    for (auto [i, op] : llvm::enumerate(ops))
      index[op] = int64_t(i);
    llvm::DenseSet<Value> returned;
    for (Value v : ret.getOperands())
      returned.insert(getRoot(v));
    for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
      int64_t arg = writeBack(k);
      auto result = dyn_cast<OpResult>(v);
      if (arg < 0 || !result || isView(v) || isExternal(v))
        continue;
      Operation *op = result.getOwner();
      Value state = block.getArgument(arg);
      // A sum added term by term (a gradient accumulated over microbatches,
      // getAccumulatedTerms): the adds from the update down to the one
      // that reads the state, each the only reader of the one after it,
      // all computed in the state's buffer.
      SmallVector<Value> chain{v};
      while (auto add = dyn_cast<graph::AddOp>(op)) {
        if (llvm::is_contained(add->getOperands(), state))
          break;
        Value next;
        for (Value operand : add->getOperands())
          if (operand.getDefiningOp<graph::AddOp>() && operand.hasOneUse() &&
              operand.getType() == v.getType() && !isView(operand) &&
              !isExternal(operand) && !next)
            next = operand;
        if (!next)
          break;
        chain.push_back(next);
        op = next.getDefiningOp();
      }
      bool elementwise = op->hasTrait<graph::OpTrait::Elementwise>() ||
                         isa<graph::FusionOp>(op);
      if (!elementwise || returned.contains(state) ||
          index.lookup(op) < lastMayFail ||
          lastUse.lookup(state) != index.lookup(op) ||
          llvm::count(ret.getOperands(), v) != 1)
        continue;
      // Read at the same elements: directly, with the result's type (by
      // the op, or by what it computes on the fly, element by element).
      SmallVector<Value> reads(op->getOperands());
      if (options.getExtraReads)
        options.getExtraReads(op, reads);
      bool aligned = llvm::all_of(reads, [&](Value operand) {
        return getRoot(operand) != state ||
               (operand == state && operand.getType() == v.getType());
      });
      if (!aligned || !llvm::is_contained(reads, state))
        continue;
      for (Value link : chain) {
        roots[link] = state;
        updatedInPlace.insert(link);
      }
    }
  }

  // An op that adds its result into a partial sum does so in the partial
  // sum's buffer where the sum is computed in place there: the result and
  // its views live in that buffer, which from the op on holds the sum. Only
  // a partial sum that is a buffer of its own, which the sum alone reads:
  //  - an argument that the sum is written back into (a gradient
  //    accumulated over microbatches), not where the op or one before the
  //    sum may fail: a failed step leaves its state as it was;
  //  - a buffer computed here before the op (a tied embedding's head
  //    gradient, which its rows are scattered into), where the sum, a
  //    buffer of its own so far, then lives too. It holds no state.
  // And a partial sum that is a link of a sum added term by term in a
  // state's buffer, like the sum (the head's product added to the
  // accumulated gradient there, then the embedding's rows).
  if (options.getAccumulation)
    for (auto [i, op] : llvm::enumerate(ops)) {
      auto [sum, partial] = options.getAccumulation(op);
      if (!sum || isExternal(partial) || isExternal(sum))
        continue;
      Operation *made = partial.getDefiningOp();
      if (made &&
          (made->getBlock() != &block || !made->isBeforeInBlock(op)))
        continue;
      if (getRoot(partial) != partial) {
        // A partial sum already in the buffer the sum is in: a sum added
        // term by term in a state's buffer (above).
        if (!made || !updatedInPlace.contains(partial) ||
            getRoot(sum) != getRoot(partial))
          continue;
      } else if (made) {
        if (getRoot(sum) != sum)
          continue;
        moveInto(sum, partial);
      } else {
        if (getRoot(sum) != partial)
          continue;
        bool mayFail = false;
        for (Operation *next : ArrayRef(ops).drop_front(i)) {
          if (next == sum.getDefiningOp())
            break;
          mayFail |= options.mayFail && options.mayFail(next);
        }
        if (mayFail)
          continue;
      }
      Value result = op->getResult(0);
      moveInto(result, partial);
      accumulated.insert(result);
    }

  // The buffers that no op may compute into in place: those returned (as
  // their roots are now) and those a send reads to the end.
  auto getPinnedRoots = [&] {
    llvm::DenseSet<Value> pinned;
    for (Value v : ret.getOperands())
      pinned.insert(getRoot(v));
    for (Operation *op : ops)
      for (OpOperand &operand : op->getOpOperands())
        if (options.readsUntilEnd && options.readsUntilEnd(operand))
          pinned.insert(getRoot(operand.get()));
    return pinned;
  };

  // A collective that reduces its operand into a result of the same type
  // (an all-reduce) computes it in the operand's buffer where nothing but
  // its own wait reads that buffer after it: a bucket of gradients travels
  // where it was made, with no copy first. Not an argument's buffer, a
  // constant's, nor one that is returned or that a send reads to the end.
  if (options.reducesInPlace) {
    llvm::DenseSet<Value> pinned = getPinnedRoots();
    for (auto [i, op] : llvm::enumerate(ops)) {
      if (!options.reducesInPlace(op))
        continue;
      Value result = op->getResult(0);
      Value root = getRoot(op->getOperand(0));
      if (op->getOperand(0).getType() != result.getType() || isView(result) ||
          !isa<OpResult>(root) || isExternal(root) || pinned.contains(root))
        continue;
      // Its readers after the collective: its wait alone.
      bool readAfter = false;
      for (int64_t k = int64_t(i) + 1;
           !readAfter && k <= lastUse.lookup(root) && k < int64_t(ops.size());
           ++k) {
        auto wait = dyn_cast<dist::WaitOp>(ops[k]);
        if (wait && wait.getCollective() == op)
          continue;
        SmallVector<Value> reads(ops[k]->getOperands());
        if (options.getExtraReads)
          options.getExtraReads(ops[k], reads);
        readAfter =
            llvm::any_of(reads, [&](Value v) { return getRoot(v) == root; });
      }
      if (!readAfter)
        moveInto(result, op->getOperand(0));
    }
  }

  // An element-wise op whose operand of the result's type is a buffer
  // computed here that nothing reads after it computes its result there.
  // Not an argument's buffer, a constant's, nor one that is returned, that
  // a send reads to the end, or that a product or scatter accumulates
  // into. The target reads and writes it through one parameter
  // (isUpdatedInPlace).
  if (options.elementwiseInPlace) {
    llvm::DenseSet<Value> pinned = getPinnedRoots();
    for (Value v : accumulated)
      pinned.insert(getRoot(v));
    for (auto [i, op] : llvm::enumerate(ops)) {
      // (A returned result is computed in its result's buffer instead.)
      if (!op->hasTrait<graph::OpTrait::Elementwise>() ||
          op->getNumResults() != 1 || isView(op->getResult(0)) ||
          llvm::is_contained(ret.getOperands(), op->getResult(0)))
        continue;
      Value result = op->getResult(0);
      // Not an op that reads more than its operands (one that runs as a
      // product's epilogue, inside the product, which reads its own).
      SmallVector<Value> extra;
      if (options.getExtraReads)
        options.getExtraReads(op, extra);
      if (!extra.empty())
        continue;
      for (Value operand : op->getOperands()) {
        Value root = getRoot(operand);
        if (operand != root || operand.getType() != result.getType() ||
            !isa<OpResult>(root) || isExternal(root) || pinned.contains(root) ||
            lastUse.lookup(root) != int64_t(i) ||
            llvm::count(op->getOperands(), operand) != 1)
          continue;
        moveInto(result, operand);
        updatedInPlace.insert(result);
        break;
      }
    }
  }

  // A value an op computes, first returned as result k, is computed in
  // place in result k's buffer; everything else the function returns is
  // copied there at the end (written-back results into their arguments).
  // An optional result's buffer may be missing: only a value whose op runs
  // just when it is given is computed there.
  auto hasBuffer = [&](unsigned k, Value v) {
    return !options.isOptionalResult || !options.isOptionalResult(k) ||
           (options.runsOnlyWhenAsked && options.runsOnlyWhenAsked(k, v));
  };
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (writeBack(k) < 0 && hasBuffer(k, v) && isa<OpResult>(v) && !isView(v) &&
        !isExternal(v) && !v.getDefiningOp()->hasTrait<OpTrait::ConstantLike>())
      resultSlots.try_emplace(v, k);

  // Returned buffers stay alive to the end, and so do those read until
  // then.
  llvm::DenseSet<Value> liveToEnd;
  for (Value v : ret.getOperands())
    liveToEnd.insert(getRoot(v));
  if (options.readsUntilEnd)
    for (Operation *op : ops)
      for (OpOperand &operand : op->getOpOperands())
        if (options.readsUntilEnd(operand))
          liveToEnd.insert(getRoot(operand.get()));

  // A concatenation along its outermost dimension, whose every input is
  // the whole of a buffer computed here that only the concatenation reads
  // (through views), is made in place: each input's buffer is its part of
  // the concatenation's block, which is allocated when the first of them
  // is computed and lives until the concatenation's last reader. So is the
  // source of an insert_slice that is one block of its result (the
  // gradient of a shifted loss's logits, all rows but the last): the
  // insert_slice then writes only the zeros around it. No part is itself
  // such a block (a concatenation of concatenations): its own parts lie in
  // it from their first op on, and it could not move into another later.
  llvm::DenseMap<Value, std::pair<Value, int64_t>> partOf;
  llvm::DenseMap<Value, int64_t> concatIndex;
  if (options.concatInPlace)
    for (auto [i, op] : llvm::enumerate(ops)) {
      // The op's inputs, each with the byte where it starts in the result.
      SmallVector<std::pair<Value, int64_t>> inputs;
      if (canConcatenateInPlace(op)) {
        int64_t at = 0;
        for (Value input : cast<graph::ConcatOp>(op).getInputs()) {
          inputs.push_back({input, at});
          at += getTensorBytes(input.getType());
        }
      } else if (std::optional<int64_t> offset = getInsertSliceOffset(op)) {
        inputs.push_back({op->getOperand(0), *offset});
      } else {
        continue;
      }
      Value whole = op->getResult(0);
      if (isView(whole) || resultSlots.count(whole) || isExternal(whole))
        continue;
      // Whether `input` is `root` or reaches `op` from it through views and
      // ops computed in its buffer (a sum that a scatter accumulates into
      // it), each read once.
      auto reaches = [&](Value root, Value input) {
        llvm::SmallPtrSet<Value, 4> chain;
        Operation *user = getViewChain(root, chain);
        while (user && user != op && user->getNumResults() == 1 &&
               getRoot(user->getResult(0)) == root)
          user = getViewChain(user->getResult(0), chain);
        return user == op && chain.contains(input);
      };
      SmallVector<std::pair<Value, int64_t>> parts;
      llvm::DenseSet<Value> seen;
      bool inPlace = true;
      for (auto [input, offset] : inputs) {
        Value root = getRoot(input);
        inPlace &=
            isa<OpResult>(root) && !isExternal(root) &&
            !resultSlots.count(root) && !liveToEnd.contains(root) &&
            !partOf.count(root) && !concatIndex.count(root) &&
            seen.insert(root).second &&
            getTensorBytes(root.getType()) == getTensorBytes(input.getType()) &&
            reaches(root, input);
        parts.push_back({root, offset});
      }
      if (!inPlace)
        continue;
      for (auto [root, offset] : parts)
        partOf[root] = {whole, offset};
      concatIndex[whole] = int64_t(i);
      if (isa<graph::ConcatOp>(op))
        concatenatedInPlace.insert(whole);
    }

  Allocator workspace(options.alignment);
  for (auto [i, op] : llvm::enumerate(ops)) {
    for (Value v : op->getResults()) {
      if (isView(v) || resultSlots.count(v) || isExternal(v))
        continue;
      if (auto part = partOf.find(v); part != partOf.end()) {
        auto [whole, offset] = part->second;
        if (!offsets.count(whole)) {
          offsets[whole] = workspace.allocate(whole);
          lastUse.try_emplace(whole, concatIndex.lookup(whole));
        }
        offsets[v] = offsets[whole] + offset;
        continue;
      }
      // A concatenation made in place has its block already.
      if (offsets.count(v))
        continue;
      offsets[v] = workspace.allocate(v);
      // A result nobody reads is still written: free it after this op.
      lastUse.try_emplace(v, i);
    }
    // Free blocks whose last reader is this op (results stay allocated
    // until after the op, so no op reads and writes the same bytes), also
    // after ops with no results of their own (a send's wait).
    workspace.freeIf([&](Value owner) {
      return lastUse.lookup(owner) <= int64_t(i) && !liveToEnd.contains(owner);
    });
  }

  // A write-back that reads another argument, itself written back, must
  // read it before that write-back lands: snapshot it in a block of its
  // own. (Every returned value is still live here, so the snapshots
  // overlap none.)
  llvm::DenseSet<int64_t> overwritten;
  for (unsigned k = 0; k < ret.getNumOperands(); ++k)
    if (writeBack(k) >= 0)
      overwritten.insert(writeBack(k));
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    auto arg = dyn_cast<BlockArgument>(getRoot(v));
    if (writeBack(k) < 0 || !arg || arg.getArgNumber() == writeBack(k) ||
        !overwritten.contains(arg.getArgNumber()))
      continue;
    snapshots[k] = workspace.allocate(v);
  }
  workspaceBytes = workspace.getHighWaterMark();
}

bool pcc::neverFails(Operation *) { return false; }

std::optional<int64_t> pcc::getSliceOffset(Operation *op) {
  auto slice = dyn_cast<graph::SliceOp>(op);
  if (!slice ||
      llvm::any_of(slice.getSteps(), [](int64_t s) { return s != 1; }))
    return std::nullopt;
  // One block: the dimensions after the first sliced one are whole, those
  // before it of extent 1.
  ArrayRef<int64_t> in = slice.getInput().getType().getShape();
  ArrayRef<int64_t> out = slice.getType().getShape();
  size_t first = 0;
  while (first < in.size() && out[first] == in[first])
    ++first;
  for (size_t d = first + 1; d < in.size(); ++d)
    if (out[d] != in[d])
      return std::nullopt;
  for (size_t d = 0; d < first && first < in.size(); ++d)
    if (in[d] != 1)
      return std::nullopt;
  int64_t offset = 0, stride = 1;
  for (size_t d = in.size(); d-- > 0;) {
    offset += slice.getStarts()[d] * stride;
    stride *= in[d];
  }
  int64_t elements = slice.getType().getNumElements();
  if (elements == 0)
    return std::nullopt;
  return offset * (getTensorBytes(slice.getType()) / elements);
}

std::optional<int64_t> pcc::getInsertSliceOffset(Operation *op) {
  auto insert = dyn_cast<graph::InsertSliceOp>(op);
  if (!insert)
    return std::nullopt;
  ArrayRef<int64_t> out = insert.getType().getShape();
  ArrayRef<int64_t> in = insert.getSource().getType().getShape();
  if (in.size() != out.size() || ShapedType::getNumElements(in) == 0)
    return std::nullopt;
  // One block: the source's first dimension of extent over 1 stepped by 1,
  // and every dimension after it whole.
  size_t first = 0;
  while (first < in.size() && in[first] == 1)
    ++first;
  if (first < in.size() && insert.getSteps()[first] != 1)
    return std::nullopt;
  for (size_t d = first + 1; d < in.size(); ++d)
    if (in[d] != out[d])
      return std::nullopt;
  int64_t offset = 0, stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    offset += insert.getStarts()[d] * stride;
    stride *= out[d];
  }
  return offset * (getTensorBytes(insert.getSource().getType()) /
                   ShapedType::getNumElements(in));
}

Value pcc::getComputedRoot(Value value) {
  while (auto view =
             dyn_cast_or_null<ViewLikeOpInterface>(value.getDefiningOp()))
    value = view.getViewSource();
  Operation *def = value.getDefiningOp();
  if (!def || def->hasTrait<OpTrait::ConstantLike>() ||
      isa<graph::WeightOp>(def))
    return {};
  return value;
}

bool pcc::isReducedInPlace(Operation *op) { return isa<dist::AllReduceOp>(op); }

bool pcc::canAccumulateInPlace(Operation *op) {
  if (auto gemm = dyn_cast<graph::GemmOp>(op))
    return !gemm.getC();
  return isa<graph::MatMulOp, graph::ScatterAddOp,
             graph::ScatterElementsAddOp>(op);
}

bool pcc::canConcatenateInPlace(Operation *op) {
  auto concat = dyn_cast<graph::ConcatOp>(op);
  if (!concat ||
      llvm::any_of(concat.getType().getShape().take_front(concat.getAxis()),
                   [](int64_t d) { return d != 1; }))
    return false;
  llvm::DenseSet<Value> roots;
  for (Value input : concat.getInputs()) {
    Value root = getComputedRoot(input);
    llvm::SmallPtrSet<Value, 4> chain;
    if (!root || !roots.insert(root).second ||
        getViewChain(root, chain) != op || !chain.contains(input))
      return false;
  }
  return true;
}

std::pair<Value, Value> pcc::getAccumulatingSum(Operation *op) {
  if (!canAccumulateInPlace(op) || op->getNumResults() != 1)
    return {};
  llvm::SmallPtrSet<Value, 4> chain;
  auto add =
      dyn_cast_or_null<graph::AddOp>(getViewChain(op->getResult(0), chain));
  if (!add)
    return {};
  Value term = add.getLhs(), partial = add.getRhs();
  if (!chain.contains(term))
    std::swap(term, partial);
  if (!chain.contains(term) || chain.contains(partial) ||
      term.getType() != add.getType() || partial.getType() != add.getType() ||
      !partial.hasOneUse())
    return {};
  return {add.getResult(), partial};
}

Operation *pcc::getViewedOp(Value v) {
  while (true) {
    Operation *def = v.getDefiningOp();
    auto view = dyn_cast_or_null<ViewLikeOpInterface>(def);
    if (!view)
      return def;
    v = view.getViewSource();
    if (!v.hasOneUse())
      return nullptr;
  }
}

SmallVector<Value> pcc::getAccumulatedTerms(Value sum) {
  if (!sum.getDefiningOp<graph::AddOp>())
    return {};
  // The leaves of the tree of adds, left to right.
  SmallVector<Value> terms, pending{sum};
  while (!pending.empty()) {
    Value v = pending.pop_back_val();
    auto add = v.getDefiningOp<graph::AddOp>();
    if (add && (v == sum || v.hasOneUse()) &&
        add.getLhs().getType() == sum.getType() &&
        add.getRhs().getType() == sum.getType()) {
      pending.push_back(add.getRhs());
      pending.push_back(add.getLhs());
      continue;
    }
    terms.push_back(v);
  }
  // 0: a product, 1: a scatter, 2: anything else.
  auto rank = [](Value term) {
    if (!term.hasOneUse())
      return 2;
    Operation *def = getViewedOp(term);
    if (!def || !canAccumulateInPlace(def))
      return 2;
    return isa<graph::ScatterAddOp, graph::ScatterElementsAddOp>(def) ? 1 : 0;
  };
  llvm::stable_sort(terms, [&](Value a, Value b) { return rank(a) < rank(b); });
  if (rank(terms.front()) != 0)
    return {};
  return terms;
}

bool pcc::accumulatesRows(Operation *op) {
  if (!isa<graph::ScatterAddOp, graph::ScatterElementsAddOp>(op) ||
      !op->hasOneUse() ||
      cast<ShapedType>(op->getOperand(0).getType()).getNumElements() >=
          cast<ShapedType>(op->getResult(0).getType()).getNumElements())
    return false;
  auto [sum, partial] = getAccumulatingSum(op);
  Operation *made = partial ? partial.getDefiningOp() : nullptr;
  return sum && *op->getUsers().begin() == sum.getDefiningOp() && made &&
         made->getBlock() == op->getBlock();
}

SmallVector<std::pair<unsigned, Value>>
pcc::getAccumulatedOperands(func::CallOp call) {
  SmallVector<std::pair<unsigned, Value>> pairs;
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      call, call.getCalleeAttr());
  if (!callee)
    return pairs;
  for (unsigned k = 0; k < callee.getNumResults(); ++k)
    if (auto j =
            callee.getResultAttrOfType<IntegerAttr>(k, dist::kAccumulatesAttr);
        j && j.getInt() >= 0 && j.getInt() < int64_t(call.getNumOperands()))
      pairs.push_back({k, call.getOperand(unsigned(j.getInt()))});
  return pairs;
}

bool pcc::mayWriteIntoOperand(func::CallOp call, unsigned k, Value operand) {
  if (isa<OpResult>(operand))
    return operand.hasOneUse();
  auto arg = dyn_cast<BlockArgument>(operand);
  auto func = call->getParentOfType<func::FuncOp>();
  if (!arg || !func || arg.getOwner() != call->getBlock() ||
      arg.getType() != call.getResult(k).getType())
    return false;
  auto ret = cast<func::ReturnOp>(call->getBlock()->getTerminator());
  bool updated =
      llvm::any_of(llvm::enumerate(ret.getOperands()), [&](auto indexed) {
        std::optional<unsigned> state = graph::getStateIndex(
            func, unsigned(indexed.index()), graph::kUpdateAttr);
        return indexed.value() == call.getResult(k) && state &&
               *state == arg.getArgNumber();
      });
  if (!updated)
    return false;
  int64_t byCall = 0;
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    if (user == call)
      ++byCall;
    else if (!user->isBeforeInBlock(call))
      return false;
  }
  return byCall == 1;
}

std::optional<int64_t> BufferPlan::getWorkspaceOffset(Value v) const {
  auto it = offsets.find(v);
  if (it == offsets.end())
    return std::nullopt;
  return it->second;
}

int64_t BufferPlan::getViewOffset(Value v) const {
  return viewOffsets.lookup(v);
}

std::optional<unsigned> BufferPlan::getResultSlot(Value v) const {
  auto it = resultSlots.find(v);
  if (it == resultSlots.end())
    return std::nullopt;
  return it->second;
}

std::optional<int64_t> BufferPlan::getSnapshotOffset(unsigned result) const {
  auto it = snapshots.find(result);
  if (it == snapshots.end())
    return std::nullopt;
  return it->second;
}

/// Whether `op` checks indices and returns early on one out of range.
static bool checksIndices(Operation *op) {
  return isa<graph::GatherOp, graph::GatherElementsOp, graph::ScatterAddOp,
             graph::ScatterElementsAddOp>(op);
}

bool pcc::mayReturnEarly(Operation *op) {
  if (isa<func::CallOp>(op))
    return true;
  if (!checksIndices(op))
    return false;
  // The first op of the block that checks these indices against this
  // extent is the one that may fail; it runs whenever a step does.
  auto indexing = cast<graph::IndexingOpInterface>(op);
  Value indices = indexing.getIndicesOperand().get();
  int64_t extent = indexing.getIndexedExtent();
  return llvm::none_of(indices.getUsers(), [&](Operation *user) {
    auto other = dyn_cast<graph::IndexingOpInterface>(user);
    return other && user != op && checksIndices(user) &&
           user->getBlock() == op->getBlock() && user->isBeforeInBlock(op) &&
           other.getIndicesOperand().get() == indices &&
           other.getIndexedExtent() == extent;
  });
}

int64_t pcc::getPlannedBytes(func::FuncOp func) {
  Block &body = func.getBody().front();
  int64_t held = 0;
  for (BlockArgument arg : body.getArguments())
    held += getTensorBytes(arg.getType());
  SmallVector<int64_t> writeBack;
  bool accumulates = false;
  // Every result is held: a step's gradients, which the emitter keeps in
  // the workspace (optional results) rather than in outputs, are counted
  // here as results, live to the end either way.
  for (unsigned k = 0; k < func.getNumResults(); ++k) {
    std::optional<unsigned> state =
        graph::getStateIndex(func, k, graph::kUpdateAttr);
    if (auto j =
            func.getResultAttrOfType<IntegerAttr>(k, dist::kAccumulatesAttr)) {
      state = unsigned(j.getInt());
      accumulates = true;
    }
    writeBack.push_back(state ? int64_t(*state) : -1);
    if (!state)
      held += getTensorBytes(func.getResultTypes()[k]);
  }
  // Weights (an inference step's, or a frozen one's) live outside the
  // workspace for the whole step; constants are the code's.
  for (graph::WeightOp w : body.getOps<graph::WeightOp>())
    held += getTensorBytes(w.getType());
  // An element-wise op that pcc-fuse computes inside its readers' loop
  // writes no buffer: its readers read its chain's inputs instead, until
  // they ran.
  BufferPlanOptions options;
  options.writeBack = writeBack;
  // A called function's partial sums are the step's own buffers, not
  // state that a failed step must leave as it was (as the program
  // emitter plans them).
  options.mayFail = accumulates ? neverFails : mayReturnEarly;
  auto external = [](Value v) {
    Operation *def = v.getDefiningOp();
    return isa_and_nonnull<graph::WeightOp, graph::ConstantOp>(def) ||
           (def && CostModel::isFusedIntoReaders(def));
  };
  options.isExternal = external;
  auto extraReads = [](Operation *op, SmallVectorImpl<Value> &reads) {
    llvm::SetVector<Value> inputs;
    if (CostModel::getFusedChainInputs(op, inputs))
      llvm::append_range(reads, inputs);
  };
  options.getExtraReads = extraReads;
  // Products and scatters add themselves into partial sums updated in
  // place, as the targets do.
  options.getAccumulation = getAccumulatingSum;
  options.concatInPlace = true;
  options.reducesInPlace = isReducedInPlace;
  options.sliceViews = true;
  options.elementwiseInPlace = true;
  return held + BufferPlan(func, options).getWorkspaceBytes();
}
