// RUN: pcc-translate --graph-to-cpp %s | FileCheck %s

// An inference function: graph inputs and outputs by their ONNX names, a
// parameter read from the weights table as a CONSTANT, the result computed
// in place in its output buffer, and the ABI v2 signature (writable weights).
// Each loop nest is a kernel of its own whose parameters are its buffers.

func.func @main(%x: tensor<2x3xf32> {onnx.name = "x"}) -> (tensor<2x3xf32> {onnx.name = "y"}) {
  %w = graph.weight "bias" dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %0 = graph.add %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = graph.relu %0 : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// CHECK:      static void [[ADD:pcc_loop[0-9]+]](float* __restrict p0, const float* __restrict p1, const float* __restrict p2) {
// CHECK-NEXT:   for (int64_t i0 = 0; i0 < 2; ++i0)
// CHECK-NEXT:     for (int64_t i1 = 0; i1 < 3; ++i1)
// CHECK-NEXT:       { p0[0 + i0 * 3 + i1] = float(p1[0 + i0 * 3 + i1] + p2[0 + i1]); }
// CHECK-NEXT: }
// CHECK-NEXT: static void [[RELU:pcc_loop[0-9]+]](float* __restrict p0, const float* __restrict p1) {
// CHECK-NEXT:   for (int64_t i0 = 0; i0 < 6; ++i0)
// CHECK-NEXT:     { p0[0 + i0] = (p1[0 + i0] > float(0) ? p1[0 + i0] : float(0)); }
// CHECK-NEXT: }
// CHECK:      static const pccrt_tensor_info inputs[] = {
// CHECK-NEXT:   {"x", 1, 2, pcc_in_shape0, PCCRT_KIND_INPUT, 0u, 0, 0, 0, 0ull, 0u, 0u},
// CHECK-NEXT: };
// CHECK-NEXT: static const pccrt_tensor_info outputs[] = {
// CHECK-NEXT:   {"y", 1, 2, pcc_out_shape0, PCCRT_KIND_OUTPUT, 0u, 0, 0, 0, 0ull, 0u, 0u},
// CHECK-NEXT: };
// CHECK-NEXT: static const pccrt_tensor_info weights[] = {
// CHECK-NEXT:   {"bias", 1, 1, pcc_w_shape0, PCCRT_KIND_CONSTANT, 0u, 0, 0, 0, 0ull, 0u, 0u},
// CHECK-NEXT: };
// CHECK:      static const pccrt_model_info info = {PCCRT_ABI_VERSION, 1, inputs, 1, outputs, 1, weights, 64ULL, 0, nullptr, nullptr, -1, PCCRT_DEVICE_HOST, 0, nullptr, 1, entries, nullptr};
// CHECK:      extern "C" PCC_PROGRAM int pcc_model_run(const pccrt_context *ctx) {
// CHECK-NEXT:   using namespace pcc_model;
// CHECK-NEXT:   if (ctx->abi_version != PCCRT_ABI_VERSION) return PCCRT_ERR_ABI_MISMATCH;
// CHECK:        float* [[W:c[0-9]+]] = (float*)w[0];
// CHECK-NEXT:   float* [[X:a[0-9]+]] = (float*)in[0];
// CHECK-NEXT:   float* [[T:v[0-9]+]] = (float*)(ws + 0);
// CHECK-NEXT:   float* [[Y:v[0-9]+]] = (float*)out[0];
// CHECK:        [[ADD]]([[T]], [[X]], [[W]]);
// CHECK:        [[RELU]]([[Y]], [[T]]);
// CHECK:        if ((void*)((float*)out[0]) != (void*)[[Y]]) std::memcpy(((float*)out[0]), [[Y]], 24);
// CHECK-NEXT:   return PCCRT_OK;
