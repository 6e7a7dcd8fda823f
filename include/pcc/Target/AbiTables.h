//===- AbiTables.h - The tables a generated library exports -----*- C++ -*-===//
//
// A generated model library describes its interface to the runtime in
// tables (runtime/include/pccrt/pccrt.h): one pccrt_tensor_info per input,
// output and weight, the mesh of its ranks, and `<prefix>_model_info`
// returning them with the workspace size. Every target exports the same
// tables; AbiTables collects the entries while a target emits code and
// prints them as C/C++ definitions. A program has one interface however
// many entries it has (one per pipeline rank): each table is the union of
// what the entries and the functions they call take, give and read, found
// by name, so a weight read by several functions is loaded once. Each
// entry records the pipeline ranks that hold it (`holders`). A program of
// several entry points (pccrt_entry_info: a generation build's prefill and
// decode) has an inputs and an outputs table per entry point and one
// weights table.
//
//===----------------------------------------------------------------------===//

#ifndef PCC_TARGET_ABITABLES_H
#define PCC_TARGET_ABITABLES_H

#include "pcc/Dialect/Dist/IR/DistOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pcc {

/// The ONNX TensorProto data type of an element type (= pccrt_dtype), or 0.
int32_t getOnnxDataType(mlir::Type type);

/// The bytes of a constant, dense and little-endian (i1 as one byte each).
std::vector<uint8_t> getRawBytes(mlir::DenseElementsAttr value);

/// `text` as a C/C++ string literal, quoted and escaped.
std::string getCStringLiteral(llvm::StringRef text);

/// How an entry is split over the ranks (pccrt_tensor_info's shard_axes,
/// shard_dim, shard_groups, full_extent and shard_outer_axes); all zero for
/// a whole tensor.
struct ShardFields {
  uint32_t axes = 0;
  int32_t dim = 0;
  int64_t groups = 0;
  int64_t fullExtent = 0;
  /// The axes of `axes` whose blocks hold the others' (shard_outer_axes).
  uint32_t outerAxes = 0;

  bool operator==(const ShardFields &other) const {
    return axes == other.axes && dim == other.dim && groups == other.groups &&
           fullExtent == other.fullExtent && outerAxes == other.outerAxes;
  }
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
  /// The index of the axis `name`, if the mesh has it.
  std::optional<unsigned> getAxisIndex(llvm::StringRef name) const;
  /// An expression of `ctx->rank` for this rank's coordinate along the axis
  /// `name` ("0" when the mesh has no such axis).
  std::string getCoordinate(llvm::StringRef name) const;
  /// An expression of `ctx->rank` for this rank's position in the group of
  /// `axes`, row-major over them.
  std::string getGroupPosition(mlir::ArrayAttr axes) const;
  /// The fields of an entry of layout `sharding` whose whole extents are
  /// `whole` (the local ones times the axes splitting each): its split
  /// dimension. A runtime tensor splits at most one dimension; a layout
  /// splitting two is an error at `loc`.
  mlir::FailureOr<ShardFields>
  getShardFields(mlir::Location loc, dist::ShardingAttr sharding,
                 llvm::ArrayRef<int64_t> whole) const;
  /// The whole extents of a tensor whose rank's block is `local`, laid out
  /// as `sharding` (null: whole): each split dimension times its axes.
  llvm::SmallVector<int64_t> getWholeShape(llvm::ArrayRef<int64_t> local,
                                           dist::ShardingAttr sharding) const;

private:
  /// The coordinate along axis `index`.
  std::string getCoordinate(unsigned index) const;

  // Op accessors are not const-qualified.
  mutable dist::MeshOp mesh;
};

enum class WeightKind {
  Constant, ///< read-only (a named initializer or a large constant)
  State,    ///< updated in place by every run (a `graph.state` argument)
  /// Scratch that runs keep between them (a `graph.state` argument marked
  /// `graph.cache`: a KV cache), PCCRT_FLAG_CACHE.
  Cache,
};

/// A tensor the generated code reads from the weights file: `value` is the
/// constant, or the initial value of a state.
/// With tensor parallelism, `value` is the whole tensor and each rank holds
/// a block of it (`shardAxes` non-zero, see pccrt_tensor_info), of shape
/// `localType`.
struct WeightEntry {
  std::string name;
  /// The initial value: dense, or a resource viewing the model's external
  /// data file.
  mlir::ElementsAttr value;
  WeightKind kind = WeightKind::Constant;
  mlir::RankedTensorType localType = {};
  uint32_t shardAxes = 0;
  int32_t shardDim = 0;
  int64_t shardGroups = 1;
  uint32_t shardOuterAxes = 0;
  /// A padded vocabulary: the padded dimension and its real extent (the
  /// weights file holds the real extent only); {-1, 0} when not padded.
  std::pair<int64_t, int64_t> padding = {-1, 0};
  /// The pipeline ranks that read it, a mask of coordinates along the
  /// pipeline axis (pccrt_tensor_info.holders); 0: every rank.
  uint64_t holders = 0;
  /// The program's reads of it: all of them, and those of products that
  /// read it through a prepared operand (its pointer passed only for a
  /// build that prepares nothing). Where they are equal, the entry is
  /// PCCRT_FLAG_PREPARED_ONLY.
  int64_t reads = 0, preparedReads = 0;
};

/// The bound on the values of an input that a step takes as positions
/// (pccrt_tensor_info.index_bound and index_of).
struct IndexBound {
  int64_t extent = 0; ///< 0: the values are no positions
  std::string node;   ///< the ONNX node reading them
};

class AbiTables {
public:
  /// Tables exported as `<prefix>_model_info`, defined in namespace
  /// `<prefix>_model`.
  explicit AbiTables(std::string prefix) : prefix(std::move(prefix)) {}

  /// The index of the program's entry point `name` (pccrt_entry_info),
  /// added if new: each has its own inputs and outputs tables, in the
  /// order the entry points were added; the weights are shared.
  unsigned addEntryPoint(llvm::StringRef name);
  unsigned getNumEntryPoints() const { return entryPoints.size(); }
  llvm::StringRef getEntryPointName(unsigned entryPoint) const {
    return entryPoints[entryPoint].name;
  }
  /// The index of the input `name` of entry point `entryPoint`: a new
  /// entry, or the entry of that name, which must have the same type (else
  /// a diagnostic at `loc`). `holders` joins the entry's. `shard` is its
  /// layout over the mesh (an input split along its batch over data
  /// parallelism).
  /// `index` bounds the values of an input that a step takes as positions.
  mlir::FailureOr<int64_t> addInput(unsigned entryPoint, mlir::Location loc,
                                    llvm::StringRef name,
                                    mlir::RankedTensorType type,
                                    ShardFields shard, uint64_t holders,
                                    IndexBound index = IndexBound());
  /// An output (PCCRT_KIND_OUTPUT) or a gradient (PCCRT_KIND_GRAD), found
  /// like an input by its name and kind, which must have the same type and
  /// layout. The table lists outputs by `order` (the step's result index),
  /// then as they were added. Returns a key for getOutputIndex.
  mlir::FailureOr<unsigned> addOutput(unsigned entryPoint, mlir::Location loc,
                                      llvm::StringRef name,
                                      mlir::RankedTensorType type, bool isGrad,
                                      ShardFields shard, int64_t order,
                                      uint64_t holders);
  /// The index in entry point `entryPoint`'s outputs table of the output
  /// `key` (once every output is added).
  int64_t getOutputIndex(unsigned entryPoint, unsigned key) const;
  /// The index of the weight `entry`: a new entry, or the entry of its
  /// name, which must hold the same tensor, of the same kind, in the same
  /// layout (else a diagnostic at `loc`). Its holders join the entry's.
  mlir::FailureOr<int64_t> addWeight(mlir::Location loc, WeightEntry entry);
  llvm::ArrayRef<WeightEntry> getWeights() const { return weights; }
  /// Counts a read of weight `index` by the program, through a prepared
  /// operand or not (WeightEntry::reads).
  void noteWeightRead(int64_t index, bool prepared) {
    ++(prepared ? weights[index].preparedReads : weights[index].reads);
  }

  /// The pipeline's mesh axis (pccrt_model_info.stage_axis), -1 for none.
  void setStageAxis(int32_t axis) { stageAxis = axis; }
  int32_t getStageAxis() const { return stageAxis; }

  /// The namespace the tables are defined in.
  std::string getNamespace() const { return prefix + "_model"; }
  /// Prints the definitions of the tables (and their shape and mesh
  /// arrays), to be placed inside getNamespace().
  void printTables(llvm::raw_ostream &os, const MeshLayout &mesh) const;
  /// Prints `extern "C" <prefix>_model_info`, after the namespace closes;
  /// `device` is the pccrt_device enumerator of a device model (the host's
  /// is left to its default); `preparedBytes`, when not empty, the size of
  /// the prepared operands, made by the namespace's function `prepare`.
  /// Entry point 0 runs `<prefix>_model_run`, entry point i > 0 the
  /// namespace's function `getRunFunction(i)`; entry point i needs
  /// `entryWorkspace[i]` bytes, the program the most of them. A pipeline's
  /// rank of coordinate s needs `stageWorkspace[s]` (empty: not pipelined).
  void printModelInfo(llvm::raw_ostream &os, const MeshLayout &mesh,
                      llvm::ArrayRef<uint64_t> entryWorkspace,
                      llvm::ArrayRef<uint64_t> stageWorkspace = {},
                      llvm::StringRef device = {},
                      llvm::StringRef preparedBytes = {}) const;
  /// The name of entry point `entryPoint`'s run function.
  static std::string getRunFunction(unsigned entryPoint) {
    return "run_" + std::to_string(entryPoint);
  }

private:
  /// One table entry; `shapes` receives its shape array.
  std::string printEntry(llvm::StringRef name, mlir::RankedTensorType type,
                         int64_t index, llvm::StringRef group,
                         llvm::StringRef kind, ShardFields shard,
                         uint64_t holders, std::string &shapes,
                         llvm::StringRef flags = "0u",
                         const IndexBound &bound = IndexBound()) const;

  struct Entry {
    std::string name;
    mlir::RankedTensorType type;
    bool isGrad;
    ShardFields shard;
    int64_t order;
    uint64_t holders;
    IndexBound index;
  };
  /// An entry point's own tables.
  struct EntryPoint {
    std::string name;
    std::vector<Entry> inputs, outputs;
    llvm::StringMap<int64_t> inputIndex;
    /// Outputs by (name, is a gradient): their key.
    std::map<std::pair<std::string, bool>, unsigned> outputKeys;
  };
  std::string prefix;
  std::vector<EntryPoint> entryPoints;
  std::vector<WeightEntry> weights;
  llvm::StringMap<int64_t> weightIndex;
  int32_t stageAxis = -1;
};

} // namespace pcc

#endif // PCC_TARGET_ABITABLES_H
