// RUN: pcc-translate --graph-to-cuda --split-input-file %s | FileCheck %s

// A product whose result is only added to a partial sum computed in place
// in that sum's buffer (a gradient accumulated over microbatches,
// dist.accumulates) adds itself there with beta 1, on a target that runs
// no epilogues too; it takes no buffer of its own and the add no code.

func.func private @grad(%x: tensor<4x8xf32>, %y: tensor<8x16xf32>, %partial: tensor<4x16xf32>)
    -> (tensor<4x16xf32> {dist.accumulates = 2 : i64}) {
  %p = graph.matmul %x, %y : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = graph.add %p, %partial : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

func.func @main(%x: tensor<4x8xf32> {onnx.name = "x"}, %y: tensor<8x16xf32> {onnx.name = "y"})
    -> (tensor<4x16xf32> {onnx.name = "g"}) {
  %first = graph.matmul %x, %y : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = call @grad(%x, %y, %first) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %a : tensor<4x16xf32>
}

// CHECK:      // @grad: 0 bytes of workspace, 0 with its calls
// CHECK:        pcc_cu::gemm<float>(4, 16, 8, float(1), a0 + 0, 8, false, a1 + 0, 16, false, float(1), {{v[0-9]+}} + 0, 16, 1, 0, 0, 0);
// CHECK-NEXT:   }
// CHECK-NEXT:   // graph.add
// CHECK-NEXT:   pcc_cu::copy(((float*)results[0]), {{v[0-9]+}}, 256);

// -----

// A step's state updated as its sum with a product: the product adds
// itself into the state's buffer (a), but not where where an op that may fail
// runs between the two (b: a gather, whose indices are checked): a
// failed step leaves the state as it was.

func.func @main(%x: tensor<4x8xf32> {onnx.name = "x"}, %i: tensor<2xi64> {onnx.name = "i"},
                %sa: tensor<4x16xf32> {graph.state = "sa", graph.init = dense<0.0> : tensor<4x16xf32>},
                %sb: tensor<4x16xf32> {graph.state = "sb", graph.init = dense<0.0> : tensor<4x16xf32>})
    -> (tensor<2x8xf32> {onnx.name = "r"}, tensor<4x16xf32> {graph.update = 2 : i64},
        tensor<4x16xf32> {graph.update = 3 : i64}) {
  %w = graph.weight "w" dense<0.5> : tensor<8x16xf32>
  %pb = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r = graph.gather %x[%i] {axis = 0 : i64} : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
  %b = graph.add %sb, %pb : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %pa = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = graph.add %sa, %pa : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r, %a, %b : tensor<2x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// CHECK:      auto step = [&]() PCC_PROGRAM -> int {
// CHECK:        float* [[SA:a[0-9]+]] = (float*)w[0];
// CHECK:        float* [[PB:v[0-9]+]] = (float*)(ws + {{[0-9]+}});
// CHECK:        float* {{v[0-9]+}} = (float*)[[SA]];
// CHECK-NEXT:   float* [[PA:v[0-9]+]] = (float*)[[SA]];
// CHECK:        pcc_cu::gemm<float>({{.*}}, float(0), [[PB]] + 0, 16, 1, 0, 0, 0);
// CHECK:        pcc_cu::gather(
// CHECK:        PCC_LAUNCH(
// CHECK:        pcc_cu::gemm<float>({{.*}}, float(1), [[PA]] + 0, 16, 1, 0, 0, 0);
// CHECK-NEXT:   }
// CHECK-NEXT:   // graph.add
// CHECK-NEXT:   pcc_cu::copy(((float*)out[0]),
// CHECK-NEXT:   // state update 'sa'
// CHECK-NEXT:   pcc_cu::copy(((float*)w[0]), [[PA]], 256);
