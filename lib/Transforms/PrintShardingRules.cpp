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
    getOperation().walk([](pcc::graph::ShardingRuleOpInterface op) {
      std::string text;
      llvm::raw_string_ostream os(text);
      op.getShardingRule().print(os);
      op->emitRemark("sharding rule: ") << text;
    });
  }
};
} // namespace
