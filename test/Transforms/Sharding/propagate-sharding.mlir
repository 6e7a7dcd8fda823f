// Layouts of every value from the parameters' (here the strategy's): the
// vocabulary-split lookup leaves partial sums, the layer norm reads them
// combined, the fused QKV projection is split in three groups and each of
// Q, K and V comes out split plainly, heads follow through the reshapes.
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-shard-strategy=tp=2 --pcc-propagate-sharding | FileCheck %s
// CHECK:      graph.gather
// CHECK-SAME:   dist.results = [#dist.sharding<@mesh, {{\[\[}}], [], []], partial = ["tp"] sum>]
// CHECK:      graph.layer_norm
// CHECK-SAME:   dist.operands = [#dist.sharding<@mesh, {{\[\[}}], [], []]>
// CHECK:      graph.matmul
// CHECK-SAME:   #dist.sharding<@mesh, {{\[\[}}], ["tp"]] groups [1, 3]>
// CHECK-SAME:   dist.results = [#dist.sharding<@mesh, {{\[\[}}], [], ["tp"]] groups [1, 1, 3]>]
// CHECK:      graph.split
// CHECK-SAME:   dist.results = [#dist.sharding<@mesh, {{\[\[}}], [], ["tp"]]>, #dist.sharding<@mesh, {{\[\[}}], [], ["tp"]]>, #dist.sharding<@mesh, {{\[\[}}], [], ["tp"]]>]
// CHECK:      graph.reshape
// CHECK-SAME:   dist.results = [#dist.sharding<@mesh, {{\[\[}}], [], ["tp"], []]>]
// The attention output projection (rows) leaves partial sums.
// CHECK:      graph.matmul %{{.*}}, %{{.*}} {dist.operands = [#dist.sharding<@mesh, {{\[\[}}], [], ["tp"]]>, #dist.sharding<@mesh, {{\[\[}}"tp"], []]>]
// CHECK-SAME:   dist.results = [#dist.sharding<@mesh, {{\[\[}}], [], []], partial = ["tp"] sum>]
// The logits leave an inference build whole.
// CHECK:      return
// CHECK-SAME:   dist.operands = [#dist.sharding<@mesh, {{\[\[}}], [], []]>]

// A training step: the gradient, update and optimizer state of a split
// parameter have its layout (no optimizer state of it is whole).
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-parallelize="train=true tp=2" | FileCheck %s --check-prefix=TRAIN
// TRAIN:      func.func @main
// TRAIN-SAME: %arg1: tensor<20x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}"tp"], []]>, graph.init = {{[^}]*}} : tensor<40x16xf32>, graph.state = "wte"}
// TRAIN-SAME: tensor<20x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}"tp"], []]>, graph.init = {{[^}]*}} : tensor<40x16xf32>, graph.state = "wte.adamw.m", graph.state_of = 1 : i64}
// TRAIN-SAME: tensor<20x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}"tp"], []]>, graph.init = {{[^}]*}} : tensor<40x16xf32>, graph.state = "wte.adamw.v", graph.state_of = 1 : i64}
// TRAIN-SAME: tensor<20x16xf32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}"tp"], []]>, graph.grad = 1 : i64}
