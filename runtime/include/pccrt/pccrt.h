//===- pccrt.h - ABI between generated model libraries and libpccrt -------===//
//
// The only contract between code that pcc emits and the runtime that loads
// it. A generated model library exports two C functions, named with a symbol
// prefix chosen at compile time (default "pcc"):
//
//   const pccrt_model_info *<prefix>_model_info(void);
//   int <prefix>_model_run(void *const *inputs, void *const *outputs,
//                          const void *const *weights, void *workspace);
//
// Tensors are dense, row-major and stored with their ONNX element type.
// `inputs`, `outputs` and `weights` hold one pointer per entry of the
// matching table in pccrt_model_info, in table order. `workspace` points to
// at least `workspace_bytes` bytes aligned to 64. The run function returns 0
// on success and a non-zero code on failure (for example an index out of
// range in a Gather).
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_PCCRT_H
#define PCCRT_PCCRT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PCCRT_ABI_VERSION 1

/// Element types, numbered as ONNX's TensorProto.DataType.
typedef enum pccrt_dtype {
  PCCRT_F32 = 1,
  PCCRT_U8 = 2,
  PCCRT_I8 = 3,
  PCCRT_U16 = 4,
  PCCRT_I16 = 5,
  PCCRT_I32 = 6,
  PCCRT_I64 = 7,
  PCCRT_BOOL = 9,
  PCCRT_F16 = 10,
  PCCRT_F64 = 11,
  PCCRT_U32 = 12,
  PCCRT_U64 = 13,
  PCCRT_BF16 = 16
} pccrt_dtype;

/// One tensor of the model's interface: a graph input or output, or a weight
/// read from the weights file by name.
typedef struct pccrt_tensor_info {
  const char *name;
  int32_t dtype; ///< a pccrt_dtype
  int32_t rank;
  const int64_t *shape; ///< `rank` extents; may be null when rank is 0
} pccrt_tensor_info;

typedef struct pccrt_model_info {
  uint32_t abi_version; ///< PCCRT_ABI_VERSION of the emitter
  int32_t num_inputs;
  const pccrt_tensor_info *inputs;
  int32_t num_outputs;
  const pccrt_tensor_info *outputs;
  int32_t num_weights;
  const pccrt_tensor_info *weights;
  uint64_t workspace_bytes;
} pccrt_model_info;

/// Error codes returned by a generated run function.
enum {
  PCCRT_OK = 0,
  PCCRT_ERR_INDEX_OUT_OF_RANGE = 1,
};

#ifdef __cplusplus
} // extern "C"
#endif

#endif // PCCRT_PCCRT_H
