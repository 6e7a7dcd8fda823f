//===- Runtime.h - C++ API of the pcc runtime library -----------*- C++ -*-===//
//
// Loads a model library emitted by pcc (see pccrt.h), binds its weights from
// a safetensors file, and runs it on tensors read from ONNX TensorProto or
// safetensors files, or on token batches sampled from a token file. For a
// training step the model owns its state (parameters, optimizer moments,
// step counter), which every run updates and which checkpoints save and
// restore. Depends only on the C++ standard library and libdl, so that
// deploying a compiled model needs neither MLIR nor protobuf.
//
// A program of several ranks (pccrt.h) runs one Model per rank, each with
// the rank's communicator. The Model holds the rank's parts of its weights;
// what crosses the API is whole: inputs, weights files, checkpoints and the
// tensors of gather() and state(), so that files never depend on how many
// ranks wrote or read them.
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_RUNTIME_H
#define PCCRT_RUNTIME_H

#include "pccrt/pccrt.h"

#include <cstddef>
#include <cstdint>
#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace pccrt {

class Communicator;
namespace detail {
class SafetensorsFile;
class ThreadBudget;
} // namespace detail

/// Every failure of the runtime: a one-line message naming the file (or the
/// input) at fault and the cause.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Bytes per element of \p dtype (a pccrt_dtype), or 0 if it is not one.
size_t dtypeSize(int32_t dtype);
/// The safetensors name of \p dtype ("F32", "I64", ...), or "dtype(N)".
std::string dtypeName(int32_t dtype);
/// The pccrt_dtype that safetensors calls \p name, or 0 if there is none.
int32_t dtypeFromSafetensorsName(const std::string &name);
/// "[2,3]".
std::string formatShape(const std::vector<int64_t> &shape);
/// "[2,3] of F32", the form used by mismatch messages.
std::string describeType(int32_t dtype, const std::vector<int64_t> &shape);

/// "INPUT", "OUTPUT", "GRAD", "CONSTANT", "STATE", or "kind(N)".
std::string kindName(int32_t kind);
/// Whether \p weight is part of a model's state (what checkpoints hold):
/// a STATE weight that is not a cache (PCCRT_FLAG_CACHE).
bool isModelState(const pccrt_tensor_info &weight);

/// A dense, row-major, little-endian tensor; BOOL takes one byte an element.
struct Tensor {
  std::string name;
  int32_t dtype = PCCRT_F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
  /// The pccrt_kind of a tensor of a model's interface (what Model::run and
  /// Model::state return); 0 for tensors read from files.
  int32_t kind = 0;

  int64_t numElements() const;
};

/// Sharding (pccrt.h): the number of ranks in the group of the mesh axes
/// \p axes of \p info's mesh (1 for no axes).
int64_t meshGroupSize(const pccrt_model_info &info, uint32_t axes);
/// The shape of the whole tensor of which \p entry (of one of \p info's
/// tables) is a rank's part: the split dimension at its real, unpadded
/// extent. The entry's own shape if it is not split.
std::vector<int64_t> wholeShape(const pccrt_model_info &info,
                                const pccrt_tensor_info &entry);
/// The part of \p whole (shaped wholeShape) that the rank at \p position
/// of the entry's group holds, shaped like \p entry, padding zeroed.
Tensor sliceShard(const pccrt_model_info &info, const pccrt_tensor_info &entry,
                  int64_t position, const Tensor &whole);
/// The whole tensor from \p parts, the parts of every rank of the entry's
/// group in group order: groups reordered, padding dropped.
Tensor joinShards(const pccrt_model_info &info, const pccrt_tensor_info &entry,
                  const std::vector<Tensor> &parts);

/// Where \p tensor, bound to \p entry (an input with an index_bound),
/// holds a value outside [-index_bound, index_bound): the element, its
/// value, the node that reads it and the bound, in one line; "" when every
/// value lies inside (or the entry bounds nothing).
std::string describeIndexOutOfRange(const pccrt_tensor_info &entry,
                                    const Tensor &tensor);

/// Decodes an onnx.TensorProto from untrusted bytes; \p what names the source
/// in error messages. Rejects string tensors and external data.
Tensor parseTensorProto(const uint8_t *bytes, size_t size,
                        const std::string &what);
Tensor readTensorProto(const std::string &path);
/// Encodes \p tensor as an onnx.TensorProto holding raw_data.
std::vector<uint8_t> serializeTensorProto(const Tensor &tensor);

/// Decodes a safetensors file from untrusted bytes, keeping the header's
/// order. The optional \p metadata receives the "__metadata__" map.
std::vector<Tensor>
parseSafetensors(const uint8_t *bytes, size_t size, const std::string &what,
                 std::map<std::string, std::string> *metadata = nullptr);
/// Like parseSafetensors, but reads each tensor straight from the file so
/// that large weight files are not held in memory twice.
std::vector<Tensor>
readSafetensors(const std::string &path,
                std::map<std::string, std::string> *metadata = nullptr);
/// Writes \p tensors in order, replacing \p path atomically.
void writeSafetensors(const std::string &path,
                      const std::vector<Tensor> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

/// A tensor whose bytes live elsewhere (`size` bytes at `data`), to be
/// written without a copy: the compiler's weights, straight from the IR.
struct TensorRef {
  std::string name;
  int32_t dtype = PCCRT_F32;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;
  uint64_t size = 0;
  /// When set, the `size` bytes are read from this file at `fileOffset`
  /// (in chunks, through a small buffer) rather than from `data`: a
  /// model's weights copied from file to file without being held.
  std::string file;
  uint64_t fileOffset = 0;
  /// The `size` bytes are all zero (an optimizer's initial state): written
  /// as a hole in the file, which takes no disk and no memory.
  bool zeros = false;
};
/// writeSafetensors of tensors held elsewhere.
void writeSafetensorRefs(
    const std::string &path, const std::vector<TensorRef> &tensors,
    const std::map<std::string, std::string> &metadata = {});

/// A loaded model library with its weights bound. The Model owns the
/// weights: CONSTANT ones as read from the weights file, STATE ones as
/// updated by every run(). run() reuses one workspace, so a Model must not
/// run on two threads at once. On a mesh of several ranks it holds this
/// rank's parts; the calls documented as collective must be made by every
/// rank, in the same order.
class Model {
public:
  /// Loads \p libraryPath, which exports `<symbolPrefix>_model_info` and
  /// `<symbolPrefix>_model_run`, and binds weights by name from the
  /// safetensors file \p weightsPath (may be empty if the model has none).
  /// A program of several ranks needs \p comm, whose mesh is the model's;
  /// each rank reads only its parts of the split weights (which the file
  /// holds whole).
  static std::unique_ptr<Model> load(const std::string &libraryPath,
                                     const std::string &weightsPath,
                                     const std::string &symbolPrefix = "pcc",
                                     Communicator *comm = nullptr);
  /// The mesh that the program in \p libraryPath runs on (empty for a
  /// single-rank program), read without binding weights: what a launcher
  /// needs to know before it starts the ranks.
  static std::vector<int64_t> meshOf(const std::string &libraryPath,
                                     const std::string &symbolPrefix = "pcc");
  ~Model();
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  const pccrt_model_info &info() const { return *modelInfo; }
  /// The communicator given to load(); null when the model runs alone.
  Communicator *communicator() const { return comm; }
  /// Gives the generated code of every later run \p runComm (null: the
  /// communicator given to load() again), for its own operations only:
  /// what the runtime gathers and agrees on, on host memory, stays with
  /// the communicator given to load(). A CUDA build on GPUs runs on the
  /// NCCL communicator this way. Its ranks and mesh must be that one's.
  void setRunCommunicator(Communicator *runComm);
  /// The model's mesh (empty for a single-rank program).
  std::vector<int64_t> mesh() const;

  /// Runs one step on \p inputs, whole tensors given in the order of
  /// info().inputs (their names are not looked at; split inputs are
  /// sliced), and returns this rank's outputs, named, ordered, kinded and
  /// shaped as info().outputs. On a training step this also updates the
  /// STATE weights; a failed run leaves them as they were.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs);
  /// The same, into \p outputs, whose storage is reused when it already
  /// has the outputs' sizes (the outputs of the previous run).
  void run(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs);
  /// Runs entry \p entry (pccrt_entry_info; 0 is the model's step above)
  /// on its inputs, into its outputs, as run() does. Every entry shares
  /// the weights, their state and the workspace.
  void run(int32_t entry, const std::vector<Tensor> &inputs,
           std::vector<Tensor> &outputs);
  /// Prepares the operands derived from the CONSTANT weights now (packed
  /// products' operands), rather than in the first run that needs them:
  /// what a caller that times its runs does first.
  void prepare();
  /// The program's entries (info().entries), and the index of the one
  /// named \p name, or -1.
  int32_t numEntries() const { return int32_t(entries.size()); }
  const pccrt_entry_info &entry(int32_t index) const {
    return entries[size_t(index)];
  }
  int32_t findEntry(const std::string &name) const;
  /// The whole tensors of \p outputs, this rank's results of one run():
  /// split ones gathered from the ranks of their group, the others as they
  /// are. Collective.
  std::vector<Tensor> gather(const std::vector<Tensor> &outputs) const;
  /// The same for the outputs of a run of entry \p entry.
  std::vector<Tensor> gather(int32_t entry,
                             const std::vector<Tensor> &outputs) const;
  /// Output \p i of a run, whole, on every rank (collective, like gather).
  Tensor gatherOutput(const std::vector<Tensor> &outputs, int32_t i) const;
  /// The same for output \p i of a run of entry \p entry.
  Tensor gatherOutput(int32_t entry, const std::vector<Tensor> &outputs,
                      int32_t i) const;

  /// The pipeline's stages (1 for a program without one), and this rank's.
  int64_t numStages() const;
  int64_t stage() const;
  /// The workspace this rank allocates: its pipeline stage's where the
  /// program says, else the program's.
  uint64_t workspaceBytes() const;
  /// Whether this rank's stage holds output \p i of entry \p entry (every
  /// rank does without a pipeline).
  bool holdsOutput(int32_t entry, int32_t i) const;
  /// Output \p i of a run of entry \p entry, whole, on a rank whose stage
  /// holds it: gathered over the axes it is split along. Collective over
  /// that group alone, so that the other stages go on with their work.
  Tensor gatherHeldOutput(int32_t entry, const std::vector<Tensor> &outputs,
                          int32_t i) const;

  /// True if the model has state (isModelState) or an output named "loss".
  bool isTraining() const;
  /// Copies of the current STATE and CONSTANT weights, whole, by name, in
  /// info().weights order, each with its kind. Collective.
  std::vector<Tensor> state() const;
  /// This rank's parts of the weights, in info().weights order.
  const std::vector<Tensor> &localWeights() const {
    syncHostState();
    return weights;
  }
  /// Whether the model's buffers live on a device (a CUDA build).
  bool onDevice() const { return deviceOps != nullptr; }
  /// Which outputs run() gives the caller, by index (empty, the default:
  /// all). A gradient output not read gets no buffer: the step does not
  /// write it out, and its tensor is left empty (its shape kept). On a
  /// device, the other outputs not read stay there, keeping their shapes
  /// and what they held on the host. A training step's gradients are as
  /// large as the model, and a caller that only prints the loss need not
  /// copy them each step.
  void setOutputsRead(std::vector<bool> read) { outputsRead = std::move(read); }
  /// Replaces every STATE weight by the whole tensor of the same name in
  /// \p tensors (other tensors are ignored). Each STATE weight must be
  /// present with its dtype and whole shape, else nothing changes and an
  /// Error "checkpoint <source> does not match this model: missing 'name'"
  /// (or "mismatched 'name': ...") is thrown.
  void loadState(const std::vector<Tensor> &tensors,
                 const std::string &source = "");
  /// Replaces the weights named like the checkpoint's \p parameters by
  /// those tensors: trained parameters serving a forward or generation
  /// build, or a training build of another optimizer or layout. Names are
  /// compared without \p stripPrefix where they start with it (an
  /// exporter's wrapper, "m."). Each parameter must be a weight of this
  /// model with its dtype and whole shape, else nothing changes and an
  /// Error names it (and, where the names differ by a prefix, the option
  /// that strips it). Returns how many weights were replaced.
  size_t loadParameters(const std::vector<Tensor> &tensors,
                        const std::vector<std::string> &parameters,
                        const std::string &source,
                        const std::string &stripPrefix = "");
  /// The index of the weight named \p name in info().weights, or -1.
  int32_t findWeight(const std::string &name) const;
  /// The whole value of weight \p index. Collective where it is split.
  Tensor weight(int32_t index) const { return wholeWeight(index); }
  /// Replaces weight \p index by the whole \p tensor, which must have its
  /// dtype and whole shape (else an Error naming it). Every rank gives the
  /// same tensor.
  void setWeight(int32_t index, const Tensor &tensor);
  /// The names of the trained parameters: STATE weights that have a GRAD
  /// output of the same name (the rest of the state is the optimizer's).
  std::vector<std::string> parameterNames() const;
  /// Copies of the trained parameters alone, whole, by name, in
  /// info().weights order (state() without the optimizer's). Collective.
  std::vector<Tensor> parameters() const;
  /// The rows (first, count) of dimension 0 of the whole tensor that this
  /// rank's part of \p entry holds; every row when it is not split there
  /// (or in groups).
  std::pair<int64_t, int64_t> heldRows(const pccrt_tensor_info &entry) const;
  /// A hex hash of the STATE weights' names, dtypes and whole shapes:
  /// checkpoints carry it, so that one model's state is never loaded into
  /// another, and a checkpoint fits the same model on any number of ranks.
  std::string fingerprint() const;

  /// One recorded action of a traced run: its name and its begin and end,
  /// in microseconds since tracing started.
  struct TraceEvent {
    std::string name;
    double begin = 0, end = 0;
    int64_t step = 0;
  };
  /// Records the actions of every later run (`pcc run --trace`).
  void startTrace();
  const std::vector<TraceEvent> &traceEvents() const { return events; }

private:
  friend void saveCheckpoint(const std::string &, const Model &,
                             const std::map<std::string, std::string> &);
  Model() = default;
  /// Loads the library and checks its info, binding no weights.
  static std::unique_ptr<Model> open(const std::string &libraryPath,
                                     const std::string &symbolPrefix);
  /// The position of this rank in the group of \p axes.
  int64_t groupPosition(uint32_t axes) const;
  /// Whether this rank's pipeline stage holds \p entry.
  bool holds(const pccrt_tensor_info &entry) const;
  /// \p whole as the first stage holding \p entry has it, on every rank.
  /// Collective over the stage axis when \p entry is held by some stages.
  Tensor fromHolder(const pccrt_tensor_info &entry, Tensor whole) const;
  /// The whole tensor of weight \p index. Collective if it is split.
  Tensor wholeWeight(int32_t index) const;
  /// Copies the whole \p tensor into this rank's part of weight \p index.
  void assignWeight(int32_t index, const Tensor &tensor);
  /// Whether weight \p index is freed once its operands are prepared
  /// (PCCRT_FLAG_PREPARED_ONLY, where the library prepares operands).
  bool releasesAfterPrepare(int32_t index) const;
  /// Prepares the operands of weight \p index alone, from \p data.
  void prepareWeight(int32_t index, const void *data);
  /// This rank's part of weight \p index, read from \p file (checked).
  std::vector<uint8_t> readHeldWeight(const detail::SafetensorsFile &file,
                                      int32_t index) const;
  struct FreeDeleter {
    void operator()(void *p) const;
  };

  /// Device models: copies the STATE weights a run updated on the device
  /// back into `weights` (the host's copies), if a run since the last copy
  /// may have changed them.
  void syncHostState() const;
  /// Device models: the device buffer of `bytes` at `slot` (allocated on
  /// first use, and again when the size changes).
  void *deviceBuffer(std::vector<std::pair<void *, uint64_t>> &slots,
                     size_t slot, uint64_t bytes);
  /// Throws the error of a failed device call.
  void checkDevice(int code, const std::string &what) const;

  void *handle = nullptr;
  const pccrt_model_info *modelInfo = nullptr;
  /// The program's entries (one made of the model's tables and its run
  /// function where the library lists none).
  std::vector<pccrt_entry_info> entries;
  /// Device models: the library's access to device memory, the device
  /// copies of the weights (weightPointers point to them), the buffers of
  /// the inputs, outputs and workspace, and whether the host's copies of the
  /// state are behind the device's.
  const pccrt_device_ops *deviceOps = nullptr;
  std::vector<std::pair<void *, uint64_t>> deviceWeights, deviceInputs,
      deviceOutputs, deviceWorkspace;
  mutable bool hostStateStale = false;
  std::vector<bool> outputsRead;
  Communicator *comm = nullptr;
  /// What generated code communicates through, if not `comm`.
  Communicator *runComm = nullptr;
  /// The threads of each run (pccrt_context::num_threads): those of this
  /// rank's share of the host's cores that other processes leave free.
  std::unique_ptr<detail::ThreadBudget> threadBudget;
  /// In info().weights order, with kinds; on a device model the host's
  /// copies, brought up to date when read (syncHostState).
  mutable std::vector<Tensor> weights;
  std::vector<void *> weightPointers; ///< their data, as the run fn wants
  /// Tracing: events recorded, and when tracing started.
  bool tracing = false;
  std::vector<TraceEvent> events;
  std::chrono::steady_clock::time_point traceStart;
  int64_t runs = 0;
  static void recordAction(void *user, const char *action, int32_t begin);
  std::unique_ptr<void, FreeDeleter> workspace;
  /// Operands derived from the weights (info().prepared_bytes), and
  /// whether they are those of the current weights.
  std::unique_ptr<void, FreeDeleter> prepared;
  bool preparedValid = false;
  /// The weights file: a weight freed once prepared is read again from it
  /// when its value is asked for (a checkpoint, a dump).
  std::string weightsPath;
  /// Points \p context at the prepared operands, made first if stale.
  void preparedOperands(pccrt_context &context);
};

/// Reads the inputs of a model from \p files and returns them, whole,
/// ordered like info.inputs. A `.safetensors` file binds inputs by name
/// (tensors that name no input are ignored); any other file is a TensorProto
/// bound to the next input not yet bound. Every input must be bound exactly
/// once.
std::vector<Tensor> bindInputs(const pccrt_model_info &info,
                               const std::vector<std::string> &files);

/// Writes \p outputs to `dir/outputs.safetensors`, creating \p dir if needed.
void dumpOutputs(const std::string &dir, const std::vector<Tensor> &outputs);
/// Writes \p grads to `dir/grads.safetensors` as float32 (F16, BF16 and F64
/// gradients are converted), creating \p dir if needed.
void dumpGrads(const std::string &dir, const std::vector<Tensor> &grads);

/// Saves the STATE weights of \p model, whole, to the safetensors file
/// \p path (replaced atomically), with metadata {"format":
/// "pcc-checkpoint", "model": model.fingerprint()} plus \p metadata.
/// Collective: on several ranks every rank gathers, rank 0 writes.
void saveCheckpoint(const std::string &path, const Model &model,
                    const std::map<std::string, std::string> &metadata = {});
/// Restores the STATE weights of \p model from a checkpoint written by
/// saveCheckpoint, and returns the checkpoint's metadata. Refuses (naming
/// \p path) files that are not pcc checkpoints or were saved by a model with
/// another fingerprint; on error the model is unchanged.
std::map<std::string, std::string> loadCheckpoint(const std::string &path,
                                                  Model &model);
/// Restores the trained parameters of a checkpoint (its "parameters"
/// metadata) into any build of the same model (forward, generation, or
/// training with another optimizer or layout), by name, compared without
/// \p stripPrefix (Model::loadParameters). Returns the number of weights
/// replaced.
size_t loadCheckpointParameters(const std::string &path, Model &model,
                                const std::string &stripPrefix = "");

/// Checks, before any work, that a file can be written at \p path: its
/// folder exists and accepts a new file, and \p path is not a folder.
/// Throws an Error naming \p path.
void checkWritableFile(const std::string &path);
/// Checks that \p dir can be made (or exists) and takes files, creating
/// nothing: dumpOutputs makes it once there is something to write.
void checkWritableDirectory(const std::string &dir);

/// Training batches sampled from a flat file of little-endian token ids
/// (uint16, the nanoGPT/llm.c format, or int32). An llm.c header (magic
/// 20240520 and token count in 256 int32s) is recognized and skipped.
/// Batches are a pure function of (seed, step), so that a run resumed from a
/// checkpoint at step s sees the batches an uninterrupted run would.
class TokenData {
public:
  /// Opens \p path holding tokens of \p dtype (PCCRT_U16 or PCCRT_I32).
  TokenData(const std::string &path, int32_t dtype = PCCRT_U16,
            uint64_t seed = 0);
  ~TokenData();
  TokenData(const TokenData &) = delete;
  TokenData &operator=(const TokenData &) = delete;

  /// "uint16" -> PCCRT_U16, "int32" -> PCCRT_I32, anything else -> 0.
  static int32_t dtypeFromName(const std::string &name);

  int64_t numTokens() const { return count; }
  /// Checks that \p input (a model's token input) is an int64 [B,T] tensor.
  static void checkInput(const pccrt_tensor_info &input);
  /// checkInput, and that the file holds at least T tokens.
  void check(const pccrt_tensor_info &input) const;
  /// Checks every token of the file against the positions \p input (the
  /// token input) reads (its index_bound): throws an Error naming the first
  /// token outside them (or negative), its position in the file, the node
  /// and the bound. Nothing to check where the input bounds nothing.
  void checkIndices(const pccrt_tensor_info &input) const;
  /// The batch of step \p step: B rows of T consecutive tokens, each from a
  /// random offset, as an int64 tensor named and shaped like \p input. Only
  /// the \p numRows rows from \p firstRow (all when negative) are read
  /// from the file, the others are zero: a data-parallel replica reads its
  /// rows alone, and each row is the same whichever rows are read.
  Tensor batch(const pccrt_tensor_info &input, uint64_t step,
               int64_t firstRow = 0, int64_t numRows = -1) const;

private:
  /// The token at position \p at of the file.
  int64_t tokenAt(int64_t at) const;

  std::string path;
  int32_t dtype;
  uint64_t seed;
  const uint8_t *tokens = nullptr; ///< the first token, in the mapping
  int64_t count = 0;
  void *mapping = nullptr;
  size_t mappingSize = 0;
};

} // namespace pccrt

#endif // PCCRT_RUNTIME_H
