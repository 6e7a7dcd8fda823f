// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd fuse-attention=false" | FileCheck %s --check-prefix=NONE
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd recompute=full fuse-attention=false" | FileCheck %s --check-prefix=FULL
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd recompute=selective fuse-attention=false" | FileCheck %s --check-prefix=SEL

// pcc-recompute on one GPT block (attention unfused). The forward's masked
// scores are where(mask, scores, -1e9) and its MLP activation a tanh; a
// clone made again in the backward carries graph.backward and reads what
// its original read (the backward's own where reads a zero instead).

// Without it the module says nothing and no forward op is cloned.
// NONE-NOT: graph.recompute
// NONE: graph.where %[[M:[0-9]+]], %{{[0-9]+}}, %[[FILL:[0-9]+]] :
// NONE-NOT: graph.where %[[M]], %{{[0-9]+}}, %[[FILL]] {graph.backward}
// NONE-NOT: graph.tanh {{.*}}graph.backward

// Full: every value between the checkpoints (the residual stream before
// attention and before the MLP) that the backward reads is made again
// there: 20 ops, their flops, and the bytes no longer kept.
// FULL: module attributes {graph.recompute = {bytes = 12544 : i64, flops = 69952 : i64, ops = 20 : i64}}
// FULL: graph.where %[[M:[0-9]+]], %{{[0-9]+}}, %[[FILL:[0-9]+]] :
// FULL-DAG: graph.where %[[M]], %{{[0-9]+}}, %[[FILL]] {graph.backward}
// FULL-DAG: graph.tanh {{.*}}graph.backward

// Selective: only values at least twice a checkpoint's bytes and made by
// no product with a weight: in this block, the MLP's bias-add and
// activation; the masked scores are not made again.
// SEL: module attributes {graph.recompute = {bytes = 4096 : i64, flops = 2048 : i64, ops = 2 : i64}}
// SEL: graph.where %[[M:[0-9]+]], %{{[0-9]+}}, %[[FILL:[0-9]+]] :
// SEL-NOT: graph.where %[[M]], %{{[0-9]+}}, %[[FILL]] {graph.backward}
// SEL: graph.tanh {{.*}}graph.backward
