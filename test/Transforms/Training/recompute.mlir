// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd fuse-attention=false" | FileCheck %s --check-prefix=NONE
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd recompute=full fuse-attention=false" | FileCheck %s --check-prefix=FULL
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd recompute=selective fuse-attention=false" | FileCheck %s --check-prefix=SEL

// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd recompute=auto memory-budget=1 fuse-attention=false" | FileCheck %s --check-prefix=AUTO-ALL
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd recompute=auto memory-budget=58000 fuse-attention=false" | FileCheck %s --check-prefix=AUTO-SOME
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd recompute=auto memory-budget=64000 fuse-attention=false" | FileCheck %s --check-prefix=AUTO-NONE
// RUN: not pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd recompute=auto" 2>&1 | FileCheck %s --check-prefix=AUTO-NOBUDGET
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
// there: 19 ops, their flops, and the bytes no longer kept.
// FULL: module attributes {graph.recompute = {bytes = 12544 : i64, flops = 69952 : i64, ops = 19 : i64}}
// FULL: graph.where %[[M:[0-9]+]], %{{[0-9]+}}, %[[FILL:[0-9]+]] :
// FULL-DAG: graph.where %[[M]], %{{[0-9]+}}, %[[FILL]] {graph.backward}
// FULL-DAG: graph.tanh {{.*}}graph.backward

// Selective: only values at least twice the residual stream's bytes and
// made by no product with a weight: in this block, attention's scores
// (queries times keys), their masked copy and probabilities, and the MLP's
// bias-add and activation.
// SEL: module attributes {graph.recompute = {bytes = 6144 : i64, flops = 7168 : i64, ops = 5 : i64}}
// SEL: graph.where %[[M:[0-9]+]], %{{[0-9]+}}, %[[FILL:[0-9]+]] :
// SEL-DAG: graph.where %[[M]], %{{[0-9]+}}, %[[FILL]] {graph.backward}
// SEL-DAG: graph.softmax %{{[0-9]+}} {axis = 3 : i64, graph.backward}
// SEL-DAG: graph.tanh {{.*}}graph.backward

// Auto: the step (about 62 KB as its buffers plan, unpipelined; the state
// updates are written over the state) is brought under the budget at the
// least added work. Budget 64000 fits as it is; 58000 takes
// the cheapest bytes first (the layer norms' outputs, made again from the
// kept residual stream, and attention's scores and probabilities: 7 ops);
// a budget nothing fits recomputes what full
// does and names the rank and the bytes its buffers then plan.
// AUTO-ALL: module attributes {graph.recompute = {budget = 1 : i64, bytes = 12544 : i64, flops = 69952 : i64, ops = 19 : i64, over = [{bytes = 56840 : i64, rank = 0 : i64}]}}
// AUTO-SOME: module attributes {graph.recompute = {budget = 58000 : i64, bytes = 4352 : i64, flops = 5696 : i64, ops = 7 : i64, over = []}}
// AUTO-SOME-DAG: graph.softmax %{{[0-9]+}} {axis = 3 : i64, graph.backward}
// AUTO-SOME-DAG: graph.layer_norm {{.*}}graph.backward
// AUTO-NONE: module attributes {graph.recompute = {budget = 64000 : i64, bytes = 0 : i64, flops = 0 : i64, ops = 0 : i64, over = []}}
// AUTO-NONE-NOT: graph.softmax {{.*}}graph.backward
// AUTO-NONE-NOT: graph.layer_norm {{.*}}graph.backward
// AUTO-NOBUDGET: error: --recompute auto chooses what to recompute so that each rank fits a memory budget: it needs --memory-budget
