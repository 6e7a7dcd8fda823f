// Every rank's program. A GPT block's forward has exactly two all-reduces
// of the [batch, seq, hidden] activation (after the attention output and
// the MLP's second matmul; the vocabulary-split embedding adds one before
// the block), no all-gather of a weight, and only the logits are gathered,
// once, at the end. Split weights are read through their all_slice, and
// reshapes take local extents (2 of the 4 heads).
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-shard-strategy=tp=2 --pcc-propagate-sharding --pcc-partition | FileCheck %s
// CHECK:      dist.mesh @mesh(tp = 2)
// CHECK:      graph.weight "wte"
// CHECK-NEXT: dist.all_slice %{{.*}} on @mesh axes ["tp"] dim 0 groups 1 : tensor<40x16xf32> -> tensor<20x16xf32>
// CHECK:      graph.weight "attn.qkv.weight"
// CHECK-NEXT: dist.all_slice %{{.*}} on @mesh axes ["tp"] dim 1 groups 3 : tensor<16x48xf32> -> tensor<16x24xf32>
// CHECK-NOT:  dist.all_gather
// CHECK:      dist.axis_index
// CHECK-NOT:  dist.all_gather
// CHECK:      dist.all_reduce %{{.*}} on @mesh axes ["tp"] sum : tensor<2x8x16xf32>
// CHECK-NOT:  dist.all_gather
// CHECK:      graph.split %{{.*}} : (tensor<2x8x24xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
// CHECK:      graph.reshape %{{.*}} : tensor<2x8x8xf32> to tensor<2x8x2x4xf32>
// CHECK-NOT:  dist.all_gather
// CHECK:      graph.reshape %{{.*}} : tensor<2x8x2x4xf32> to tensor<2x8x8xf32>
// CHECK-NEXT: graph.matmul %{{.*}} : (tensor<2x8x8xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
// The residual stream still holds the embedding's partial sums here: the
// sum of two partial sums is reduced once.
// CHECK-NEXT: graph.add
// CHECK-NEXT: dist.all_reduce %{{.*}} on @mesh axes ["tp"] sum : tensor<2x8x16xf32>
// CHECK-NOT:  dist.all_gather
// CHECK:      dist.all_reduce %{{.*}} on @mesh axes ["tp"] sum : tensor<2x8x16xf32>
// CHECK-NOT:  dist.all_reduce
// CHECK:      dist.all_gather %{{.*}} on @mesh axes ["tp"] dim 0 : tensor<20x2x8xf32> -> tensor<40x2x8xf32>
// CHECK-NOT:  dist.
// CHECK:      return %{{.*}} : tensor<2x8x40xf32>

// The vocabulary-parallel cross-entropy of a training step: the maximum and
// the sum of exponentials are all-reduced, the label's log-probability is
// picked from the rank's block (masked) and summed; no value of the step
// has the whole vocabulary, [2, 7, 40] or [2, 8, 40].
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="train=true tp=2" | FileCheck %s --check-prefix=LOSS
// LOSS:     func.func @main
// LOSS-NOT: tensor<2x{{[78]}}x40xf32>
// LOSS:     dist.all_reduce %{{.*}} on @mesh axes ["tp"] max : tensor<2x7x1xf32>
// LOSS-NOT: tensor<2x{{[78]}}x40xf32>
// LOSS:     dist.all_reduce %{{.*}} on @mesh axes ["tp"] sum : tensor<2x7x1xf32>
// LOSS-NOT: tensor<2x{{[78]}}x40xf32>
// LOSS:     graph.gather_elements %{{.*}} : (tensor<2x7x20xf32>, tensor<2x7x1xi64>) -> tensor<2x7x1xf32>
// LOSS-NOT: tensor<2x{{[78]}}x40xf32>
// LOSS:     graph.scatter_elements_add %{{.*}} -> tensor<2x7x20xf32>
// LOSS-NOT: tensor<2x{{[78]}}x40xf32>
// LOSS:     return

// --sequence-parallel (Megatron's): between the tensor-parallel regions the
// activation is split along the sequence (the norms run on 4 of the 8
// tokens); a reduce-scatter replaces the all-reduce after the embedding and
// after the attention output, and an all-gather brings the tokens back
// before each column-parallel matmul. (The residual stream's partial sums
// stay partial through the adds; the last is reduced once for the head.)
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="tp=2 sequence-parallel=true" | FileCheck %s --check-prefix=SP
// SP:      dist.reduce_scatter %{{.*}} dim 0 sum : tensor<8x2x16xf32> -> tensor<4x2x16xf32>
// SP-NOT:  dist.all_reduce
// SP:      graph.layer_norm %{{.*}} : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>)
// SP-NEXT: graph.transpose
// SP-NEXT: dist.all_gather %{{.*}} dim 0 : tensor<4x2x16xf32> -> tensor<8x2x16xf32>
// SP-NOT:  dist.all_reduce
// SP:      graph.matmul %{{.*}} : (tensor<2x8x8xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
// SP-NOT:  dist.all_reduce
// SP:      dist.reduce_scatter %{{.*}} dim 0 sum : tensor<8x2x16xf32> -> tensor<4x2x16xf32>
// SP-NOT:  dist.all_reduce
// SP:      graph.layer_norm %{{.*}} : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>)
// SP-NEXT: graph.transpose
// SP-NEXT: dist.all_gather %{{.*}} dim 0 : tensor<4x2x16xf32> -> tensor<8x2x16xf32>
