//===- PrintShardingRules.cpp - Reports sharding rules as remarks ---------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;

namespace pcc {
#define GEN_PASS_DEF_PRINTSHARDINGRULES
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

namespace {
struct PrintShardingRulesPass
    : pcc::impl::PrintShardingRulesBase<PrintShardingRulesPass> {
  void runOnOperation() override {
    getOperation().walk([](Operation *op) {
      if (isa<func::FuncOp, func::ReturnOp>(op))
        return;
      auto ruled = dyn_cast<pcc::graph::ShardingRuleOpInterface>(op);
      if (!ruled) {
        // Partitioning replicates such an op; say so, never skip it.
        op->emitRemark("no sharding rule: replicated");
        return;
      }
      std::string text;
      llvm::raw_string_ostream os(text);
      ruled.getShardingRule().print(os);
      op->emitRemark("sharding rule: ") << text;
    });
  }
};
} // namespace
