// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd fuse-attention=false" --pcc-pipeline-stages=pp=2 | FileCheck %s
// RUN: not pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd fuse-attention=false" --pcc-pipeline-stages="pp=2 split=nowhere" 2>&1 | FileCheck %s --check-prefix=NONODE

// The mesh gains its pipeline axis; the tied embedding / LM head is held
// by both stages (and so is its optimizer).
// CHECK: dist.mesh @mesh(pp = 2)
// CHECK: func.func @main({{.*}}%arg1: tensor<40x16xf32> {dist.stages = array<i64: 0, 1>, {{.*}}graph.state = "wte"}
// CHECK-SAME: dist.num_stages = 2
// The cost model, balancing forward and backward together, cuts the
// forward after attention: the residual stream alone crosses to stage 1.
// (The tied parameter's gradient sum counts on the places of its parts,
// the embedding's and the head's, as each stage sums its own.)
// CHECK: graph.gather %arg1[%arg0] {axis = 0 : i64, dist.stage = 0 : i64}
// CHECK: graph.softmax {{.*}}dist.stage = 0
// CHECK: %[[ATTN:.*]] = graph.matmul %{{.*}}, %arg6 {dist.stage = 0
// CHECK: %[[RES:.*]] = graph.add %{{.*}}, %[[ATTN]] {dist.stage = 0 : i64}
// CHECK: %[[LN:.*]], %{{.*}}, %{{.*}} = graph.layer_norm %[[RES]], {{.*}}dist.stage = 1 : i64
// CHECK: graph.matmul %[[LN]], %arg9 {dist.stage = 1 : i64}
// CHECK: graph.log_softmax {{.*}}dist.stage = 1
// The backward follows its forward ops: the LM head's on stage 1, the
// attention's on stage 0.
// CHECK: graph.exp {{.*}}dist.stage = 1 : i64{{.*}}graph.backward
// CHECK: graph.transpose %{{.*}} {dist.stage = 0 : i64{{.*}}graph.backward
// The tied parameter's gradient parts (LM head on stage 1, embedding on
// stage 0) are summed after the flush, not per microbatch, in stage order.
// CHECK: %[[EMB:.*]] = graph.scatter_add {{.*}}dist.stage = 0 : i64{{.*}}graph.backward
// CHECK: %[[WTE:.*]] = graph.add %[[EMB]], %{{.*}} {dist.grad_sum, graph.backward}
// Optimizer ops run wherever their parameter is held.
// CHECK: graph.sub %arg1, %{{.*}} {dist.stages = array<i64: 0, 1>}
// CHECK: return %{{.*}}, %{{.*}}, %[[WTE]],

// NONODE: error: --pp-split: no forward node named 'nowhere'
