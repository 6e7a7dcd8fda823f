// Gradient clipping with pipelining: each pipeline rank's optimizer sums
// the squares of the gradients it holds and all-reduces the sum over `pp`
// before the norm. The tied embedding `wte` (grad 2) is held, and updated,
// on both ranks, but its square counts once, on rank 0: rank 0 sums six
// squares, rank 1 five (and no square of grad 2).
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd pp=2 microbatches=2 clip-grad=0.5 fuse-attention=false" | FileCheck %s
// CHECK-LABEL: func.func private @main_rank0_optimizer(%arg0: tensor<40x16xf32> {dist.grad = 2 : i64}
// CHECK-COUNT-6: graph.reduce_sum
// CHECK-NOT:     graph.reduce_sum
// CHECK:         %[[SUM0:.*]] = dist.all_reduce %{{.*}} on @mesh axes ["pp"] sum : tensor<f32>
// CHECK-NEXT:    graph.sqrt %[[SUM0]]
// CHECK-LABEL: func.func private @main_rank1_optimizer(
// CHECK-SAME:    %[[WTE:arg[0-9]+]]: tensor<40x16xf32> {dist.grad = 2 : i64}
// CHECK-NOT:     graph.mul %[[WTE]], %[[WTE]]
// CHECK-COUNT-5: graph.reduce_sum
// CHECK-NOT:     graph.reduce_sum
// CHECK:         %[[SUM1:.*]] = dist.all_reduce %{{.*}} on @mesh axes ["pp"] sum : tensor<f32>
// CHECK-NEXT:    graph.sqrt %[[SUM1]]
