//===- pccrt.h - ABI between generated model libraries and libpccrt -------===//
//
// The only contract between code that pcc emits and the runtime that loads
// it. A generated model library exports two C functions, named with a symbol
// prefix chosen at compile time (default "pcc"):
//
//   const pccrt_model_info *<prefix>_model_info(void);
//   int <prefix>_model_run(const pccrt_context *context);
//
// The context holds everything one run works on, so that what a run needs
// grows by fields, not by arguments: the tensors, the workspace, and the
// rank's place among the others (its communicator; later a CUDA stream).
// Tensors are dense, row-major and stored with their ONNX element type.
// `inputs`, `outputs` and `weights` hold one pointer per entry of the
// matching table in pccrt_model_info, in table order. `workspace` points to
// at least `workspace_bytes` bytes aligned to 64. The run function returns 0
// on success and a non-zero code on failure (for example an index out of
// range in a Gather).
//
// Every table entry carries a kind (pccrt_kind):
//  - `inputs` holds PCCRT_KIND_INPUT entries, read-only.
//  - `outputs` holds PCCRT_KIND_OUTPUT entries (graph outputs, the training
//    loss "loss") and PCCRT_KIND_GRAD entries (the gradient of a parameter
//    for this step, computed before the update, named by the parameter).
//    A GRAD entry's pointer may be null: the step then computes that
//    gradient for its update as always but writes no copy of it out (a
//    training run reads the gradients of the steps it dumps only).
//  - `weights` holds PCCRT_KIND_CONSTANT entries, which the run function
//    only reads, and PCCRT_KIND_STATE entries (trainable parameters,
//    optimizer moments, the step counter), which one call reads and then
//    overwrites in place with their values after the step. A state buffer
//    is written only at the very end of a successful run, after every read
//    of it, so no part of the step sees a half-updated state. The runtime
//    initializes all weights from the weights file and owns them; a
//    checkpoint is the set of STATE tensors.
//
// A program of several ranks (tensor parallelism) runs the same function on
// every rank of a mesh (pccrt_model_info.mesh_*). Each rank's tensors are
// its local parts: an entry with a non-zero `shard_axes` (a mask of mesh
// axes, like a group) is split along dimension `shard_dim` over the group
// of those axes, and `shape` is the local shape. The dimension is viewed
// as [shard_groups, n]: the rank at position c of the group (of size s)
// holds, in every group, the c-th of s equal blocks of n, so the whole
// extent is shape[shard_dim] * s. A rank's position runs row-major over
// the group's axes in the mesh's order, except that the axes of
// `shard_outer_axes` come first: their blocks hold the other axes' (ZeRO's
// data-parallel blocks of a tensor-parallel block). Of that extent only the
// first `full_extent` are real; the rest is padding the compiler added so that
// s divides it (a vocabulary of 50257 at tp 4): the runtime fills it with zeros
// when it splits a tensor and drops it when it gathers one, so files never show
// it. Zero fields mean a whole (replicated) tensor, shard_groups 0 means 1 and
// full_extent 0 means no padding.
//
// A pipeline-parallel program (pccrt_model_info.stage_axis >= 0) runs a
// different step on each coordinate of that mesh axis (its pipeline stage),
// and not every rank holds every tensor: an entry whose `holders` is
// non-zero lives only on the ranks whose stage coordinate c has bit c set.
// The runtime loads a weight only where it is held (other ranks pass a null
// pointer), allocates outputs only where they are made, and gathers a
// tensor for dumps and checkpoints from its first holder. Entries held on
// several stages (a tied embedding and LM head) hold equal values.
//
// Version history: 1 had no kinds and read-only weights; 2 added `kind` and
// made `weights` writable for STATE entries; 3 passes a pccrt_context to the
// run function instead of four arguments; 4 adds the mesh and the sharding
// of each entry; 5 adds pipeline stages (`stage_axis`, `holders`),
// non-blocking sends (`isend`, `wait_all`) and tracing of actions; 6 the
// thread count of a run (`num_threads`); 7 models whose memory is on a
// device (`device`, `<prefix>_device_ops`); 8 collectives started and
// waited for apart (`start_*`, `wait`, `stream_ordered`); 9 operands
// prepared from the CONSTANT weights (`prepared_bytes`, `prepare`,
// `pccrt_context.prepared`); 10 sends completed one by one (`start_send`,
// `wait_send`), so that a sent buffer is free once its send is; 11 the
// `flags` of an entry (PCCRT_FLAG_PREPARED_ONLY: a CONSTANT weight that the
// run reads only through the prepared operands, which the runtime frees
// once they are packed), and `prepare` packs the operands of the non-null
// weights only, so that it may be called for one weight at a time. 12 adds
// `shard_outer_axes`, for a dimension split by axes nested out of the
// mesh's order. 13 adds named entries (`num_entries`, `entries`): a
// program of several steps that share the weights and the state (a
// generation build's prefill and decode), each with its own inputs,
// outputs and run function; and PCCRT_FLAG_CACHE, a STATE weight that
// holds scratch the runs keep between them (a KV cache), not a model's
// state.
//
// Entries. Every program has at least one entry; entry 0 is the default
// step, and the model info's `inputs`, `outputs` and `<prefix>_model_run`
// are entry 0's. A library whose `num_entries` is 0 has that one entry
// alone. `workspace_bytes` is the most any entry needs: one
// workspace serves them all, as they never run at once.
//
// 15 adds `stage_workspace_bytes`: a pipeline's ranks run different
// stages, whose workspaces differ, and each rank allocates its own stage's
// rather than the largest.
//
// 16 lets a run pass null for a GRAD output, which it then does not write:
// the gradients live in the workspace, and are copied out only where asked
// for.
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_PCCRT_H
#define PCCRT_PCCRT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PCCRT_ABI_VERSION 16

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

/// The role of a tensor of the model's interface. Numbered from 1 so that an
/// entry whose kind was left out (zero) is rejected, not taken for an input.
typedef enum pccrt_kind {
  PCCRT_KIND_INPUT = 1,    ///< a graph input (`inputs` table)
  PCCRT_KIND_OUTPUT = 2,   ///< a graph output or the loss (`outputs`)
  PCCRT_KIND_GRAD = 3,     ///< a parameter's gradient (`outputs`)
  PCCRT_KIND_CONSTANT = 4, ///< a read-only weight (`weights`)
  PCCRT_KIND_STATE = 5     ///< a weight each run updates in place (`weights`)
} pccrt_kind;

/// Bits of pccrt_tensor_info.flags.
typedef enum pccrt_flag {
  /// A CONSTANT weight that the run function reads only through the
  /// operands `prepare` derives from it, wherever `prepared_bytes` is not 0:
  /// once they are prepared, the runtime may free the weight and pass a
  /// null pointer for it.
  PCCRT_FLAG_PREPARED_ONLY = 1,
  /// A STATE weight that is scratch the runs keep between them (a
  /// generation build's KV cache): it starts zeroed, is updated in place
  /// (a run that fails may leave it half written), and is no part of the
  /// model's state: checkpoints neither save nor restore it, and the
  /// weights file does not hold it.
  PCCRT_FLAG_CACHE = 2
} pccrt_flag;

/// One tensor of the model's interface: a graph input or output, a
/// gradient, or a weight read from the weights file by name.
typedef struct pccrt_tensor_info {
  const char *name;
  int32_t dtype; ///< a pccrt_dtype
  int32_t rank;
  const int64_t *shape; ///< `rank` extents; may be null when rank is 0
  int32_t kind;         ///< a pccrt_kind allowed in the entry's table
  uint32_t shard_axes;  ///< mesh axes splitting it; 0 when whole
  int32_t shard_dim;    ///< the split dimension
  int64_t shard_groups; ///< groups of the split dimension (0 or 1: blocks)
  int64_t full_extent;  ///< real extent of the split dimension (0: all)
  uint64_t holders;     ///< stages holding it, a mask; 0: every rank
  uint32_t flags;       ///< pccrt_flag bits
  uint32_t shard_outer_axes; ///< of shard_axes, those nesting the others
  /// An integer input whose values the program takes as positions along an
  /// axis of this extent: each must lie in [-index_bound, index_bound) (a
  /// negative one counts from the end). 0: its values are no positions.
  /// The runtime checks an input against it before a run.
  int64_t index_bound;
  const char *index_of; ///< the ONNX node reading them; null when none
} pccrt_tensor_info;

struct pccrt_context;

/// One step of a program of several: its name, its own inputs and outputs
/// (kinds as in the model's tables) and its run function. All entries
/// share the model's weights.
typedef struct pccrt_entry_info {
  const char *name;
  int32_t num_inputs;
  const pccrt_tensor_info *inputs;
  int32_t num_outputs;
  const pccrt_tensor_info *outputs;
  uint64_t workspace_bytes; ///< what this entry needs of the workspace
  int (*run)(const struct pccrt_context *context);
} pccrt_entry_info;

typedef struct pccrt_model_info {
  uint32_t abi_version; ///< PCCRT_ABI_VERSION of the emitter
  int32_t num_inputs;
  const pccrt_tensor_info *inputs;
  int32_t num_outputs;
  const pccrt_tensor_info *outputs;
  int32_t num_weights;
  const pccrt_tensor_info *weights;
  uint64_t workspace_bytes;
  int32_t mesh_rank;              ///< mesh axes; 0 for a single-rank program
  const char *const *mesh_axes;   ///< their names ("pp", "tp")
  const int64_t *mesh_shape;      ///< their sizes; ranks = their product
  int32_t stage_axis;             ///< the pipeline's mesh axis, or -1
  int32_t device;                 ///< a pccrt_device: where the buffers live
  /// Bytes of operands the program derives from its weights (a GEMM's B
  /// packed for its micro-kernel), 0 when none: from CONSTANT weights, and
  /// from the STATE weights that a run updates (a training step's
  /// parameters), whose operands that run makes again itself once it has
  /// updated them. The runtime owns a buffer of that size, aligned to 64,
  /// and calls `prepare` to fill it from the context's weights before the
  /// first run and again before the next run after it changed any weight
  /// (or a run failed); every run gets the same buffer as
  /// `pccrt_context.prepared`. `prepare` fills only the operands
  /// of the weights whose pointers are not null, and leaves the others'
  /// bytes as they are, so that the runtime may prepare one weight at a
  /// time (and free it where its flags allow). It returns a run's codes.
  uint64_t prepared_bytes;
  int (*prepare)(const struct pccrt_context *context);
  /// The program's entries (entry 0's tables are `inputs` and `outputs`
  /// above); 0 entries: one, made of those tables and `<prefix>_model_run`.
  int32_t num_entries;
  const pccrt_entry_info *entries;
  /// A pipelined program's workspace per pipeline rank: one value per
  /// coordinate along `stage_axis` (the most any entry needs on that
  /// rank), each at most `workspace_bytes`; null when every rank needs
  /// `workspace_bytes`.
  const uint64_t *stage_workspace_bytes;
} pccrt_model_info;

/// Where a model's buffers (inputs, outputs, weights, workspace) live.
typedef enum pccrt_device {
  PCCRT_DEVICE_HOST = 0, ///< the CPU target: host memory
  PCCRT_DEVICE_CUDA = 1  ///< the CUDA target: the GPU's memory
} pccrt_device;

/// How the runtime reaches a device model's memory: a library whose info
/// names a device exports `const pccrt_device_ops *<prefix>_device_ops(void)`.
/// Each call returns 0 or a PCCRT_ERR_* code; copies are complete when they
/// return.
typedef struct pccrt_device_ops {
  int (*alloc)(void **memory, uint64_t bytes);
  void (*release)(void *memory);
  int (*upload)(void *device, const void *host, uint64_t bytes);
  int (*download)(void *host, const void *device, uint64_t bytes);
} pccrt_device_ops;

/// How partial results combine.
typedef enum pccrt_reduction {
  PCCRT_REDUCE_SUM = 1,
  PCCRT_REDUCE_MAX = 2,
  PCCRT_REDUCE_MIN = 3,
  PCCRT_REDUCE_MEAN = 4
} pccrt_reduction;

typedef struct pccrt_comm pccrt_comm;

/// The communication of a generated program, implemented by the runtime's
/// backends (MPI on the CPU; NCCL with CUDA). The ranks form a mesh; a group
/// is named by a mask of mesh axes (bit i: axis i), and holds the ranks that
/// share this rank's coordinates on every other axis, ordered row-major over
/// the masked axes. Counts are elements of `dtype` (a pccrt_dtype); blocks
/// of all_gather, reduce_scatter and all_to_all are contiguous, in group
/// order. `peer` is a position in the group. Each call returns 0 or a
/// PCCRT_ERR_* code.
typedef struct pccrt_comm_ops {
  int (*all_reduce)(pccrt_comm *comm, uint32_t axes, void *data, int64_t count,
                    int32_t dtype, int32_t reduction);
  /// `count` elements in, group size x `count` out.
  int (*all_gather)(pccrt_comm *comm, uint32_t axes, const void *in, void *out,
                    int64_t count, int32_t dtype);
  /// group size x `count` elements in, `count` out (this rank's block).
  int (*reduce_scatter)(pccrt_comm *comm, uint32_t axes, const void *in,
                        void *out, int64_t count, int32_t dtype,
                        int32_t reduction);
  /// group size blocks of `count` elements each way.
  int (*all_to_all)(pccrt_comm *comm, uint32_t axes, const void *in, void *out,
                    int64_t count, int32_t dtype);
  int (*send)(pccrt_comm *comm, uint32_t axes, int32_t peer, int32_t tag,
              const void *data, int64_t count, int32_t dtype);
  int (*recv)(pccrt_comm *comm, uint32_t axes, int32_t peer, int32_t tag,
              void *data, int64_t count, int32_t dtype);
  /// Starts a send and returns; `data` must stay unchanged until the next
  /// wait_all, which completes every send started before it. Receives
  /// match sends in the order they were started.
  int (*isend)(pccrt_comm *comm, uint32_t axes, int32_t peer, int32_t tag,
               const void *data, int64_t count, int32_t dtype);
  int (*wait_all)(pccrt_comm *comm);
  /// Collectives started here and completed by `wait`, so that a program
  /// computes what does not depend on them meanwhile: as all_reduce (in
  /// place), all_gather and reduce_scatter, plus the run's CUDA `stream`
  /// (null on the CPU) and the `request` to wait for. Their buffers must
  /// stay untouched until the wait. Every member of the group starts and
  /// waits for the group's collectives in the same order. A communicator
  /// may complete a collective when it starts (a request of -1).
  int (*start_all_reduce)(pccrt_comm *comm, uint32_t axes, void *data,
                          int64_t count, int32_t dtype, int32_t reduction,
                          void *stream, int32_t *request);
  int (*start_all_gather)(pccrt_comm *comm, uint32_t axes, const void *in,
                          void *out, int64_t count, int32_t dtype,
                          void *stream, int32_t *request);
  int (*start_reduce_scatter)(pccrt_comm *comm, uint32_t axes, const void *in,
                              void *out, int64_t count, int32_t dtype,
                              int32_t reduction, void *stream,
                              int32_t *request);
  /// Completes `request` for the work that follows: on a stream-ordered
  /// communicator, for the work queued on `stream` after this call; on a
  /// host communicator, before it returns. -1 completes every collective
  /// started and not waited for, and on a stream-ordered communicator waits
  /// on the host for the work queued on `stream` (the end of a run).
  int (*wait)(pccrt_comm *comm, int32_t request, void *stream);
  /// 1 when the communicator works on device memory in the order of the
  /// run's stream (NCCL): a collective then starts after the work queued on
  /// `stream` before it. 0 when it reads and writes the buffers from the
  /// host when it is called: the device's queued work must be done first.
  int (*stream_ordered)(pccrt_comm *comm);
  /// Starts a send as isend does, and sets `request` to what wait_send
  /// completes (-1: complete already). `data` must stay unchanged until
  /// then, or until wait_all, which completes these sends too.
  int (*start_send)(pccrt_comm *comm, uint32_t axes, int32_t peer, int32_t tag,
                    const void *data, int64_t count, int32_t dtype,
                    int32_t *request);
  /// Completes the send that start_send started as `request`: its buffer
  /// may change after it returns. A request of -1 does nothing.
  int (*wait_send)(pccrt_comm *comm, int32_t request);
} pccrt_comm_ops;

/// A communicator as generated code sees it: its operations. Backends
/// embed it first in their own state.
struct pccrt_comm {
  const pccrt_comm_ops *ops;
};

/// What one run of a generated function works on.
typedef struct pccrt_context {
  uint32_t abi_version; ///< PCCRT_ABI_VERSION of the caller
  void *const *inputs;  ///< one pointer per entry of info.inputs
  void *const *outputs; ///< one pointer per entry of info.outputs
  void *const *weights; ///< one pointer per entry of info.weights
  void *workspace;      ///< workspace_bytes bytes, aligned to 64
  int32_t rank;         ///< this rank, 0 when it runs alone
  int32_t num_ranks;    ///< ranks of the program, 1 when alone
  pccrt_comm *comm;     ///< null when alone
  void *stream;         ///< a CUDA stream; null on the CPU target
  /// Called, when not null, as each scheduled action of a pipeline step
  /// begins (`begin` 1) and ends (0), with the action's name ("F3", "B0.1",
  /// "O"): what `pcc run --trace` records.
  void (*trace)(void *user, const char *action, int32_t begin);
  void *trace_user;
  /// Threads the run may use (its loops and GEMMs share one pool); 0: the
  /// program's default. A program compiled with `--threads N` uses N.
  int32_t num_threads;
  /// info.prepared_bytes bytes filled by info.prepare; null when none.
  void *prepared;
  /// Where not null, a run that fails in an op's kernel on the host (an
  /// index out of range) stores the op in words here: its kind, its ONNX
  /// node and the extent its indices index.
  const char **error_op;
} pccrt_context;

/// Error codes returned by a generated run function.
enum {
  PCCRT_OK = 0,
  PCCRT_ERR_INDEX_OUT_OF_RANGE = 1,
  PCCRT_ERR_ABI_MISMATCH = 2, ///< the caller's context is another version
  PCCRT_ERR_COMM = 3,         ///< a collective or transfer failed
  PCCRT_ERR_DEVICE = 4,       ///< a device (CUDA) call or kernel failed
};

#ifdef __cplusplus
} // extern "C"
#endif

#endif // PCCRT_PCCRT_H
