// RUN: pcc-translate --graph-to-cpp --split-input-file --verify-diagnostics %s | FileCheck %s

// A program of two entry points (pcc.entry) that share a weight and a
// cache: each gets its own inputs and outputs tables and run function
// (entry point 0 is pcc_model_run), the weights table is one, and the cache
// (graph.cache) is a STATE weight flagged PCCRT_FLAG_CACHE. The workspace
// is the most either needs.

func.func @small(%x: tensor<2xf32> {onnx.name = "x"},
                 %c: tensor<4xf32> {graph.state = "c", graph.cache, graph.init = dense<0.0> : tensor<4xf32>})
    -> (tensor<2xf32> {onnx.name = "y"}, tensor<4xf32> {graph.update = 1 : i64}) attributes {pcc.entry = "small"} {
  %w = graph.weight "w" dense<[1.0, 2.0]> : tensor<2xf32>
  %y = graph.add %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %c1 = graph.exp %c : tensor<4xf32>
  return %y, %c1 : tensor<2xf32>, tensor<4xf32>
}

func.func @large(%x: tensor<2x2xf32> {onnx.name = "x"},
                 %c: tensor<4xf32> {graph.state = "c", graph.cache, graph.init = dense<0.0> : tensor<4xf32>})
    -> (tensor<2x2xf32> {onnx.name = "z"}, tensor<4xf32> {graph.update = 1 : i64}) attributes {pcc.entry = "large"} {
  %w = graph.weight "w" dense<[1.0, 2.0]> : tensor<2xf32>
  %m = graph.mul %x, %w : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %y = graph.add %m, %w : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %c1 = graph.neg %c : tensor<4xf32>
  return %y, %c1 : tensor<2x2xf32>, tensor<4xf32>
}

// CHECK:      static const pccrt_tensor_info inputs[] = {
// CHECK-NEXT:   {"x", 1, 1, pcc_in_shape0, PCCRT_KIND_INPUT,
// CHECK:      static const pccrt_tensor_info outputs[] = {
// CHECK-NEXT:   {"y", 1, 1, pcc_out_shape0, PCCRT_KIND_OUTPUT,
// CHECK:      static const pccrt_tensor_info inputs_1[] = {
// CHECK-NEXT:   {"x", 1, 2, pcc_in_1_shape0, PCCRT_KIND_INPUT,
// CHECK:      static const pccrt_tensor_info outputs_1[] = {
// CHECK-NEXT:   {"z", 1, 2, pcc_out_1_shape0, PCCRT_KIND_OUTPUT,
// CHECK:      static const pccrt_tensor_info weights[] = {
// CHECK-NEXT:   {"c", 1, 1, pcc_w_shape0, PCCRT_KIND_STATE, 0u, 0, 0, 0, 0ull, PCCRT_FLAG_CACHE, 0u},
// CHECK-NEXT:   {"w", 1, 1, pcc_w_shape1, PCCRT_KIND_CONSTANT,
// CHECK-NEXT: };
// CHECK:      // Entry point 'large'.
// CHECK-NEXT: PCC_PROGRAM static int run_1(const pccrt_context *ctx) {
// CHECK:      static const pccrt_entry_info entries[] = {
// CHECK-NEXT:   {"small", 1, inputs, 1, outputs, [[S:[0-9]+]]ULL, &::pcc_model_run},
// CHECK-NEXT:   {"large", 1, inputs_1, 1, outputs_1, [[L:[0-9]+]]ULL, &run_1},
// CHECK:      static const pccrt_model_info info = {PCCRT_ABI_VERSION, 1, inputs, 1, outputs, 2, weights, [[L]]ULL, {{.*}}, 2, entries, nullptr};
// CHECK:      extern "C" PCC_PROGRAM int pcc_model_run(const pccrt_context *ctx) {

// -----

// expected-error @+1 {{pcc.entry must name the entry point, got 3 : i64}}
func.func @bad(%x: tensor<2xf32>) -> tensor<2xf32> attributes {pcc.entry = 3} {
  return %x : tensor<2xf32>
}
