//===- AbiTables.h - The tables a generated library exports -----*- C++ -*-===//
//
// A generated model library describes its interface to the runtime in
// tables (runtime/include/pccrt/pccrt.h): one pccrt_tensor_info per input,
// output and weight, the mesh of its ranks, and `<prefix>_model_info`
// returning them with the workspace size. Every target exports the same
// tables; AbiTables collects the entries while a target emits code and
// prints them as C/C++ definitions. The weights table is the one table of
// the whole program: entries are found by name, so a weight read by several
// functions is loaded once.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_ABITABLES_H
#define PCC_TARGET_ABITABLES_H

#include "pcc/Dialect/Dist/IR/DistOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace pcc {

/// The ONNX TensorProto data type of an element type (= pccrt_dtype), or 0.
int32_t getOnnxDataType(mlir::Type type);

/// The bytes of a constant, dense and little-endian (i1 as one byte each).
std::vector<uint8_t> getRawBytes(mlir::DenseElementsAttr value);

/// How an entry is split over the ranks (pccrt_tensor_info's shard_axes,
/// shard_dim, shard_groups and full_extent); all zero for a whole tensor.
struct ShardFields {
  uint32_t axes = 0;
  int32_t dim = 0;
  int64_t groups = 0;
  int64_t fullExtent = 0;
};

/// The ranks' mesh as the ABI numbers them: ranks row-major over the mesh
/// axes; a group named by a mask of axes (bit i: axis i) holds the ranks
/// sharing this rank's coordinates on the other axes.
class MeshLayout {
public:
  /// The module's mesh of more than one rank; an empty layout when there
  /// is none. Fails (with a diagnostic) on several.
  static mlir::FailureOr<MeshLayout> get(mlir::ModuleOp module);

  bool isSingleRank() const { return !mesh; }
  /// Axis names and sizes; empty for one rank.
  std::vector<std::pair<std::string, int64_t>> getAxes() const;
  /// The mask of the axes `axes` names (0 for one rank).
  uint32_t getAxesMask(mlir::ArrayAttr axes) const;
  /// The size of the axis `name` (1 when unknown).
  int64_t getAxisSize(llvm::StringRef name) const;
  /// An expression of `ctx->rank` for this rank's position in the group of
  /// `axes`, row-major over them.
  std::string getGroupPosition(mlir::ArrayAttr axes) const;
  /// The fields of an entry of layout `sharding` whose whole extents are
  /// `whole`: its first split dimension.
  ShardFields getShardFields(dist::ShardingAttr sharding,
                             llvm::ArrayRef<int64_t> whole) const;

private:
  // Op accessors are not const-qualified.
  mutable dist::MeshOp mesh;
};

enum class WeightKind {
  Constant, ///< read-only (a named initializer or a large constant)
  State,    ///< updated in place by every run (a `graph.state` argument)
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

class AbiTables {
public:
  /// Tables exported as `<prefix>_model_info`, defined in namespace
  /// `<prefix>_model`.
  explicit AbiTables(std::string prefix) : prefix(std::move(prefix)) {}

  void addInput(llvm::StringRef name, mlir::RankedTensorType type);
  /// An output (PCCRT_KIND_OUTPUT) or a gradient (PCCRT_KIND_GRAD).
  void addOutput(llvm::StringRef name, mlir::RankedTensorType type, bool isGrad,
                 ShardFields shard = {});
  /// The index of the weight named `name`, or -1.
  int64_t lookupWeight(llvm::StringRef name) const;
  /// Appends a weight (its name must be new) and returns its index.
  int64_t addWeight(WeightEntry entry);
  llvm::ArrayRef<WeightEntry> getWeights() const { return weights; }

  /// The namespace the tables are defined in.
  std::string getNamespace() const { return prefix + "_model"; }
  /// Prints the definitions of the tables (and their shape and mesh
  /// arrays), to be placed inside getNamespace().
  void printTables(llvm::raw_ostream &os, const MeshLayout &mesh) const;
  /// Prints `extern "C" <prefix>_model_info`, after the namespace closes.
  void printModelInfo(llvm::raw_ostream &os, const MeshLayout &mesh,
                      uint64_t workspaceBytes) const;

private:
  /// One table entry; `shapes` receives its shape array.
  std::string printEntry(llvm::StringRef name, mlir::RankedTensorType type,
                         int64_t index, llvm::StringRef group,
                         llvm::StringRef kind, ShardFields shard,
                         std::string &shapes) const;

  struct Entry {
    std::string name;
    mlir::RankedTensorType type;
    bool isGrad;
    ShardFields shard;
  };
  std::string prefix;
  std::vector<Entry> inputs, outputs;
  std::vector<WeightEntry> weights;
  llvm::StringMap<int64_t> weightIndex;
};

} // namespace pcc

#endif // PCC_TARGET_ABITABLES_H
