//===- OnnxImporter.h - ONNX models to the Graph dialect --------*- C++ -*-===//

#ifndef PCC_IMPORT_ONNXIMPORTER_H
#define PCC_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pcc {

/// The oldest default-domain opset the importer reads; older models are
/// refused in one line.
inline constexpr int64_t kMinImportedOpset = 7;

/// Extents for graph inputs whose shapes the model leaves symbolic, as
/// onnxruntime's free-dimension overrides and TensorRT's shapes give them.
struct InputShapes {
  /// Every dimension named NAME gets the extent (`--dim NAME=N`).
  std::map<std::string, int64_t> dims;
  /// One input's whole shape (`--shape INPUT=AxBxC`), for dimensions with
  /// no name or named by an expression.
  std::map<std::string, std::vector<int64_t>> shapes;
  /// Where not empty, the whole shape of the first int64 input of rank 2
  /// that `shapes` does not name (a causal LM's token ids): what
  /// `--generate` imports a model at. A fixed extent of the model that
  /// differs is an error. Inputs `attention_mask` and `position_ids` of
  /// int64 [B, S] (the Hugging Face interface of Optimum's plain exports),
  /// unless bound, are then the mask that hides nothing and the positions
  /// 0 .. S-1 of that shape.
  std::vector<int64_t> tokenShape;
};

struct ImportOptions {
  /// Graph inputs fixed at compile time: input name -> TensorProto file.
  std::map<std::string, std::string> bindings;
  InputShapes inputShapes;
  /// Re-tie 2-D initializers that are the transpose of an earlier one.
  bool retie = true;
};

/// What the importer decided beyond the IR, for the compile report.
struct ImportReport {
  /// (re-tied initializer, the initializer it is the transpose of).
  std::vector<std::pair<std::string, std::string>> reties;
};

/// Imports an ONNX model file: binary protobuf, or ONNX's text format when
/// the file does not parse as protobuf and looks like text. Returns a module
/// holding `func.func @main`, or null after emitting a diagnostic.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxFile(mlir::MLIRContext &context, const std::string &path,
               const ImportOptions &options = {},
               ImportReport *report = nullptr);

/// Imports a model held in memory (protobuf or text); `name` is the path
/// used in diagnostics and to locate external data.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxBuffer(mlir::MLIRContext &context, llvm::StringRef bytes,
                 llvm::StringRef name, const ImportOptions &options = {},
                 ImportReport *report = nullptr);

/// Imports ONNX's text format from memory (`name` is used in diagnostics).
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxText(mlir::MLIRContext &context, llvm::StringRef text,
               llvm::StringRef name, const ImportOptions &options = {},
               ImportReport *report = nullptr);

/// Where `bytes` lie in an external data file that an import mapped and a
/// weight's value still views: the file's path and the offset, so that a
/// writer copies the weight from file to file instead of through memory.
std::optional<std::pair<std::string, uint64_t>>
findExternalDataSource(llvm::ArrayRef<char> bytes);

} // namespace pcc

#endif // PCC_IMPORT_ONNXIMPORTER_H
