//===- ImportFuzzer.cpp - libFuzzer entry point for the ONNX importer -----===//
//
// Feeds arbitrary bytes to the importer (protobuf and text paths), then runs
// the verifier on whatever it accepted. Any crash, sanitizer report or
// verifier failure on an accepted module is a bug.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Import/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *context = [] {
    auto *ctx = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    ctx->loadDialect<pcc::graph::GraphDialect, mlir::func::FuncDialect>();
    return ctx;
  }();
  mlir::ScopedDiagnosticHandler quiet(
      context, [](mlir::Diagnostic &) { return mlir::success(); });
  // External data resolves against a folder that does not exist, so no
  // input can make the importer read files.
  auto module = pcc::importOnnxBuffer(
      *context, llvm::StringRef(reinterpret_cast<const char *>(data), size),
      "/nonexistent-pcc-fuzz/model.onnx");
  if (module && mlir::failed(mlir::verify(*module)))
    std::abort();
  return 0;
}
