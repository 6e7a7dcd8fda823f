//===- GraphTraining.cpp - Verifies the training-step contract ------------===//
//
// The Graph dialect's attribute verifiers: every graph.* attribute on a
// function's arguments and results, and graph.backward on ops, is checked
// where it is attached, against the function it is attached in.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphTraining.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace pcc::graph;

StringRef pcc::graph::getStateName(FunctionOpInterface func, unsigned arg) {
  if (arg >= func.getNumArguments())
    return {};
  if (auto name = func.getArgAttrOfType<StringAttr>(arg, kStateAttr))
    return name.getValue();
  return {};
}

std::optional<unsigned> pcc::graph::getStateIndex(FunctionOpInterface func,
                                                  unsigned result,
                                                  StringRef attrName) {
  if (auto index = func.getResultAttrOfType<IntegerAttr>(result, attrName))
    return unsigned(index.getInt());
  return std::nullopt;
}

std::optional<unsigned> pcc::graph::getLossIndex(FunctionOpInterface func) {
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (func.getResultAttr(i, kLossAttr))
      return i;
  return std::nullopt;
}

LogicalResult GraphDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  for (StringRef unit : {kBackwardAttr, kGradientNormAttr})
    if (attr.getName() == unit) {
      if (!isa<UnitAttr>(attr.getValue()))
        return op->emitError() << unit << " must be a unit attribute";
      return success();
    }
  // pcc-fuse's code-generation marks: a product's epilogue, a softmax's
  // row prologue.
  if (attr.getName() == kEpilogueAttr || attr.getName() == kRowPrologueAttr) {
    bool epilogue = attr.getName() == kEpilogueAttr;
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << attr.getName() << " must be a unit attribute";
    if (epilogue && !isa<GemmOp, MatMulOp>(op))
      return op->emitError() << kEpilogueAttr << " is for graph.gemm and "
                             << "graph.matmul";
    if (!epilogue &&
        (!isa<FusionOp>(op) || op->getNumResults() != 1 ||
         !op->getResult(0).hasOneUse() ||
         !isa<SoftmaxOp, LogSoftmaxOp>(*op->getResult(0).getUsers().begin())))
      return op->emitError() << kRowPrologueAttr << " is for a graph.fusion "
                             << "of one result that only a softmax reads";
    return success();
  }
  if (attr.getName() == kLossPiecesAttr) {
    auto pieces = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !pieces || pieces.getInt() < 2)
      return op->emitError() << kLossPiecesAttr
                             << " must be a function's integer of at least 2";
    return success();
  }
  if (attr.getName() == kRecomputeAttr) {
    // {ops, flops, bytes}, with optionally the same per stage (`stages`),
    // the budget auto fitted (`budget`) and the ranks above it (`over`:
    // {rank, bytes} each).
    auto hasIntegers = [](Attribute a, ArrayRef<StringRef> keys) {
      auto dict = dyn_cast<DictionaryAttr>(a);
      return dict && llvm::all_of(keys, [&](StringRef key) {
               return bool(dict.getAs<IntegerAttr>(key));
             });
    };
    auto listOf = [&](Attribute a, ArrayRef<StringRef> keys) {
      auto list = dyn_cast<ArrayAttr>(a);
      return list && llvm::all_of(list, [&](Attribute entry) {
               return hasIntegers(entry, keys);
             });
    };
    auto totals = dyn_cast<DictionaryAttr>(attr.getValue());
    bool valid =
        isa<ModuleOp>(op) && hasIntegers(totals, {"ops", "flops", "bytes"}) &&
        llvm::all_of(totals, [&](NamedAttribute entry) {
          StringRef key = entry.getName().getValue();
          Attribute value = entry.getValue();
          if (key == "stages")
            return listOf(value, {"ops", "flops", "bytes"});
          if (key == "over")
            return listOf(value, {"rank", "bytes"});
          return isa<IntegerAttr>(value) &&
                 llvm::is_contained(
                     ArrayRef<StringRef>{"ops", "flops", "bytes", "budget"},
                     key);
        });
    if (!valid)
      return op->emitError()
             << kRecomputeAttr
             << " must be a module's dictionary of integers ops, flops and "
                "bytes, and optionally budget, stages (their per-stage "
                "dictionaries) and over (dictionaries of rank and bytes)";
    return success();
  }
  return op->emitError() << "unknown Graph dialect attribute '"
                         << attr.getName().getValue() << "' on an operation";
}

/// The argument of `func` that `attr` (an index) names, which must hold a
/// state of `type` when given.
static FailureOr<unsigned> stateArgument(FunctionOpInterface func,
                                         NamedAttribute attr, StringRef where,
                                         Type type) {
  auto index = dyn_cast<IntegerAttr>(attr.getValue());
  if (!index)
    return func.emitError() << where << ": " << attr.getName().getValue()
                            << " must be an integer argument index",
           failure();
  int64_t i = index.getInt();
  if (i < 0 || i >= int64_t(func.getNumArguments()))
    return func.emitError()
               << where << ": " << attr.getName().getValue() << " names "
               << "argument " << i << ", out of range",
           failure();
  if (getStateName(func, i).empty())
    return func.emitError()
               << where << ": " << attr.getName().getValue()
               << " names argument " << i << ", which is no graph.state",
           failure();
  if (type && func.getArgumentTypes()[i] != type)
    return func.emitError() << where << ": " << attr.getName().getValue()
                            << " names argument " << i << " of type "
                            << func.getArgumentTypes()[i] << ", not " << type,
           failure();
  return unsigned(i);
}

LogicalResult GraphDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return op->emitError() << attr.getName().getValue()
                           << " is only valid on a function's arguments";
  std::string where = "argument " + std::to_string(argIndex);
  Type type = func.getArgumentTypes()[argIndex];
  StringRef name = attr.getName().getValue();
  if (name == kStateAttr) {
    auto state = dyn_cast<StringAttr>(attr.getValue());
    if (!state || state.getValue().empty())
      return func.emitError()
             << where << ": " << kStateAttr << " must be a non-empty string";
    if (!func.getArgAttr(argIndex, kInitAttr))
      return func.emitError() << where << ": state '" << state.getValue()
                              << "' has no " << kInitAttr << " value";
    // Names are unique: checked once per function, at its first state
    // argument, so that a step with thousands of states verifies in linear
    // time.
    for (unsigned i = 0; i < argIndex; ++i)
      if (!getStateName(func, i).empty())
        return success();
    llvm::StringMap<unsigned> seen;
    for (unsigned i = argIndex; i < func.getNumArguments(); ++i) {
      StringRef other = getStateName(func, i);
      if (other.empty())
        continue;
      auto [it, inserted] = seen.try_emplace(other, i);
      if (!inserted)
        return func.emitError() << "argument " << it->second << ": state '"
                                << other << "' is also argument " << i;
    }
    return success();
  }
  if (name == kInitAttr) {
    auto init = dyn_cast<ElementsAttr>(attr.getValue());
    if (!init)
      return func.emitError()
             << where << ": " << kInitAttr << " must be an elements attribute";
    // A state split over ranks (tensor parallelism) keeps its whole
    // initial value: each rank's argument is a block of it.
    auto argType = cast<ShapedType>(type);
    bool split = func.getArgAttr(argIndex, "dist.sharding") != nullptr;
    if (split ? init.getShapedType().getElementType() !=
                        argType.getElementType() ||
                    init.getShapedType().getRank() != argType.getRank()
              : init.getType() != type)
      return func.emitError() << where << ": " << kInitAttr << " has type "
                              << init.getType() << ", the argument " << type;
    if (getStateName(func, argIndex).empty())
      return func.emitError()
             << where << ": " << kInitAttr << " without " << kStateAttr;
    return success();
  }
  if (name == kCacheAttr) {
    if (!isa<UnitAttr>(attr.getValue()))
      return func.emitError() << where << ": " << kCacheAttr
                              << " must be a unit attribute";
    if (getStateName(func, argIndex).empty())
      return func.emitError()
             << where << ": " << kCacheAttr << " without " << kStateAttr;
    return success();
  }
  if (name == kStateOfAttr) {
    if (getStateName(func, argIndex).empty())
      return func.emitError()
             << where << ": " << kStateOfAttr << " without " << kStateAttr;
    FailureOr<unsigned> param = stateArgument(func, attr, where, Type());
    if (failed(param))
      return failure();
    if (*param == argIndex)
      return func.emitError()
             << where << ": " << kStateOfAttr << " names the argument itself";
    return success();
  }
  if (name == kPreviousVersionAttr) {
    if (!isa<UnitAttr>(attr.getValue()) ||
        !func.getArgAttr(argIndex, kStateOfAttr))
      return func.emitError()
             << where << ": " << kPreviousVersionAttr
             << " must be a unit attribute beside " << kStateOfAttr;
    return success();
  }
  if (name == kIndexBoundAttr) {
    auto bound = dyn_cast<IntegerAttr>(attr.getValue());
    auto argType = dyn_cast<ShapedType>(type);
    if (!bound || bound.getInt() <= 0 || !argType ||
        !isa<IntegerType>(argType.getElementType()))
      return func.emitError()
             << where << ": " << kIndexBoundAttr
             << " must be a positive integer on an integer tensor";
    return success();
  }
  if (name == kIndexNodeAttr) {
    if (!isa<StringAttr>(attr.getValue()) ||
        !func.getArgAttr(argIndex, kIndexBoundAttr))
      return func.emitError() << where << ": " << kIndexNodeAttr
                              << " must be a string beside "
                              << kIndexBoundAttr;
    return success();
  }
  return func.emitError() << where << ": unknown Graph dialect attribute '"
                          << name << "'";
}

LogicalResult GraphDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return op->emitError() << attr.getName().getValue()
                           << " is only valid on a function's results";
  std::string where = "result " + std::to_string(resultIndex);
  Type type = func.getResultTypes()[resultIndex];
  StringRef name = attr.getName().getValue();
  if (name == kUpdateAttr || name == kGradAttr) {
    StringRef other = name == kUpdateAttr ? kGradAttr : kUpdateAttr;
    if (func.getResultAttr(resultIndex, other))
      return func.emitError() << where << " is both a gradient and a state "
                              << "update";
    // A gradient laid out apart from its parameter (split over data
    // parallelism where the parameter is whole: ZeRO 2) is a block of it:
    // same element type and rank, each extent dividing the parameter's.
    bool laidOutApart =
        name == kGradAttr && func.getResultAttr(resultIndex, "dist.sharding");
    FailureOr<unsigned> state =
        stateArgument(func, attr, where, laidOutApart ? Type() : type);
    if (failed(state))
      return failure();
    if (laidOutApart) {
      auto block = dyn_cast<RankedTensorType>(type);
      auto whole = dyn_cast<RankedTensorType>(func.getArgumentTypes()[*state]);
      bool fits = block && whole &&
                  block.getElementType() == whole.getElementType() &&
                  block.getRank() == whole.getRank();
      for (int64_t d = 0; fits && d < block.getRank(); ++d)
        fits = block.getDimSize(d) > 0 &&
               whole.getDimSize(d) % block.getDimSize(d) == 0;
      if (!fits)
        return func.emitError() << where << ": " << name << " names argument "
                                << *state << " of type " << whole
                                << ", of which " << type << " is no block",
               failure();
    }
    // One gradient and one update per state: checked once per function
    // and kind, at the first result of that kind (linear time). Whether
    // one comes before is asked nearest first: results of a kind lie
    // together (a step's updates, its gradients), so that the question
    // takes a few lookups, not one per earlier result (at every result, a
    // quadratic search that took 30% of planning GPT-3 at pp 16).
    for (unsigned i = resultIndex; i-- > 0;)
      if (getStateIndex(func, i, name))
        return success();
    llvm::DenseMap<unsigned, unsigned> seen;
    for (unsigned i = resultIndex; i < func.getNumResults(); ++i) {
      std::optional<unsigned> s = getStateIndex(func, i, name);
      if (!s)
        continue;
      auto [it, inserted] = seen.try_emplace(*s, i);
      if (!inserted)
        return func.emitError()
               << "result " << it->second << ": argument " << *s << " ('"
               << getStateName(func, *s) << "') has a second "
               << (name == kUpdateAttr ? "update" : "gradient") << " in result "
               << i;
    }
    return success();
  }
  if (name == kLossAttr) {
    if (!isa<UnitAttr>(attr.getValue()))
      return func.emitError()
             << where << ": " << kLossAttr << " must be a unit attribute";
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t || t.getRank() != 0 || !isa<FloatType>(t.getElementType()))
      return func.emitError() << where << ": the loss must be a float "
                              << "scalar, got " << type;
    if (getLossIndex(func) != resultIndex)
      return func.emitError() << where << ": a second " << kLossAttr;
    return success();
  }
  return func.emitError() << where << ": unknown Graph dialect attribute '"
                          << name << "'";
}

BlockArgument pcc::graph::addStateArgument(FunctionOpInterface func,
                                           StringRef name, ElementsAttr init,
                                           std::optional<unsigned> of,
                                           Location loc,
                                           ArrayRef<NamedAttribute> extra) {
  Builder b(func.getContext());
  SmallVector<NamedAttribute> attrs{
      b.getNamedAttr(kStateAttr, b.getStringAttr(name)),
      b.getNamedAttr(kInitAttr, init)};
  if (of)
    attrs.push_back(b.getNamedAttr(kStateOfAttr, b.getI64IntegerAttr(*of)));
  llvm::append_range(attrs, extra);
  unsigned index = func.getNumArguments();
  (void)func.insertArgument(index, init.getType(), b.getDictionaryAttr(attrs),
                            loc);
  return func.getArgument(index);
}
