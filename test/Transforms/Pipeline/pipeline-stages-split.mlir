// RUN: pcc-opt %s --pcc-pipeline-stages="pp=3 split=fc1,fc2" --mlir-print-debuginfo --mlir-print-local-scope | FileCheck %s
// RUN: not pcc-opt %s --pcc-pipeline-stages="pp=3 split=fc2,fc1" 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not pcc-opt %s --pcc-pipeline-stages="pp=2 split=fc1,fc2" 2>&1 | FileCheck %s --check-prefix=COUNT

// Manual cuts after named ONNX nodes; weights are free (each stage reads
// its own), so they get no stage.
// CHECK: dist.mesh @mesh(pp = 3)
// CHECK: graph.weight "w1"
// CHECK-NOT: dist.stage
// CHECK: graph.matmul {{.*}}dist.stage = 0 {{.*}}loc("fc1")
// CHECK: graph.relu {{.*}}dist.stage = 1 {{.*}}loc("act")
// CHECK: graph.matmul {{.*}}dist.stage = 1 {{.*}}loc("fc2")
// CHECK: graph.matmul {{.*}}dist.stage = 2 {{.*}}loc("fc3")

// ORDER: error: --pp-split: the cut after 'fc1' leaves a stage without ops; name the nodes in program order
// COUNT: error: --pp-split names 2 node(s); 2 stages need 1
func.func @main(%x: tensor<4x8xf32> {onnx.name = "x"}) -> (tensor<4x8xf32> {onnx.name = "y"}) {
  %w1 = graph.weight "w1" dense<0.1> : tensor<8x8xf32>
  %w2 = graph.weight "w2" dense<0.2> : tensor<8x8xf32>
  %w3 = graph.weight "w3" dense<0.3> : tensor<8x8xf32>
  %h1 = graph.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("fc1")
  %a1 = graph.relu %h1 : tensor<4x8xf32> loc("act")
  %h2 = graph.matmul %a1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("fc2")
  %h3 = graph.matmul %h2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("fc3")
  return %h3 : tensor<4x8xf32>
}
