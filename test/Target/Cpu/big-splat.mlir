// RUN: pcc-translate --graph-to-cpp --max-inline-elements=4 %s -o %t.cpp --weights %t.safetensors
// RUN: FileCheck %s < %t.cpp
// RUN: %python -c "import json,struct,sys; b=open(sys.argv[1],'rb').read(); print(sorted(json.loads(b[8:8+struct.unpack('<Q',b[:8])[0]])))" %t.safetensors | FileCheck %s --check-prefix=WEIGHTS

// Anonymous splat constants above the inline limit (autodiff's zero
// tensors) take no room in the weights file: each gets a workspace buffer,
// filled by a loop where the constant is defined. Non-splat large constants
// still go to the weights file; small constants stay inline.

func.func @main(%x: tensor<8xf32> {onnx.name = "x"}, %i: tensor<2x3xi64> {onnx.name = "i"})
    -> (tensor<8xf32> {onnx.name = "y"}, tensor<2x3xi64> {onnx.name = "j"},
        tensor<8xf32> {onnx.name = "zeros"}) {
  %zeros = graph.constant dense<0.0> : tensor<8xf32>
  %ramp = graph.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]> : tensor<8xf32>
  %small = graph.constant dense<2.0> : tensor<4xf32>
  %sevens = graph.constant dense<7> : tensor<2x3xi64>
  %a = graph.add %x, %zeros : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %b = graph.mul %a, %ramp : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %r = graph.reshape %b : tensor<8xf32> to tensor<2x4xf32>
  %c = graph.mul %r, %small : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %y = graph.reshape %c : tensor<2x4xf32> to tensor<8xf32>
  %j = graph.add %i, %sevens : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  return %y, %j, %zeros : tensor<8xf32>, tensor<2x3xi64>, tensor<8xf32>
}

// CHECK:      static const float [[SMALL:c[0-9]+]]_data[] = {0x1p+1f, 0x1p+1f, 0x1p+1f, 0x1p+1f};
// CHECK:      static const pccrt_tensor_info weights[] = {
// CHECK-NEXT:   {"pcc.const.0", 1, 1, pcc_w_shape0, PCCRT_KIND_CONSTANT, 0u, 0, 0, 0, 0ull, 0u, 0u},
// CHECK-NEXT: };
// CHECK:      float* [[RAMP:c[0-9]+]] = (float*)w[0];
// CHECK:      float* [[ZEROS:v[0-9]+]] = (float*)(ws + {{[0-9]+}});
// CHECK:      int64_t* [[SEVENS:v[0-9]+]] = (int64_t*)(ws + {{[0-9]+}});
// CHECK:      // graph.constant
// CHECK-NEXT: std::fill_n([[ZEROS]], 8, float(0x0p+0f));
// CHECK-NEXT: // graph.constant
// CHECK-NEXT: // graph.constant
// CHECK-NEXT: // graph.constant
// CHECK-NEXT: std::fill_n([[SEVENS]], 6, int64_t(7LL));
// CHECK:      pcc_loop{{[0-9]+}}({{.*}}, [[ZEROS]]);
// CHECK:      pcc_loop{{[0-9]+}}({{.*}}, [[RAMP]]);
// CHECK:      pcc_loop{{[0-9]+}}({{.*}}, [[SMALL]]);
// CHECK:      pcc_loop{{[0-9]+}}({{.*}}, [[SEVENS]]);
// The splat returned as an output is copied from its buffer.
// CHECK:      std::memcpy(((float*)out[2]), [[ZEROS]], 32);

// WEIGHTS: ['__metadata__', 'pcc.const.0']
