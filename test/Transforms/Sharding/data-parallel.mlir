// Data parallelism is one more mesh axis: pcc-data-parallel adds `dp`
// (outermost) and states the batch split of the inputs; propagation and
// partitioning over `dp` then make each replica's step. Parameters stay
// whole, so every weight gradient is a partial sum, all-reduced over `dp`
// where it is final; the loss (a mean) is combined as a mean; the
// backward's whole constant is cut to the replica's block; nothing is
// gathered. (Without buckets here: one all-reduce per gradient.)
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd dp=2 bucket-bytes=0" | FileCheck %s
// CHECK:      dist.mesh @mesh(dp = 2)
// CHECK:      func.func @main(%arg0: tensor<1x8xi64> {dist.sharding = #dist.sharding<@mesh, {{\[\["dp"\], \[\]\]}}>, graph.index_bound = 40 : i64, graph.index_node = "graph.gather", onnx.name = "input_ids"}, %arg1: tensor<40x16xf32> {graph.init
// CHECK-NOT:  dist.all_gather
// CHECK:      graph.reduce_mean %{{.*}} -> tensor<f32>
// CHECK-NEXT: dist.all_reduce %{{.*}} on @mesh axes ["dp"] mean : tensor<f32>
// CHECK:      dist.all_slice %{{.*}} on @mesh axes ["dp"] dim 0 groups 1 {graph.backward} : tensor<2x7x1xf32> -> tensor<1x7x1xf32>
// CHECK-COUNT-11: dist.all_reduce %{{.*}} on @mesh axes ["dp"] sum
// CHECK-NOT:  dist.all_gather
// CHECK-NOT:  dist.all_reduce

// With tensor parallelism, tp is laid out first and dp splits the batch of
// each tp rank's program (the mesh is dp x tp, tp ranks adjacent): the
// gradients reduced over `dp` are the tp ranks' blocks, and the one
// all-gather is the logits' vocabulary over tp (inside a tp group; the
// runtime cannot hold a tensor split along two dimensions), so that they
// stay split along the batch over dp rather than gathered between replicas.
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd dp=2 tp=2 bucket-bytes=0" | FileCheck %s --check-prefix=TP
// TP:      dist.mesh @mesh(dp = 2, tp = 2)
// TP:      func.func @main(%arg0: tensor<1x8xi64> {dist.sharding = #dist.sharding<@mesh, {{\[\["dp"\], \[\]\]}}>, graph.index_bound = 40 : i64, graph.index_node = "graph.gather", onnx.name = "input_ids"}, %arg1: tensor<20x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\["tp"\], \[\]\]}}>
// TP-NOT:  dist.all_gather
// TP:      dist.all_reduce %{{.*}} on @mesh axes ["dp"] mean : tensor<f32>
// TP-NOT:  dist.all_gather
// TP:      dist.all_reduce %{{.*}} on @mesh axes ["dp"] sum : tensor<20x16xf32>
// TP-NOT:  dist.all_gather
// TP:      dist.all_reduce %{{.*}} on @mesh axes ["dp"] sum : tensor<16x24xf32>
// TP-NOT:  dist.all_gather
// TP:      dist.all_gather %{{.*}} on @mesh axes ["tp"] dim 0 : tensor<20x1x8xf32> -> tensor<40x1x8xf32>
// TP-NOT:  dist.all_gather
// TP:      return {{.*}} : tensor<1x8x40xf32>, tensor<f32>

// ZeRO with tensor parallelism: a parameter's state splits the tp rank's
// block over dp (the dimension's axes nest tp, then dp), so the gradient
// is reduce-scattered and the update all-gathered within the tp block.
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="train=true dp=2 tp=2 zero=2 bucket-bytes=0" | FileCheck %s --check-prefix=ZEROTP
// ZEROTP:      tensor<10x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\["tp", "dp"\], \[\]\]}}>, graph.init = dense<0.000000e+00> : tensor<40x16xf32>, graph.state = "wte.adamw.m"
// ZEROTP:      dist.reduce_scatter %{{.*}} on @mesh axes ["dp"] dim 0 sum : tensor<20x16xf32> -> tensor<10x16xf32>
// ZEROTP:      dist.all_gather %{{.*}} on @mesh axes ["dp"] dim 0 : tensor<10x16xf32> -> tensor<20x16xf32>

// By default the gradients (3888 floats) go in one bucket: one all-reduce.
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd dp=2" | FileCheck %s --check-prefix=BUCKET
// BUCKET:     dist.all_reduce %{{.*}} on @mesh axes ["dp"] mean : tensor<f32>
// BUCKET:     graph.concat
// BUCKET:     dist.all_reduce %{{.*}} on @mesh axes ["dp"] sum : tensor<3888xf32>
// BUCKET-NOT: dist.all_reduce

// ZeRO 2: a parameter's AdamW moments are split over dp along its first
// dimension dp divides, the gradient is reduce-scattered onto that block
// (and returned split), and the updated block is all-gathered back into
// the whole parameter.
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="train=true dp=2 zero=2 bucket-bytes=0" | FileCheck %s --check-prefix=ZERO
// ZERO:      %arg{{[0-9]+}}: tensor<20x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\["dp"\], \[\]\]}}>, graph.init = dense<0.000000e+00> : tensor<40x16xf32>, graph.state = "wte.adamw.m", graph.state_of = 1 : i64}
// ZERO-SAME: -> ({{.*}}tensor<20x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\["dp"\], \[\]\]}}>, graph.grad = 1 : i64}
// ZERO-NOT:  dist.all_reduce %{{.*}} sum : tensor<40x16xf32>
// ZERO:      dist.reduce_scatter %{{.*}} on @mesh axes ["dp"] dim 0 sum : tensor<40x16xf32> -> tensor<20x16xf32>
// ZERO:      dist.all_gather %{{.*}} on @mesh axes ["dp"] dim 0 : tensor<20x16xf32> -> tensor<40x16xf32>

// ZeRO 3: the parameters are held split over dp too. The forward gathers
// each where it reads it, the backward gathers it again (its reads of
// values computed from parameters alone are its own), the gradient is
// reduce-scattered, and the update works on the block: nothing is
// gathered after it.
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="train=true dp=2 zero=3 bucket-bytes=0" | FileCheck %s --check-prefix=ZERO3
// ZERO3:      %arg1: tensor<20x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\["dp"\], \[\]\]}}>, graph.init = dense<0.00999999977> : tensor<40x16xf32>, graph.state = "wte"}
// ZERO3:      dist.all_gather %arg1 on @mesh axes ["dp"] dim 0 : tensor<20x16xf32> -> tensor<40x16xf32>
// ZERO3:      dist.all_gather %arg1 on @mesh axes ["dp"] dim 0 {graph.backward} : tensor<20x16xf32> -> tensor<40x16xf32>
// ZERO3:      dist.reduce_scatter %{{.*}} on @mesh axes ["dp"] dim 0 sum : tensor<40x16xf32> -> tensor<20x16xf32>
// ZERO3-NOT:  dist.all_gather
// ZERO3:      return

// A batch that dp does not divide.
// RUN: not pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="train=true dp=4" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// DIVIDE: error: --dp 4 does not divide the batch (2) of input 'input_ids'

// With pipeline stages the mesh is dp x pp. A stage's backward returns its
// gradients unreduced, marked `dist.reduce_axes`, and each rank's step
// all-reduces them once, after the last microbatch's backward, rather than
// every microbatch's part; the loss's mean stays in the forward.
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd dp=2 pp=2 microbatches=1 bucket-bytes=0" | FileCheck %s --check-prefix=PP
// PP:      dist.mesh @mesh(dp = 2, pp = 2)
// PP-LABEL: func.func private @main_stage0_backward
// PP-SAME: {dist.grad = 2 : i64, dist.reduce_axes = ["dp"]}
// PP-NOT:  dist.all_reduce
// PP-LABEL: func.func private @main_stage1_backward
// PP-NOT:  dist.all_reduce
// PP-LABEL: func.func @main_rank0
// PP:      call @main_stage0_backward
// PP-NEXT: dist.all_reduce %{{.*}} on @mesh axes ["dp"] sum : tensor<40x16xf32>
// PP-LABEL: func.func @main_rank1

// A replica's share of the batch must split into the microbatches.
// RUN: not pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="train=true dp=2 pp=2" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=MICRO
// MICRO: error: --dp 2 x 2 microbatches does not divide the batch (2) of input 'input_ids'
