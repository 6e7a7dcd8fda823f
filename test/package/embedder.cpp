// A compiler that embeds pcc: registers its dialects and passes and runs
// the static-shape check by its command-line name.
#include "pcc/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassRegistry.h"

#include <cstdio>

int main() {
  mlir::DialectRegistry registry;
  pcc::registerAllDialects(registry);
  pcc::registerAllPasses();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  bool found = mlir::PassInfo::lookup("pcc-check-static-shapes") != nullptr;
  std::printf("graph dialect loaded: %d, pcc-check-static-shapes: %d\n",
              context.getLoadedDialect("graph") != nullptr, found);
  return found ? 0 : 1;
}
