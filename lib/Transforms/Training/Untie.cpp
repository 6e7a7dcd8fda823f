//===- Untie.cpp - One copy of a shared initializer per consumer ----------===//
//
// The dynamo exporter's optimizer merges equal initializers, so a freshly
// initialized model reaches pcc with one tensor standing for the scale or
// bias of every layer, and training would update them as one. Untying gives
// each consumer its own copy, named after the consumer's ONNX node, so that
// pcc-select-trainable judges and trains each copy on its own and
// checkpoints name it by its use.
//
//===----------------------------------------------------------------------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

namespace pcc {
#define GEN_PASS_DEF_UNTIE
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc


FailureOr<unsigned> pcc::untieWeights(ModuleOp module, StringRef regex) {
  llvm::Regex re(regex);
  std::string error;
  if (!re.isValid(error))
    return module.emitError("--untie: invalid regular expression: ") << error;

  // Program order numbers the consumers and so the copies' `#k`.
  llvm::DenseMap<Operation *, unsigned> order;
  llvm::StringSet<> taken;
  SmallVector<WeightOp> matched;
  module.walk([&](Operation *op) {
    order[op] = order.size();
    auto w = dyn_cast<WeightOp>(op);
    if (!w)
      return;
    taken.insert(w.getName());
    if (isa<FloatType>(getElementTypeOrSelf(w.getType())) &&
        re.match(w.getName()))
      matched.push_back(w);
  });

  unsigned untied = 0;
  for (WeightOp w : matched) {
    llvm::SetVector<Operation *> consumers(w->user_begin(), w->user_end());
    if (consumers.size() < 2)
      continue;
    SmallVector<Operation *> sorted = consumers.takeVector();
    llvm::sort(sorted, [&](Operation *a, Operation *b) {
      return order.lookup(a) < order.lookup(b);
    });
    llvm::StringMap<unsigned> consumersOfNode;
    for (Operation *user : sorted)
      ++consumersOfNode[getNodeName(user->getLoc())];

    OpBuilder builder(w);
    for (auto [k, user] : llvm::enumerate(sorted)) {
      StringRef node = getNodeName(user->getLoc());
      std::string base = (w.getName() + "@" + node).str();
      std::string name = base;
      if (node.empty() || consumersOfNode[node] > 1 || taken.contains(name))
        for (size_t i = k; name == base || taken.contains(name); ++i)
          name = base + "#" + std::to_string(i);
      taken.insert(name);
      auto copy = cast<WeightOp>(builder.clone(*w));
      copy.setName(name);
      copy->setLoc(NameLoc::get(builder.getStringAttr(name)));
      user->replaceUsesOfWith(w, copy);
    }
    w.erase();
    ++untied;
  }
  if (untied == 0)
    module.emitWarning() << "--untie '" << regex
                         << "' matched no initializer used more than once";
  return untied;
}

namespace {
struct UntiePass : pcc::impl::UntieBase<UntiePass> {
  using UntieBase::UntieBase;
  void runOnOperation() override {
    if (failed(pcc::untieWeights(getOperation(), regex)))
      signalPassFailure();
  }
};
} // namespace
