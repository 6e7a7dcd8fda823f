//===- InitAll.cpp - Registers every pcc dialect and pass -----------------===//

#include "pcc/InitAll.h"

#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Transforms/Passes.h"
#include "pcc/Transforms/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void pcc::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<pcc::graph::GraphDialect, pcc::dist::DistDialect,
                  mlir::func::FuncDialect>();
  pcc::registerDistShardingRules(registry);
}

void pcc::registerAllPasses() {
  pcc::registerPCCPasses();
  pcc::registerPipelines();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
}
