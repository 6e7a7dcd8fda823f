//===- CppEmitter.h - Graph dialect to C++ for the CPU target ---*- C++ -*-===//
//
// The function the emitter receives is either an inference graph (arguments
// and results named by `onnx.name`) or a training step, whose signature
// also carries the model's persistent state:
//  - an argument with `pcc.state = "<name>"` and `pcc.init = <elements>` is
//    a piece of state (parameter, optimizer moment, step counter): a STATE
//    entry of the weights table, initialized from pcc.init;
//  - a result with `pcc.state_update = "<name>"` is that state's value after
//    the step, written back into the state buffer at the end of the run;
//  - a result with `pcc.grad = "<parameter>"` is a GRAD output named by the
//    parameter; every other result is an OUTPUT.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_CPU_CPPEMITTER_H
#define PCC_TARGET_CPU_CPPEMITTER_H

#include "pcc/Dialect/Graph/IR/GraphTraining.h"

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
  /// ones go to the weights file, except splats, which are filled into the
  /// workspace where they are defined.
  int64_t maxInlineElements = 1024;
};

enum class WeightKind {
  Constant, ///< read-only (a named initializer or a large constant)
  State,    ///< updated in place by every run (a `pcc.state` argument)
};

/// A tensor the generated code reads from the weights file: `value` is the
/// constant, or the initial value of a state.
/// With tensor parallelism, `value` is the whole tensor and each rank holds
/// a block of it (`shardAxes` non-zero, see pccrt_tensor_info), of shape
/// `localType`.
struct WeightEntry {
  std::string name;
  mlir::DenseElementsAttr value;
  WeightKind kind = WeightKind::Constant;
  mlir::RankedTensorType localType = {};
  uint32_t shardAxes = 0;
  int32_t shardDim = 0;
  int64_t shardGroups = 1;
  /// A padded vocabulary: the padded dimension and its real extent (the
  /// weights file holds the real extent only); {-1, 0} when not padded.
  std::pair<int64_t, int64_t> padding = {-1, 0};
};

/// What the emitter planned, for the compile report.
struct CppEmitResult {
  std::vector<WeightEntry> weights;
  /// The ranks' mesh (axis names and sizes); empty for one rank.
  std::vector<std::pair<std::string, int64_t>> mesh;
  uint64_t workspaceBytes = 0;
};

/// Emits `func` (Graph ops on static tensors) as a C++17 translation unit
/// implementing the pccrt ABI (runtime/include/pccrt/pccrt.h). Emits a
/// diagnostic at the offending op and fails on anything it cannot lower or
/// on malformed state attributes.
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
