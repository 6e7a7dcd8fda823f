//===- pcc-opt.cpp - mlir-opt with pcc's dialects and passes --------------===//

#include "pcc/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  pcc::registerAllDialects(registry);
  pcc::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "pcc optimizer driver\n", registry));
}
