//===- CppEmitter.h - Graph dialect to C++ for the CPU target ---*- C++ -*-===//

#ifndef PCC_TARGET_CPU_CPPEMITTER_H
#define PCC_TARGET_CPU_CPPEMITTER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace pcc {

struct CppEmitOptions {
  /// Prefix of the exported `<prefix>_model_info` / `<prefix>_model_run`;
  /// several models can share one translation unit with distinct prefixes.
  std::string symbolPrefix = "pcc";
  /// Anonymous constants up to this many elements are emitted inline; larger
  /// ones go to the weights file.
  int64_t maxInlineElements = 1024;
};

/// A tensor the generated code reads from the weights file.
struct WeightEntry {
  std::string name;
  mlir::DenseElementsAttr value;
};

/// What the emitter planned, for the compile report.
struct CppEmitResult {
  std::vector<WeightEntry> weights;
  uint64_t workspaceBytes = 0;
};

/// Emits `func` (Graph ops on static tensors) as a C++17 translation unit
/// implementing the pccrt ABI (runtime/include/pccrt/pccrt.h). Emits a
/// diagnostic at the offending op and fails on anything it cannot lower.
llvm::FailureOr<CppEmitResult> emitCpp(mlir::func::FuncOp func,
                                       llvm::raw_ostream &os,
                                       const CppEmitOptions &options = {});

/// The text of the kernel header the generated code includes
/// ("pcc_kernels.h"), and of the ABI header ("pccrt.h").
llvm::StringRef getKernelHeader();
llvm::StringRef getAbiHeader();

/// The bytes of a constant, dense and little-endian (i1 as one byte each).
std::vector<uint8_t> getRawBytes(mlir::DenseElementsAttr value);

/// The ONNX TensorProto data type of an element type, or 0.
int32_t getOnnxDataType(mlir::Type type);

} // namespace pcc

#endif // PCC_TARGET_CPU_CPPEMITTER_H
