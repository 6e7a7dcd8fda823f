// RUN: pcc-translate --graph-to-cpp --split-input-file %s | FileCheck %s

// A pipeline-parallel program: one public function per pipeline rank, each
// marked with its coordinate along the mesh axis "pp" (dist.rank). Each
// becomes a static function; pcc_model_run computes the rank's coordinate
// (row-major over the mesh: "pp" is the second axis of (tp, pp), stride 1)
// and calls its entry. The tables are the union of the entries' interfaces,
// and every entry records the pipeline ranks holding it: "x" is read only
// by rank 0 and "u" only by rank 1, the output "y" is made by rank 1 and
// "z" by rank 0 (listed by dist.result_index, not by entry), the weight
// "scale" is read by @scale, which both ranks reach, and "shift" by
// @finish, which only rank 1 reaches. The send is non-blocking: its buffer
// stays alive (the add after it gets a block of its own) until wait_all,
// before the results land. Calls marked dist.action are traced.

dist.mesh @mesh(tp = 2, pp = 2)

func.func private @scale(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %w = graph.weight "scale" dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %y = graph.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

func.func private @finish(%h: tensor<2x3xf32>, %u: tensor<3xf32>) -> tensor<2x3xf32> {
  %s = call @scale(%h) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %w = graph.weight "shift" dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %a = graph.add %s, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %y = graph.add %a, %u : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

func.func @last(%x: tensor<2x3xf32> {onnx.name = "x"}, %u: tensor<3xf32> {onnx.name = "u"})
    -> (tensor<2x3xf32> {onnx.name = "y", dist.result_index = 0 : i64})
    attributes {dist.rank = 1 : i64} {
  %h = dist.recv on @mesh axes ["pp"] from 0 tag 7 : tensor<2x3xf32>
  %y = call @finish(%h, %u) {dist.action = "F0"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

func.func @first(%x: tensor<2x3xf32> {onnx.name = "x"}, %u: tensor<3xf32> {onnx.name = "u"})
    -> (tensor<3xf32> {onnx.name = "z", dist.result_index = 1 : i64})
    attributes {dist.rank = 0 : i64} {
  %h = call @scale(%x) {dist.action = "F0"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  dist.send %h on @mesh axes ["pp"] to 1 tag 7 : tensor<2x3xf32>
  %k = graph.add %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %z = graph.reduce_sum %k {axes = array<i64: 0>, keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
  return %z : tensor<3xf32>
}

// CHECK:      static const pccrt_tensor_info inputs[] = {
// CHECK-NEXT:   {"x", 1, 2, pcc_in_shape0, PCCRT_KIND_INPUT, 0u, 0, 0, 0, 1ull, 0u, 0u},
// CHECK-NEXT:   {"u", 1, 1, pcc_in_shape1, PCCRT_KIND_INPUT, 0u, 0, 0, 0, 2ull, 0u, 0u},
// CHECK-NEXT: };
// CHECK-NEXT: static const pccrt_tensor_info outputs[] = {
// CHECK-NEXT:   {"y", 1, 2, pcc_out_shape0, PCCRT_KIND_OUTPUT, 0u, 0, 0, 0, 2ull, 0u, 0u},
// CHECK-NEXT:   {"z", 1, 1, pcc_out_shape1, PCCRT_KIND_OUTPUT, 0u, 0, 0, 0, 1ull, 0u, 0u},
// CHECK-NEXT: };
// CHECK-NEXT: static const pccrt_tensor_info weights[] = {
// CHECK-NEXT:   {"shift", 1, 1, pcc_w_shape0, PCCRT_KIND_CONSTANT, 0u, 0, 0, 0, 2ull, 0u, 0u},
// CHECK-NEXT:   {"scale", 1, 1, pcc_w_shape1, PCCRT_KIND_CONSTANT, 0u, 0, 0, 0, 3ull, 0u, 0u},
// CHECK-NEXT: };

// CHECK:      PCC_PROGRAM static int fn_scale(const pccrt_context *ctx, void *const *args, void *const *results, char *ws) {
// CHECK:      PCC_PROGRAM static int fn_finish(const pccrt_context *ctx, void *const *args, void *const *results, char *ws) {

// CHECK:      // @first, pipeline rank 0: 128 bytes of workspace, 128 with its calls
// CHECK-NEXT: PCC_PROGRAM static int fn_first(const pccrt_context *ctx) {
// CHECK-NEXT:   void *const *in = ctx->inputs;
// CHECK-NEXT:   void *const *out = ctx->outputs;
// CHECK-NEXT:   void *const *w = ctx->weights;
// CHECK-NEXT:   char *ws = (char *)ctx->workspace;
// CHECK:        float* [[H:v[0-9]+]] = (float*)(ws + 0);
// CHECK-NEXT:   float* [[K:v[0-9]+]] = (float*)(ws + 64);
// CHECK-NEXT:   float* [[Z:v[0-9]+]] = (float*)out[1];
// CHECK:        if (ctx->trace) ctx->trace(ctx->trace_user, "F0", 1);
// CHECK-NEXT:   {
// CHECK:          if (int error = fn_scale(ctx, callArgs, callResults, ws + 128)) return error;
// CHECK-NEXT:   }
// CHECK-NEXT:   if (ctx->trace) ctx->trace(ctx->trace_user, "F0", 0);
// CHECK-NEXT:   // dist.send
// CHECK-NEXT:   if (ctx->comm->ops->isend(ctx->comm, 2u, 1, 7, [[H]], 6, 1)) return PCCRT_ERR_COMM;
// CHECK:        pcc_loop{{[0-9]+}}([[K]], 
// CHECK:        if (ctx->comm->ops->wait_all(ctx->comm)) return PCCRT_ERR_COMM;
// CHECK-NEXT:   if ((void*)((float*)out[1]) != (void*)[[Z]])
// CHECK-NEXT:   return PCCRT_OK;
// CHECK-NEXT: }

// CHECK:      // @last, pipeline rank 1: 64 bytes of workspace, 128 with its calls
// CHECK-NEXT: PCC_PROGRAM static int fn_last(const pccrt_context *ctx) {
// CHECK:        float* [[R:v[0-9]+]] = (float*)(ws + 0);
// CHECK-NEXT:   float* [[Y:v[0-9]+]] = (float*)out[0];
// CHECK-NEXT:   // dist.recv
// CHECK-NEXT:   if (ctx->comm->ops->recv(ctx->comm, 2u, 0, 7, [[R]], 6, 1)) return PCCRT_ERR_COMM;
// CHECK-NEXT:   // func.call
// CHECK-NEXT:   if (ctx->trace) ctx->trace(ctx->trace_user, "F0", 1);
// CHECK:          if (int error = fn_finish(ctx, callArgs, callResults, ws + 64)) return error;
// CHECK-NEXT:   }
// CHECK-NEXT:   if (ctx->trace) ctx->trace(ctx->trace_user, "F0", 0);
// CHECK-NOT:    wait_all
// CHECK:        return PCCRT_OK;
// CHECK-NEXT: }
// CHECK-NEXT: } // namespace pcc_model

// The program's workspace is the most one rank's entry needs.
// Each pipeline rank allocates its own workspace (ABI 15): rank 0's
// function needs 128 bytes, rank 1's 64 and its callee's 64 after them
// (the callee's second sum is made in the first's buffer).
// CHECK:      static const uint64_t stage_workspace[] = {128ULL, 128ULL};
// CHECK-NEXT: {PCCRT_ABI_VERSION, 2, inputs, 2, outputs, 2, weights, 128ULL, 2, pcc_mesh_axes, pcc_mesh_shape, 1, PCCRT_DEVICE_HOST, 0, nullptr, 1, entries, stage_workspace};

// CHECK:      extern "C" PCC_PROGRAM int pcc_model_run(const pccrt_context *ctx) {
// CHECK-NEXT:   using namespace pcc_model;
// CHECK-NEXT:   if (ctx->abi_version != PCCRT_ABI_VERSION) return PCCRT_ERR_ABI_MISMATCH;
// CHECK-NEXT:   if (!ctx->comm) return PCCRT_ERR_COMM;
// CHECK-NEXT:   pcc_k::setThreads(ctx->num_threads);
// CHECK-NEXT:   int rc = PCCRT_ERR_ABI_MISMATCH;
// CHECK-NEXT:   switch ((int64_t)ctx->rank / 1 % 2) {
// CHECK-NEXT:   case 0: rc = fn_first(ctx); break;
// CHECK-NEXT:   case 1: rc = fn_last(ctx); break;
// CHECK-NEXT:   }
// CHECK-NEXT:   if (rc != PCCRT_OK) return rc;
// CHECK-NEXT:   return PCCRT_OK;
// CHECK-NEXT: }

// -----

// A training step over two pipeline ranks: each entry takes the state it
// holds. "w" (a parameter tied across the stages) is state of both, "a" of
// rank 0 only, "b" of rank 1 only; both ranks give the gradient of "w"
// (one GRAD entry held by both). State updates land in the state's one
// weights-table entry.

dist.mesh @mesh(pp = 2)

func.func private @sgd(%w: tensor<3xf32>, %g: tensor<3xf32>) -> tensor<3xf32> {
  %lr = graph.constant dense<5.000000e-01> : tensor<f32>
  %s = graph.mul %g, %lr : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %n = graph.sub %w, %s : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %n : tensor<3xf32>
}

func.func @rank0(%x: tensor<3xf32> {onnx.name = "x"},
                 %w: tensor<3xf32> {graph.state = "w", graph.init = dense<1.0> : tensor<3xf32>},
                 %a: tensor<3xf32> {graph.state = "a", graph.init = dense<2.0> : tensor<3xf32>})
    -> (tensor<3xf32> {graph.grad = 1 : i64, dist.result_index = 1 : i64},
        tensor<3xf32> {graph.update = 1 : i64, dist.result_index = 2 : i64},
        tensor<3xf32> {graph.update = 2 : i64, dist.result_index = 3 : i64})
    attributes {dist.rank = 0 : i64} {
  %g = graph.mul %x, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %n = call @sgd(%w, %g) {dist.action = "O"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %na = graph.add %a, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %g, %n, %na : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

func.func @rank1(%x: tensor<3xf32> {onnx.name = "x"},
                 %w: tensor<3xf32> {graph.state = "w", graph.init = dense<1.0> : tensor<3xf32>},
                 %b: tensor<3xf32> {graph.state = "b", graph.init = dense<3.0> : tensor<3xf32>})
    -> (tensor<f32> {graph.loss, onnx.name = "loss", dist.result_index = 0 : i64},
        tensor<3xf32> {graph.grad = 1 : i64, dist.result_index = 1 : i64},
        tensor<3xf32> {graph.update = 1 : i64, dist.result_index = 2 : i64},
        tensor<3xf32> {graph.update = 2 : i64, dist.result_index = 4 : i64})
    attributes {dist.rank = 1 : i64} {
  %p = graph.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  %n = call @sgd(%w, %x) {dist.action = "O"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %l, %x, %n, %b : tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// CHECK:      static const pccrt_tensor_info inputs[] = {
// CHECK-NEXT:   {"x", 1, 1, pcc_in_shape0, PCCRT_KIND_INPUT, 0u, 0, 0, 0, 3ull, 0u, 0u},
// CHECK-NEXT: };
// CHECK-NEXT: static const pccrt_tensor_info outputs[] = {
// CHECK-NEXT:   {"loss", 1, 0, pcc_out_shape0, PCCRT_KIND_OUTPUT, 0u, 0, 0, 0, 2ull, 0u, 0u},
// CHECK-NEXT:   {"w", 1, 1, pcc_out_shape1, PCCRT_KIND_GRAD, 0u, 0, 0, 0, 3ull, 0u, 0u},
// CHECK-NEXT: };
// CHECK-NEXT: static const pccrt_tensor_info weights[] = {
// CHECK-NEXT:   {"w", 1, 1, pcc_w_shape0, PCCRT_KIND_STATE, 0u, 0, 0, 0, 3ull, 0u, 0u},
// CHECK-NEXT:   {"a", 1, 1, pcc_w_shape1, PCCRT_KIND_STATE, 0u, 0, 0, 0, 1ull, 0u, 0u},
// CHECK-NEXT:   {"b", 1, 1, pcc_w_shape2, PCCRT_KIND_STATE, 0u, 0, 0, 0, 2ull, 0u, 0u},
// CHECK-NEXT: };

// CHECK:      PCC_PROGRAM static int fn_rank0(const pccrt_context *ctx) {
// CHECK:        float* a1 = (float*)w[0];
// CHECK-NEXT:   float* a2 = (float*)w[1];
// CHECK:        if (ctx->trace) ctx->trace(ctx->trace_user, "O", 1);
// CHECK:        if (ctx->trace) ctx->trace(ctx->trace_user, "O", 0);
// CHECK:        // state update 'w'
// CHECK-NEXT:   std::memcpy(((float*)w[0])
// CHECK:        // state update 'a'
// CHECK-NEXT:   std::memcpy(((float*)w[1])

// CHECK:      PCC_PROGRAM static int fn_rank1(const pccrt_context *ctx) {
// CHECK:        float* a1 = (float*)w[0];
// CHECK-NEXT:   float* a2 = (float*)w[2];
// CHECK:        std::memcpy(((float*)out[0])
// CHECK:        std::memcpy(((float*)out[1])
// CHECK:        // state update 'w'
// CHECK-NEXT:   std::memcpy(((float*)w[0])
// CHECK:        // state update 'b'
// CHECK-NEXT:   std::memcpy(((float*)w[2])

// The mesh has the one axis "pp": stage_axis 0.
// CHECK:      {PCCRT_ABI_VERSION, 1, inputs, 2, outputs, 3, weights, {{[0-9]+}}ULL, 1, pcc_mesh_axes, pcc_mesh_shape, 0, PCCRT_DEVICE_HOST, 0, nullptr, 1, entries, stage_workspace};
// CHECK:        switch ((int64_t)ctx->rank / 1 % 2) {
// CHECK-NEXT:   case 0: rc = fn_rank0(ctx); break;
// CHECK-NEXT:   case 1: rc = fn_rank1(ctx); break;

// -----

// A send that a dist.wait_send completes starts with a request and reads
// its buffer until the wait: the difference after the wait takes the sent
// tensor's block of the workspace (the product before it, which is read
// after the difference, keeps its own).

dist.mesh @mesh(pp = 2)

func.func @sender(%x: tensor<2x3xf32> {onnx.name = "x"})
    -> (tensor<2x3xf32> {onnx.name = "y", dist.result_index = 0 : i64})
    attributes {dist.rank = 0 : i64} {
  %h = graph.add %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  dist.send %h on @mesh axes ["pp"] to 1 tag 3 : tensor<2x3xf32>
  %k = graph.mul %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  dist.wait_send %h on @mesh axes ["pp"] to 1 tag 3 : tensor<2x3xf32>
  %m = graph.sub %k, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = graph.mul %m, %k : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

func.func @receiver(%x: tensor<2x3xf32> {onnx.name = "x"})
    -> (tensor<2x3xf32> {onnx.name = "y", dist.result_index = 0 : i64})
    attributes {dist.rank = 1 : i64} {
  %h = dist.recv on @mesh axes ["pp"] from 0 tag 3 : tensor<2x3xf32>
  return %h : tensor<2x3xf32>
}

// CHECK:      PCC_PROGRAM static int fn_sender(const pccrt_context *ctx) {
// CHECK:        float* [[H:v[0-9]+]] = (float*)(ws + 0);
// CHECK-NEXT:   float* [[K:v[0-9]+]] = (float*)(ws + 64);
// CHECK-NEXT:   float* [[M:v[0-9]+]] = (float*)(ws + 0);
// CHECK:        // dist.send
// CHECK-NEXT:   int32_t [[Q:sendq[0-9]+]] = -1;
// CHECK-NEXT:   if (ctx->comm->ops->start_send(ctx->comm, 1u, 1, 3, [[H]], 6, 1, &[[Q]])) return PCCRT_ERR_COMM;
// CHECK:        // dist.wait_send
// CHECK-NEXT:   if (ctx->comm->ops->wait_send(ctx->comm, [[Q]])) return PCCRT_ERR_COMM;
// CHECK:        pcc_loop{{[0-9]+}}([[M]],
// CHECK-NOT:    wait_all
// CHECK:        return PCCRT_OK;
