//===- Runtime.h - C++ API of the pcc runtime library -----------*- C++ -*-===//
//
// Loads a model library emitted by pcc (see pccrt.h), binds its weights from
// a safetensors file, and runs it on tensors read from ONNX TensorProto or
// safetensors files. Depends only on the C++ standard library and libdl, so
// that deploying a compiled model needs neither MLIR nor protobuf.
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_RUNTIME_H
#define PCCRT_RUNTIME_H

#include "pccrt/pccrt.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace pccrt {

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

/// A dense, row-major, little-endian tensor; BOOL takes one byte an element.
struct Tensor {
  std::string name;
  int32_t dtype = PCCRT_F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  int64_t numElements() const;
};

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

/// A loaded model library with its weights bound. run() reuses one
/// workspace, so a Model must not run on two threads at once.
class Model {
public:
  /// Loads \p libraryPath, which exports `<symbolPrefix>_model_info` and
  /// `<symbolPrefix>_model_run`, and binds weights by name from the
  /// safetensors file \p weightsPath (may be empty if the model has none).
  static std::unique_ptr<Model> load(const std::string &libraryPath,
                                     const std::string &weightsPath,
                                     const std::string &symbolPrefix = "pcc");
  ~Model();
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  const pccrt_model_info &info() const { return *modelInfo; }
  /// Runs on \p inputs, given in the order of info().inputs (their names are
  /// not looked at), and returns outputs named and ordered as info().outputs.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs);

private:
  Model() = default;
  struct FreeDeleter {
    void operator()(void *p) const;
  };
  using RunFn = int (*)(void *const *, void *const *, const void *const *,
                        void *);

  void *handle = nullptr;
  const pccrt_model_info *modelInfo = nullptr;
  RunFn runFn = nullptr;
  std::vector<Tensor> weights; ///< the weights file; unused entries emptied
  std::vector<const void *> weightPointers; ///< in info().weights order
  std::unique_ptr<void, FreeDeleter> workspace;
};

/// Reads the inputs of a model from \p files and returns them ordered like
/// info.inputs. A `.safetensors` file binds inputs by name (tensors that name
/// no input are ignored); any other file is a TensorProto bound to the next
/// input not yet bound. Every input must be bound exactly once.
std::vector<Tensor> bindInputs(const pccrt_model_info &info,
                               const std::vector<std::string> &files);

/// Writes \p outputs to `dir/outputs.safetensors`, creating \p dir if needed.
void dumpOutputs(const std::string &dir, const std::vector<Tensor> &outputs);

} // namespace pccrt

#endif // PCCRT_RUNTIME_H
