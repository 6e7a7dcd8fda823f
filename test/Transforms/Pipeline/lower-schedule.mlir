// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd pp=2 microbatches=2 schedule=1f1b fuse-attention=false" | FileCheck %s
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="pp=2 microbatches=2 schedule=gpipe fuse-attention=false" | FileCheck %s --check-prefix=INFER
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd pp=2 microbatches=2 schedule=zb-h1 fuse-attention=false" | FileCheck %s --check-prefix=ZB
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd pp=2 microbatches=2 schedule=2bw fuse-attention=false" | FileCheck %s --check-prefix=TWOBW
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd pp=2 microbatches=2 schedule=1f1b fuse-attention=false dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd pp=2 microbatches=2 schedule=2bw fuse-attention=false dtype=bf16" | FileCheck %s --check-prefix=BF16-2BW

// Under --dtype bf16 a weight's bf16 copy is the step's (dist.invariant),
// made once before the first call that reads it, not by every microbatch's
// forward and backward.
// BF16: func.func private @main_stage0_forward({{.*}}%arg4: tensor<16x48xbf16> {dist.invariant = [[QKV:[0-9]+]] : i64}
// BF16-NOT: graph.cast %arg4
// BF16: func.func private @main_stage0_backward({{.*}}tensor<16x48xbf16> {dist.invariant = [[QKV]] : i64}
// BF16-LABEL: func.func @main_rank0(
// BF16: %[[W:.*]] = graph.cast %arg4 : tensor<16x48xf32> to tensor<16x48xbf16>
// BF16: call @main_stage0_forward({{.*}}%[[W]]{{.*}}) {dist.action = "F0"}
// BF16-NOT: graph.cast
// BF16: call @main_stage0_forward({{.*}}%[[W]]{{.*}}) {dist.action = "F1"}
// BF16-NOT: graph.cast
// BF16: call @main_stage0_backward({{.*}}%[[W]]{{.*}}) {dist.action = "B0"}
// BF16-NOT: graph.cast
// BF16: call @main_stage0_backward_accumulate({{.*}}%[[W]]{{.*}}) {dist.action = "B1"}
// BF16-LABEL: func.func @main_rank1(

// Under 2BW the step's microbatches read the weights one update old and
// the next step's forwards the newest: each version has its copy.
// BF16-2BW-LABEL: func.func @main_overlap_rank0(
// BF16-2BW: %[[OLD:.*]] = graph.cast %arg12 : tensor<16x48xf32> to tensor<16x48xbf16>
// BF16-2BW: call @main_stage0_forward({{.*}}%[[OLD]]{{.*}}) {dist.action = "F1"}
// BF16-2BW: call @main_stage0_backward({{.*}}%[[OLD]]{{.*}}) {dist.action = "B0"}
// BF16-2BW: %[[NEW:.*]] = graph.cast %arg4 : tensor<16x48xf32> to tensor<16x48xbf16>
// BF16-2BW: call @main_stage0_forward({{.*}}%[[NEW]]{{.*}}) {dist.action = "F0+"}
// BF16-2BW: call @main_stage0_backward_accumulate({{.*}}%[[OLD]]{{.*}}) {dist.action = "B1"}

// Outlined stages: each argument and result says what it is.
// CHECK: func.func private @main_stage0_forward(%arg0: tensor<40x16xf32> {dist.state = 1 : i64}, %arg1: tensor<1x8xi64> {dist.input = 0 : i64}
// CHECK: func.func private @main_stage1_forward({{.*}}{dist.value = {{[0-9]+}} : i64}
// CHECK-SAME: tensor<1x8x40xf32> {dist.output = 0 : i64}, tensor<f32> {dist.output = 1 : i64}
// CHECK: func.func private @main_stage0_backward(
// CHECK-SAME: tensor<40x16xf32> {dist.grad = 2 : i64}
// Each backward that returns gradients has a variant that adds them to
// what the microbatches before accumulated: one argument per gradient
// after its own, the sum made where the gradient is (the embedding's
// scatter, the layers' products), not by the caller.
// CHECK: func.func private @main_stage0_backward_accumulate(
// CHECK-SAME: %[[EMB:arg[0-9]+]]: tensor<40x16xf32>, %{{arg[0-9]+}}: tensor<16xf32>, %{{arg[0-9]+}}: tensor<16xf32>, %{{arg[0-9]+}}: tensor<16x48xf32>, %{{arg[0-9]+}}: tensor<48xf32>, %{{arg[0-9]+}}: tensor<16x16xf32>) -> (tensor<40x16xf32> {dist.accumulates = 14 : i64, dist.grad = 2 : i64}
// CHECK-NOT: dist.stage
// CHECK: %[[SCATTER:.*]] = graph.scatter_add
// CHECK-NEXT: %[[ACC:.*]] = graph.add %[[EMB]], %[[SCATTER]] {graph.backward}
// CHECK: return %[[ACC]],
// CHECK: func.func private @main_stage1_backward(
// CHECK-SAME: tensor<40x16xf32> {dist.grad = 2 : i64}
// The optimizer reads the gradients' sums over the microbatches and
// averages them first (pcc-fuse folds the division into the update). The
// tied embedding's gradient comes in its ranks' parts, the rank's own an
// argument with its role, the other's one more at the end, and the
// optimizer adds them in rank order before anything reads the gradient
// (pcc-fuse folds the sum into the update too).
// CHECK: func.func private @main_rank0_optimizer(%arg0: tensor<40x16xf32> {dist.grad = 2 : i64}, %arg1: tensor<f32> {dist.state = 12 : i64}, %arg2: tensor<40x16xf32> {dist.state = 1 : i64}
// CHECK-SAME: %[[OTHERPART:arg[0-9]+]]: tensor<40x16xf32>)
// CHECK-NEXT: %[[WHOLE:.*]] = graph.add %arg0, %[[OTHERPART]]
// CHECK-NEXT: %[[TWO:.*]] = graph.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: graph.div %[[WHOLE]], %[[TWO]] : (tensor<40x16xf32>, tensor<f32>)
// CHECK: func.func private @main_rank1_optimizer(%arg0: tensor<40x16xf32> {dist.grad = 2 : i64}, %arg1: tensor<f32> {dist.state = 12 : i64}, %arg2: tensor<40x16xf32> {dist.state = 1 : i64}

// Rank 0 (1F1B with 2 ranks: one warm-up forward): its microbatch slices,
// activations out, gradients in, then the tied embedding's gradient parts
// exchanged once after the flush, its optimizer, and the gradients the
// step returns averaged apart.
// CHECK-LABEL: func.func @main_rank0(%arg0: tensor<2x8xi64> {graph.index_bound = 40 : i64, graph.index_node = "graph.gather", onnx.name = "input_ids"}
// CHECK-SAME: dist.rank = 0
// CHECK: %[[MB0:.*]] = graph.slice %arg0 {sizes = array<i64: 1, 8>, starts = array<i64: 0, 0>
// CHECK: %[[F0:.*]]:{{[0-9]+}} = call @main_stage0_forward(%arg1, %[[MB0]], {{.*}}dist.action = "F0"
// One tensor crosses the cut, which the cost model puts after attention's
// residual add: the residual stream.
// CHECK: dist.send %[[F0]]#{{[0-9]+}} on @mesh axes ["pp"] to 1 tag 0 : tensor<1x8x16xf32>
// CHECK-NEXT: graph.slice %arg0
// CHECK: call @main_stage0_forward({{.*}}dist.action = "F1"
// CHECK: dist.recv on @mesh axes ["pp"] from 1 tag 1 : tensor<1x8x16xf32>
// The sends complete where the schedule's simulation has their receives
// done: the activations are free before the backward.
// CHECK: dist.wait_send %[[F0]]#{{[0-9]+}} on @mesh axes ["pp"] to 1 tag 0
// The second microbatch's backward adds to the first's gradients.
// CHECK: %[[B0:.*]]:6 = call @main_stage0_backward({{.*}}dist.action = "B0"
// CHECK: dist.recv on @mesh axes ["pp"] from 1 tag 1 : tensor<1x8x16xf32>
// CHECK: %[[B1:.*]]:6 = call @main_stage0_backward_accumulate({{.*}}, %[[B0]]#0, %[[B0]]#1, %[[B0]]#2, %[[B0]]#3, %[[B0]]#4, %[[B0]]#5) {dist.action = "B1"
// CHECK-NOT: graph.add %[[B0]]
// CHECK: dist.send %[[B1]]#0 on @mesh axes ["pp"] to 1 tag 2 : tensor<40x16xf32>
// CHECK: %[[PART:.*]] = dist.recv on @mesh axes ["pp"] from 1 tag 2 : tensor<40x16xf32>
// CHECK-NOT: graph.add
// CHECK-NOT: graph.div
// CHECK: %[[UPDATES:.*]]:6 = call @main_rank0_optimizer(%[[OWN:[0-9]+#0]], %{{[a-z0-9]+}}, %arg1, {{.*}}, %[[PART]]) {dist.action = "O"
// The step adds the parts itself only for the gradient it returns.
// CHECK: %[[SUM:.*]] = graph.add %[[OWN]], %[[PART]]
// CHECK: %[[AVG:.*]] = graph.div %[[SUM]], %{{.*}} : (tensor<40x16xf32>, tensor<f32>)
// CHECK: return %[[AVG]], {{.*}}, %[[UPDATES]]#0

// Rank 1 ends the forward: the loss is the microbatches' mean, the logits
// their concatenation; its copy of the tied embedding sums the parts in
// the same (rank) order.
// CHECK-LABEL: func.func @main_rank1(
// CHECK: dist.recv on @mesh axes ["pp"] from 0 tag 0 : tensor<1x8x16xf32>
// CHECK: call @main_stage1_forward({{.*}}dist.action = "F0"
// CHECK: call @main_stage1_backward({{.*}}dist.action = "B0"
// CHECK: dist.send %{{.*}} on @mesh axes ["pp"] to 0 tag 1
// CHECK: dist.send %{{.*}} on @mesh axes ["pp"] to 0 tag 2 : tensor<40x16xf32>
// CHECK: %[[OTHER:.*]] = dist.recv on @mesh axes ["pp"] from 0 tag 2 : tensor<40x16xf32>
// CHECK: call @main_rank1_optimizer(%[[OTHER]], {{.*}}, %[[MINE:[0-9]+#[0-9]+]]) {dist.action = "O"
// CHECK: graph.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<1x8x40xf32>, tensor<1x8x40xf32>) -> tensor<2x8x40xf32>
// CHECK: graph.add %[[OTHER]], %[[MINE]] : (tensor<40x16xf32>, tensor<40x16xf32>)
// CHECK: return {{.*}} : tensor<2x8x40xf32>, tensor<f32>,
// CHECK: dist.schedule @schedule {base_bytes = {{.*}}, bubble_fraction = {{.*}}, costs = {{.*}}, kind = "1f1b"

// Inference: forwards only; GPipe's order on rank 1.
// INFER-LABEL: func.func @main_rank1(
// INFER: call @main_stage1_forward({{.*}}"F0"
// INFER: call @main_stage1_forward({{.*}}"F1"
// INFER: graph.concat
// INFER-NOT: backward

// ZB-H1: each stage's weight gradient is a function of its own, run by the
// W actions after the input gradient (B) has been sent on.
// ZB: func.func private @main_stage1_weight(
// ZB-LABEL: func.func @main_rank1(
// ZB: %[[B:.*]]:{{[0-9]+}} = call @main_stage1_backward({{.*}}dist.action = "B0"
// ZB-NEXT: dist.send %[[B]]#{{[0-9]+}} on @mesh axes ["pp"] to 0 tag 1
// ZB-NEXT: call @main_stage1_weight({{.*}}%[[B]]#{{.*}}dist.action = "W0"
// ZB: dist.schedule @schedule {{.*}}kind = "zb-h1"

// 2bw: four functions per rank. The step with a flush (its fill, then its
// drain), then the calls of a run without one, each an entry point: the
// start (rank 0's F0, which leaves its stash and the batch in flight), the
// overlap (F1 of the step on the weights one update old, F0+ of the next
// step on the newest weights, which it takes the batch of) and the finish.
// TWOBW-LABEL: func.func @main_rank0(
// TWOBW-LABEL: func.func @main_start_rank0(
// TWOBW-SAME:    graph.cache
// TWOBW-SAME:    graph.state = "main.in_flight.rank0.input0"
// TWOBW-SAME:    pcc.entry = "main_start"
// TWOBW:         call @main_stage0_forward(%arg7, {{.*}}dist.action = "F0"
// TWOBW-LABEL: func.func @main_overlap_rank0(
// TWOBW-SAME:    pcc.entry = "main_overlap"
// TWOBW:         call @main_stage0_forward(%arg7, {{.*}}dist.action = "F1"
// TWOBW:         call @main_stage0_backward({{.*}}dist.action = "B0"
// TWOBW:         call @main_stage0_forward(%arg1, {{.*}}dist.action = "F0+"
// TWOBW:         call @main_stage0_backward_accumulate({{.*}}dist.action = "B1"
// TWOBW:         dist.action = "O"
// TWOBW-LABEL: func.func @main_finish_rank0(
// TWOBW-SAME:    pcc.entry = "main_finish"
// TWOBW-LABEL: func.func @main_rank1(
// TWOBW-LABEL: func.func @main_start_rank1(
// TWOBW-LABEL: func.func @main_overlap_rank1(
// TWOBW-LABEL: func.func @main_finish_rank1(
