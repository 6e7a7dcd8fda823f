// RUN: pcc-opt %s --pcc-bucket-collectives="bucket-bytes=256" | FileCheck %s
// RUN: pcc-opt %s --pcc-bucket-collectives="bucket-bytes=0" | FileCheck %s --check-prefix=OFF

// Gradients all-reduced over dp join buckets of at most 256 bytes, in the
// order their inputs are ready: %ga (64 B) and %gb (128 B) join; %gc
// (256 B) would overflow the bucket and is one of its own. The bucket's
// all-reduce stands right after its last input (%b) is made. A tp
// all-reduce is left alone, and so is %gd, whose result is read before %e,
// the next input, is made.

dist.mesh @mesh(dp = 2, tp = 2)

func.func @step(%x: tensor<16xf32>, %y: tensor<4x8xf32>, %z: tensor<64xf32>)
    -> (tensor<16xf32>, tensor<4x8xf32>, tensor<64xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %a = graph.mul %x, %x : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %b = graph.mul %y, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = graph.mul %z, %z : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %t = dist.all_reduce %a on @mesh axes ["tp"] sum : tensor<16xf32>
  %d = graph.add %x, %x : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %gd = dist.all_reduce %d on @mesh axes ["dp"] sum : tensor<16xf32>
  %u = graph.neg %gd : tensor<16xf32>
  %e = graph.sub %x, %x : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %ga = dist.all_reduce %a on @mesh axes ["dp"] sum : tensor<16xf32>
  %gb = dist.all_reduce %b on @mesh axes ["dp"] sum : tensor<4x8xf32>
  %gc = dist.all_reduce %c on @mesh axes ["dp"] sum : tensor<64xf32>
  %ge = dist.all_reduce %e on @mesh axes ["dp"] sum : tensor<16xf32>
  return %ga, %gb, %gc, %t, %u, %ge : tensor<16xf32>, tensor<4x8xf32>, tensor<64xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// CHECK-LABEL: func.func @step
// CHECK:         %[[A:.*]] = graph.mul %arg0, %arg0
// CHECK-NEXT:    %[[B:.*]] = graph.mul %arg1, %arg1
// CHECK-NEXT:    %[[FB:.*]] = graph.reshape %[[B]] : tensor<4x8xf32> to tensor<32xf32>
// CHECK-NEXT:    %[[BUCKET:.*]] = graph.concat %[[A]], %[[FB]] {axis = 0 : i64} : (tensor<16xf32>, tensor<32xf32>) -> tensor<48xf32>
// CHECK-NEXT:    %[[SUM:.*]] = dist.all_reduce %[[BUCKET]] on @mesh axes ["dp"] sum : tensor<48xf32>
// CHECK-NEXT:    %[[GA:.*]] = graph.slice %[[SUM]] {sizes = array<i64: 16>, starts = array<i64: 0>, steps = array<i64: 1>}
// CHECK-NEXT:    %[[PB:.*]] = graph.slice %[[SUM]] {sizes = array<i64: 32>, starts = array<i64: 16>, steps = array<i64: 1>}
// CHECK-NEXT:    %[[GB:.*]] = graph.reshape %[[PB]] : tensor<32xf32> to tensor<4x8xf32>
// CHECK-NEXT:    %[[C:.*]] = graph.mul %arg2, %arg2
// CHECK:         dist.all_reduce %{{.*}} on @mesh axes ["tp"]
// CHECK:         %[[GD:.*]] = dist.all_reduce %{{.*}} on @mesh axes ["dp"] sum : tensor<16xf32>
// CHECK:         %[[GC:.*]] = dist.all_reduce %[[C]] on @mesh axes ["dp"] sum : tensor<64xf32>
// CHECK:         %[[GE:.*]] = dist.all_reduce %{{.*}} on @mesh axes ["dp"] sum : tensor<16xf32>
// CHECK:         return %[[GA]], %[[GB]], %[[GC]], %{{.*}}, %{{.*}}, %[[GE]]

// OFF-NOT: graph.concat
