// Vocabulary padding (Megatron's): 509 words at tp 4 become 512 rows of
// the tied table, zeros at the end, recorded with the real extent; the
// lookup is unchanged, the LM head makes padded logits, and the logits are
// cut back to 509 words before they leave.
// RUN: pcc-opt %S/Inputs/gpt-block-509.mlir --pass-pipeline="builtin.module(func.func(pcc-pad-vocabulary{tp=4}))" | FileCheck %s
// CHECK:      func.func @main({{.*}}) -> (tensor<2x8x509xf32> {onnx.name = "logits"})
// CHECK:      graph.weight "wte" {dist.padding = array<i64: 0, 509>, {{.*}} : tensor<512x16xf32>
// CHECK:      graph.gather %{{.*}} : (tensor<512x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
// CHECK:      graph.transpose %{{.*}} : (tensor<512x16xf32>) -> tensor<16x512xf32>
// CHECK-NEXT: graph.matmul %{{.*}} : (tensor<2x8x16xf32>, tensor<16x512xf32>) -> tensor<2x8x512xf32>
// CHECK-NEXT: graph.slice %{{.*}} {sizes = array<i64: 2, 8, 509>, {{.*}}} : (tensor<2x8x512xf32>) -> tensor<2x8x509xf32>
// CHECK-NEXT: return %{{.*}} : tensor<2x8x509xf32>

// A divisible vocabulary is left alone.
// RUN: pcc-opt %S/Inputs/gpt-block-509.mlir --pass-pipeline="builtin.module(func.func(pcc-pad-vocabulary{tp=1}))" | FileCheck %s --check-prefix=NONE
// NONE-NOT: dist.padding

// In a training step the loss's log-softmax reads the lowest float in the
// padding, the logits stay padded (and split) and say so, and the table's
// gradient and moments are padded like it.
// RUN: pcc-opt %S/Inputs/gpt-block-509.mlir --pcc-parallelize="train=true tp=4" | FileCheck %s --check-prefix=TRAIN
// TRAIN:      func.func @main(
// TRAIN-SAME: tensor<128x16xf32> {dist.padding = array<i64: 0, 509>, dist.sharding = #dist.sharding<@mesh, {{\[\[}}"tp"], []]>, graph.init = {{[^}]*}} : tensor<512x16xf32>, graph.state = "wte"}
// TRAIN-SAME: -> (tensor<2x8x128xf32> {dist.padding = array<i64: 2, 509>, dist.sharding = {{[^}]*}}, onnx.name = "logits"}
// TRAIN:      graph.constant dense<{{.*}}> : tensor<1x1x512xi1>
// TRAIN:      dist.all_slice
// TRAIN:      graph.where
// TRAIN:      dist.all_reduce %{{.*}} max : tensor<2x7x1xf32>
