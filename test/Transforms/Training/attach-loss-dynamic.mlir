// pcc-attach-loss needs static shapes and says so itself, at the function.
// RUN: not pcc-opt %s --pcc-attach-loss 2>&1 | FileCheck %s

// CHECK: attach-loss-dynamic.mlir:[[@LINE+2]]:1: error:
// CHECK-NOT: 'graph.slice' op
func.func @dynamic_batch(%ids: tensor<?x4xi64>, %x: tensor<?x4x8xf32>) -> tensor<?x4x8xf32> {
  %z = graph.relu %x : tensor<?x4x8xf32>
  return %z : tensor<?x4x8xf32>
}
