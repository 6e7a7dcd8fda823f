/*===- model.c - A handwritten training step, split over ranks or not -----===*
 *
 * What pcc would emit for a tiny training step under tensor parallelism,
 * written by hand so that the runtime and `pcc run` can be tested before
 * (and independently of) the compiler. Built twice from this source:
 *
 *   -DN=<ranks> -DSPLIT=1 -DMESH=<sizes> -DMESH_RANK=<axes> -DMASK=<axes>
 *       the program of N ranks: "w", "u", "v" and the outputs "w" and "z"
 *       split over the mesh axes MASK (whose group must hold all N ranks)
 *   -DN=<ranks> -DSPLIT=0
 *       the same program on one rank, with the whole tensors
 *
 * Whole tensors: input x F32 [4] and u F32 [2N]; STATE w F32 [4N] (split in
 * 2 groups, as Megatron splits a fused QKV or gate-up weight), CONSTANT v
 * F32 [3N-1] (split with one row of padding, as a vocabulary that the ranks
 * do not divide), STATE pcc.step I64 []. Outputs: loss = sum(w^2) + sum(v)
 * + sum(u) + sum(x), summed over the ranks by one all_reduce; GRAD w = 2w;
 * z = 10 v. The update halves w and counts the step. All values are small
 * integers, so every rank count computes bit-identical results. A
 * negative x[0] makes ranks fail (below).
 *
 *===----------------------------------------------------------------------===*/

#include "pccrt/pccrt.h"

#if SPLIT
#define WL 4
#define UL 2
#define VL 3
#else
#define WL (4 * N)
#define UL (2 * N)
#define VL (3 * N - 1)
#endif

static const int64_t xShape[] = {4}, uShape[] = {UL}, wShape[] = {WL},
                     vShape[] = {VL};

#if SPLIT
static const char *const meshAxes[] = {"tp", "tp2"};
static const int64_t meshShape[] = {MESH};
static const pccrt_tensor_info inputs[] = {
    {"x", PCCRT_F32, 1, xShape, PCCRT_KIND_INPUT},
    {"u", PCCRT_F32, 1, uShape, PCCRT_KIND_INPUT, MASK, 0, 0, 0}};
static const pccrt_tensor_info weights[] = {
    {"w", PCCRT_F32, 1, wShape, PCCRT_KIND_STATE, MASK, 0, 2, 0},
    {"v", PCCRT_F32, 1, vShape, PCCRT_KIND_CONSTANT, MASK, 0, 0, 3 * N - 1},
    {"pcc.step", PCCRT_I64, 0, 0, PCCRT_KIND_STATE}};
static const pccrt_tensor_info outputs[] = {
    {"loss", PCCRT_F32, 0, 0, PCCRT_KIND_OUTPUT},
    {"w", PCCRT_F32, 1, wShape, PCCRT_KIND_GRAD, MASK, 0, 2, 0},
    {"z", PCCRT_F32, 1, vShape, PCCRT_KIND_OUTPUT, MASK, 0, 0, 3 * N - 1}};
static const pccrt_model_info info = {PCCRT_ABI_VERSION, 2,        inputs,   3,
                                      outputs,           3,        weights,  64,
                                      MESH_RANK,         meshAxes, meshShape};
#else
static const pccrt_tensor_info inputs[] = {
    {"x", PCCRT_F32, 1, xShape, PCCRT_KIND_INPUT},
    {"u", PCCRT_F32, 1, uShape, PCCRT_KIND_INPUT}};
static const pccrt_tensor_info weights[] = {
    {"w", PCCRT_F32, 1, wShape, PCCRT_KIND_STATE},
    {"v", PCCRT_F32, 1, vShape, PCCRT_KIND_CONSTANT},
    {"pcc.step", PCCRT_I64, 0, 0, PCCRT_KIND_STATE}};
static const pccrt_tensor_info outputs[] = {
    {"loss", PCCRT_F32, 0, 0, PCCRT_KIND_OUTPUT},
    {"w", PCCRT_F32, 1, wShape, PCCRT_KIND_GRAD},
    {"z", PCCRT_F32, 1, vShape, PCCRT_KIND_OUTPUT}};
static const pccrt_model_info info = {PCCRT_ABI_VERSION, 2, inputs,  3,
                                      outputs,           3, weights, 64};
#endif

const pccrt_model_info *pcc_model_info(void) { return &info; }

int pcc_model_run(const pccrt_context *ctx) {
  const float *x = ctx->inputs[0], *u = ctx->inputs[1], *v = ctx->weights[1];
  float *w = ctx->weights[0], *loss = ctx->outputs[0], *grad = ctx->outputs[1],
        *z = ctx->outputs[2];
  long long *step = ctx->weights[2];
  float partial = 0;
  if (ctx->abi_version != PCCRT_ABI_VERSION)
    return PCCRT_ERR_ABI_MISMATCH;
  /* x[0] = -1 - r fails the step on rank r alone, below -N on every rank. */
  if (x[0] < 0 && (x[0] < -N || ctx->rank == (int)(-x[0]) - 1))
    return PCCRT_ERR_INDEX_OUT_OF_RANGE;
  for (int i = 0; i < WL; ++i) {
    partial += w[i] * w[i];
    if (grad) /* null where the caller does not read it (ABI 16) */
      grad[i] = 2 * w[i];
  }
  for (int i = 0; i < VL; ++i) {
    partial += v[i]; /* padding is zero */
    z[i] = 10 * v[i];
  }
  for (int i = 0; i < UL; ++i)
    partial += u[i];
#if SPLIT
  if (!ctx->comm || ctx->num_ranks != N)
    return PCCRT_ERR_COMM;
  int code = ctx->comm->ops->all_reduce(ctx->comm, MASK, &partial, 1, PCCRT_F32,
                                        PCCRT_REDUCE_SUM);
  if (code != PCCRT_OK)
    return code;
#endif
  *loss = partial + x[0] + x[1] + x[2] + x[3];
  for (int i = 0; i < WL; ++i)
    w[i] *= 0.5f;
  *step += 1;
  return PCCRT_OK;
}
