// RUN: pcc-translate --graph-to-cpp --split-input-file %s | FileCheck %s

// A program of several functions: the public @main is the entry
// (pcc_model_run), the private functions are static C++ functions that take
// their argument and result buffers as arrays, compute results in place in
// the caller's buffers, and run in the workspace after their caller's own.
// @scale is called twice, once from the entry and once from @affine, so the
// program's workspace is the entry's (128) plus the deepest chain of calls:
// @affine (64) then @scale (64). The weight "bias", read by @affine and
// @main, is one entry of the weights table.

func.func private @scale(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %k = graph.constant dense<2.0> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %t = graph.mul %x, %k : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %y = graph.add %t, %one : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

func.func private @affine(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>) {
  %w = graph.weight "bias" dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %y = graph.add %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %s = call @scale(%y) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %r = graph.reduce_sum %s {axes = array<i64: 0>, keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
  return %s, %r : tensor<2x3xf32>, tensor<3xf32>
}

func.func @main(%x: tensor<2x3xf32> {onnx.name = "x"})
    -> (tensor<2x3xf32> {onnx.name = "y"}, tensor<3xf32> {onnx.name = "sum"}) {
  %a = call @scale(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %b:2 = call @affine(%a) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>)
  %w = graph.weight "bias" dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %y = graph.sub %b#0, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y, %b#1 : tensor<2x3xf32>, tensor<3xf32>
}

// CHECK:      static const pccrt_tensor_info weights[] = {
// CHECK-NEXT:   {"bias", 1, 1, pcc_w_shape0, PCCRT_KIND_CONSTANT, 0u, 0, 0, 0, 0ull, 0u, 0u},
// CHECK-NEXT: };

// Callees come before their callers.
// CHECK:      // @scale: 64 bytes of workspace, 64 with its calls
// CHECK-NEXT: PCC_PROGRAM static int fn_scale(const pccrt_context *ctx, void *const *args, void *const *results, char *ws) {
// CHECK-NEXT:   void *const *w = ctx->weights;
// CHECK:        float* [[X:a0]] = (float*)args[0];
// CHECK-NEXT:   float* [[T:v[0-9]+]] = (float*)(ws + 0);
// CHECK-NEXT:   float* [[Y:v[0-9]+]] = (float*)results[0];
// CHECK:        pcc_loop{{[0-9]+}}([[T]], [[X]], {{.*}});
// CHECK:        pcc_loop{{[0-9]+}}([[Y]], [[T]], {{.*}});
// CHECK:        if ((void*)((float*)results[0]) != (void*)[[Y]]) std::memcpy(((float*)results[0]), [[Y]], 24);
// CHECK-NEXT:   return PCCRT_OK;
// CHECK-NEXT: }

// CHECK:      // @affine: 64 bytes of workspace, 128 with its calls
// CHECK-NEXT: PCC_PROGRAM static int fn_affine(
// CHECK:        float* [[BIAS:c[0-9]+]] = (float*)w[0];
// CHECK-NEXT:   float* [[AX:a0]] = (float*)args[0];
// CHECK-NEXT:   float* [[AY:v[0-9]+]] = (float*)(ws + 0);
// CHECK-NEXT:   float* [[AS:v[0-9]+]] = (float*)results[0];
// CHECK-NEXT:   float* [[AR:v[0-9]+]] = (float*)results[1];
// CHECK:        pcc_loop{{[0-9]+}}([[AY]], [[AX]], [[BIAS]]);
// CHECK:        // func.call
// CHECK-NEXT:   {
// CHECK-NEXT:     void *const callArgs[] = {[[AY]]};
// CHECK-NEXT:     void *const callResults[] = {[[AS]]};
// CHECK-NEXT:     if (int error = fn_scale(ctx, callArgs, callResults, ws + 64)) return error;
// CHECK-NEXT:   }
// CHECK:        // graph.reduce_sum
// CHECK:        return PCCRT_OK;

// CHECK:      static const pccrt_model_info info = {PCCRT_ABI_VERSION, 1, inputs, 2, outputs, 1, weights, 256ULL, 0, nullptr, nullptr, -1, PCCRT_DEVICE_HOST, 0, nullptr, 1, entries, nullptr};

// CHECK:      extern "C" PCC_PROGRAM int pcc_model_run(const pccrt_context *ctx) {
// CHECK:        float* [[MX:a0]] = (float*)in[0];
// CHECK-NEXT:   float* [[A:v[0-9]+]] = (float*)(ws + 0);
// CHECK-NEXT:   float* [[B0:v[0-9]+]] = (float*)(ws + 64);
// CHECK-NEXT:   float* [[B1:v[0-9]+]] = (float*)out[1];
// CHECK-NEXT:   float* [[MY:v[0-9]+]] = (float*)out[0];
// CHECK:        void *const callArgs[] = {[[MX]]};
// CHECK-NEXT:   void *const callResults[] = {[[A]]};
// CHECK-NEXT:   if (int error = fn_scale(ctx, callArgs, callResults, ws + 128)) return error;
// CHECK:        void *const callArgs[] = {[[A]]};
// CHECK-NEXT:   void *const callResults[] = {[[B0]], [[B1]]};
// CHECK-NEXT:   if (int error = fn_affine(ctx, callArgs, callResults, ws + 128)) return error;
// CHECK:        pcc_loop{{[0-9]+}}([[MY]], [[B0]], {{.*}});

// -----

// Collectives in a callee use the run context's communicator as in the
// entry; a large splat of a callee is filled in the callee's workspace; a
// call of no arguments passes an array of one unused null; names that are
// no C++ identifiers are mangled.

dist.mesh @mesh(tp = 2)

func.func private @"stage.0"() -> tensor<2048xf32> {
  %c = graph.constant dense<3.0> : tensor<2048xf32>
  %r = dist.all_reduce %c on @mesh axes ["tp"] sum : tensor<2048xf32>
  return %r : tensor<2048xf32>
}

func.func @step() -> (tensor<2048xf32> {onnx.name = "r"}) {
  %r = call @"stage.0"() : () -> tensor<2048xf32>
  return %r : tensor<2048xf32>
}

// CHECK:      // @stage.0: 8192 bytes of workspace, 8192 with its calls
// CHECK-NEXT: PCC_PROGRAM static int fn_stage_0(
// CHECK:        float* [[C:v[0-9]+]] = (float*)(ws + 0);
// CHECK:        std::fill_n([[C]], 2048, float(0x1.8p+1f));
// CHECK:        int32_t [[Q:q[0-9]+]] = -1;
// CHECK:        if (ctx->comm->ops->start_all_reduce(ctx->comm, 1u, {{.*}}, 2048, 1, 1, nullptr, &[[Q]])) return PCCRT_ERR_COMM;
// CHECK-NEXT:   if (ctx->comm->ops->wait(ctx->comm, [[Q]], nullptr)) return PCCRT_ERR_COMM;
// CHECK:      {PCCRT_ABI_VERSION, 0, inputs, 1, outputs, 0, weights, 8192ULL, 1, pcc_mesh_axes, pcc_mesh_shape, -1, PCCRT_DEVICE_HOST, 0, nullptr, 1, entries, nullptr}
// CHECK:      extern "C" PCC_PROGRAM int pcc_model_run(
// CHECK:        if (!ctx->comm) return PCCRT_ERR_COMM;
// CHECK:        void *const callArgs[] = {nullptr};
// CHECK-NEXT:   void *const callResults[] = {{{v[0-9]+}}};
// CHECK-NEXT:   if (int error = fn_stage_0(ctx, callArgs, callResults, ws + 0)) return error;

// -----

// A callee's result marked dist.accumulates = j is written into the buffer
// of argument j (a partial sum), which the caller gives the result too, so
// that nothing is copied: the product whose sum with the partial sum is
// that result accumulates into it (beta 1, no epilogue, no buffer of its
// own); an element-wise sum is computed in place. The caller's second call accumulates into the
// first call's result.

func.func private @grad(%x: tensor<4x8xf32>, %y: tensor<8x16xf32>, %partial: tensor<4x16xf32>, %bias: tensor<16xf32>, %bpartial: tensor<16xf32>,
                        %ids: tensor<3xi64>, %rows: tensor<3x16xf32>, %epartial: tensor<5x16xf32>)
    -> (tensor<4x16xf32> {dist.accumulates = 2 : i64}, tensor<16xf32> {dist.accumulates = 4 : i64}, tensor<5x16xf32> {dist.accumulates = 7 : i64}) {
  %p = graph.matmul %x, %y {graph.epilogue} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = graph.add %partial, %p : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %b = graph.add %bpartial, %bias : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %t = graph.scatter_add %rows[%ids] {axis = 0 : i64} : (tensor<3x16xf32>, tensor<3xi64>) -> tensor<5x16xf32>
  %e = graph.add %epartial, %t : (tensor<5x16xf32>, tensor<5x16xf32>) -> tensor<5x16xf32>
  return %s, %b, %e : tensor<4x16xf32>, tensor<16xf32>, tensor<5x16xf32>
}

func.func @main(%x: tensor<4x8xf32> {onnx.name = "x"}, %y: tensor<8x16xf32> {onnx.name = "y"}, %bias: tensor<16xf32> {onnx.name = "bias"},
                %ids: tensor<3xi64> {onnx.name = "ids"}, %rows: tensor<3x16xf32> {onnx.name = "rows"})
    -> (tensor<4x16xf32> {onnx.name = "g"}, tensor<16xf32> {onnx.name = "gb"}, tensor<5x16xf32> {onnx.name = "ge"}) {
  %zero = graph.constant dense<0.0> : tensor<16xf32>
  %first = graph.matmul %x, %y : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %firstb = graph.add %bias, %zero : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %firste = graph.scatter_add %rows[%ids] {axis = 0 : i64} : (tensor<3x16xf32>, tensor<3xi64>) -> tensor<5x16xf32>
  %a:3 = call @grad(%x, %y, %first, %bias, %firstb, %ids, %rows, %firste) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<3xi64>, tensor<3x16xf32>, tensor<5x16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>, tensor<5x16xf32>)
  %b:3 = call @grad(%x, %y, %a#0, %bias, %a#1, %ids, %rows, %a#2) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<3xi64>, tensor<3x16xf32>, tensor<5x16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>, tensor<5x16xf32>)
  return %b#0, %b#1, %b#2 : tensor<4x16xf32>, tensor<16xf32>, tensor<5x16xf32>
}

// The product and the scatter take no buffer of their own: their results
// live in the partial sums' buffers, as the sums do.
// CHECK:      // @grad: 0 bytes of workspace, 0 with its calls
// CHECK-NEXT: PCC_PROGRAM static int fn_grad(
// CHECK:        float* [[PARTIAL:a2]] = (float*)args[2];
// CHECK:        float* [[BPARTIAL:a4]] = (float*)args[4];
// CHECK:        float* {{v[0-9]+}} = (float*)[[PARTIAL]];
// CHECK-NEXT:   float* [[S:v[0-9]+]] = (float*)[[PARTIAL]];
// CHECK-NEXT:   float* [[B:v[0-9]+]] = (float*)[[BPARTIAL]];
// CHECK-NEXT:   float* {{v[0-9]+}} = (float*)a7;
// CHECK-NEXT:   float* [[E:v[0-9]+]] = (float*)a7;
// CHECK:        pcc_k::gemm<float>(4, 16, 8, float(1), a0 + 0, 8, false, a1 + 0, 16, false, float(1), [[S]] + 0, 16);
// CHECK-NEXT:   }
// CHECK-NEXT:   // graph.add
// CHECK-NEXT:   // graph.add
// CHECK:        pcc_loop{{[0-9]+}}([[B]], a3);
// The scatter adds its rows into the partial sum's buffer, with no table
// of zeros and no add after it.
// CHECK:        pcc_k::scatterAdd(a6, a5, [[E]], 1, 5, 16, 3, true)
// CHECK-NEXT:   // graph.add
// CHECK-NEXT:   if ((void*)((float*)results[0]) != (void*)[[S]]) std::memcpy(
// CHECK-NEXT:   if ((void*)((float*)results[1]) != (void*)[[B]]) std::memcpy(
// CHECK-NEXT:   if ((void*)((float*)results[2]) != (void*)[[E]]) std::memcpy(
// CHECK:      extern "C" PCC_PROGRAM int pcc_model_run(
// CHECK:        float* [[FIRST:v[0-9]+]] = (float*)(ws + {{[0-9]+}});
// CHECK:        float* [[A0:v[0-9]+]] = (float*)[[FIRST]];
// CHECK:        void *const callArgs[] = {a0, a1, [[FIRST]], a2, [[FB:v[0-9]+]], a3, a4, [[FE:v[0-9]+]]};
// CHECK-NEXT:   void *const callResults[] = {[[A0]], [[A1:v[0-9]+]], [[A2:v[0-9]+]]};
// CHECK:        void *const callArgs[] = {a0, a1, [[A0]], a2, [[A1]], a3, a4, [[A2]]};

// -----

// A gradient that is a sum of terms (a tied embedding's and LM head's),
// added to the partial sum term by term (pcc-lower-schedule's accumulating
// variant: the product first, then the scatter): the product adds itself
// into the partial sum's buffer (beta 1), then the scatter its rows, with
// no buffer and no add of their own.

func.func private @tied(%x: tensor<5x8xf32>, %y: tensor<8x16xf32>, %ids: tensor<3xi64>, %rows: tensor<3x16xf32>, %partial: tensor<5x16xf32>)
    -> (tensor<5x16xf32> {dist.accumulates = 4 : i64}) {
  %p = graph.matmul %x, %y : (tensor<5x8xf32>, tensor<8x16xf32>) -> tensor<5x16xf32>
  %s = graph.add %partial, %p : (tensor<5x16xf32>, tensor<5x16xf32>) -> tensor<5x16xf32>
  %t = graph.scatter_add %rows[%ids] {axis = 0 : i64} : (tensor<3x16xf32>, tensor<3xi64>) -> tensor<5x16xf32>
  %e = graph.add %s, %t : (tensor<5x16xf32>, tensor<5x16xf32>) -> tensor<5x16xf32>
  return %e : tensor<5x16xf32>
}

func.func @main(%x: tensor<5x8xf32> {onnx.name = "x"}, %y: tensor<8x16xf32> {onnx.name = "y"},
                %ids: tensor<3xi64> {onnx.name = "ids"}, %rows: tensor<3x16xf32> {onnx.name = "rows"})
    -> (tensor<5x16xf32> {onnx.name = "g"}) {
  %first = graph.matmul %x, %y : (tensor<5x8xf32>, tensor<8x16xf32>) -> tensor<5x16xf32>
  %a = call @tied(%x, %y, %ids, %rows, %first) : (tensor<5x8xf32>, tensor<8x16xf32>, tensor<3xi64>, tensor<3x16xf32>, tensor<5x16xf32>) -> tensor<5x16xf32>
  return %a : tensor<5x16xf32>
}

// CHECK:      // @tied: 0 bytes of workspace, 0 with its calls
// CHECK-NEXT: PCC_PROGRAM static int fn_tied(
// CHECK:        float* [[PARTIAL:a4]] = (float*)args[4];
// CHECK-NEXT:   float* {{v[0-9]+}} = (float*)[[PARTIAL]];
// CHECK-NEXT:   float* [[S:v[0-9]+]] = (float*)[[PARTIAL]];
// CHECK-NEXT:   float* {{v[0-9]+}} = (float*)[[PARTIAL]];
// CHECK-NEXT:   float* [[E:v[0-9]+]] = (float*)[[PARTIAL]];
// CHECK:        pcc_k::gemm<float>(5, 16, 8, float(1), a0 + 0, 8, false, a1 + 0, 16, false, float(1), [[S]] + 0, 16);
// CHECK-NEXT:   }
// CHECK-NEXT:   // graph.add
// CHECK-NEXT:   // graph.scatter_add
// CHECK-NEXT:   pcc_k::scatterAdd(a3, a2, [[E]], 1, 5, 16, 3, true)
// CHECK-NEXT:   // graph.add
// CHECK-NEXT:   if ((void*)((float*)results[0]) != (void*)[[E]]) std::memcpy(

// -----

// A state that the caller updates with a call's result, and reads no more
// after the call, may be the buffer that the callee writes the result into
// (dist.accumulates: a pipeline rank's optimizer): the callee updates it in
// place, and the step copies nothing back at its end.

func.func private @optimizer(%p: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32> {dist.accumulates = 0 : i64}) {
  %lr = graph.constant dense<0.5> : tensor<f32>
  %d = graph.mul %g, %lr : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %q = graph.sub %p, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %q : tensor<4xf32>
}

func.func @main(%x: tensor<4xf32> {onnx.name = "x"},
                %p: tensor<4xf32> {graph.state = "p", graph.init = dense<1.0> : tensor<4xf32>})
    -> (tensor<4xf32> {onnx.name = "y"}, tensor<4xf32> {graph.update = 1 : i64}) {
  %y = graph.mul %x, %p : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %q = call @optimizer(%p, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y, %q : tensor<4xf32>, tensor<4xf32>
}

// CHECK:      PCC_PROGRAM static int fn_optimizer(
// CHECK:        float* [[OP:a0]] = (float*)args[0];
// CHECK:        float* [[OQ:v[0-9]+]] = (float*)[[OP]];
// CHECK:        if ((void*)((float*)results[0]) != (void*)[[OQ]]) std::memcpy(
// CHECK:      extern "C" PCC_PROGRAM int pcc_model_run(
// CHECK:        float* [[P:a[0-9]+]] = (float*)w[0];
// CHECK:        float* [[Q:v[0-9]+]] = (float*)[[P]];
// CHECK:        void *const callResults[] = {[[Q]]};
// CHECK:        // state update 'p'
// CHECK-NEXT:   if ((void*)((float*)w[0]) != (void*)[[Q]]) std::memcpy(
