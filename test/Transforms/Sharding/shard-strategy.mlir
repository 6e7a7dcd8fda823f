// The tensor-parallel plan from structure alone (Megatron's): on one GPT
// block with a tied embedding, the fused QKV projection splits by columns in
// three groups (Q, K and V heads alike), the attention output and the MLP's
// second matmul by rows, the MLP's first by columns, the embedding and the
// LM head it shares by vocabulary; norms stay whole.
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-shard-strategy="tp=2 remarks=true" 2>&1 | FileCheck %s
// CHECK: remark: tp: 'wte' split along dimension 0
// CHECK: remark: tp: 'ln1.weight' whole
// CHECK: remark: tp: 'ln1.bias' whole
// CHECK: remark: tp: 'attn.qkv.weight' split along dimension 1 in 3 groups
// CHECK: remark: tp: 'attn.qkv.bias' split along dimension 0 in 3 groups
// CHECK: remark: tp: 'attn.out.weight' split along dimension 0
// CHECK: remark: tp: 'ln2.weight' whole
// CHECK: remark: tp: 'ln2.bias' whole
// CHECK: remark: tp: 'mlp.fc.weight' split along dimension 1
// CHECK: remark: tp: 'mlp.fc.bias' split along dimension 0
// CHECK: remark: tp: 'mlp.proj.weight' split along dimension 0
// CHECK: dist.mesh @mesh(tp = 2)
// CHECK: graph.weight "wte" {dist.sharding = #dist.sharding<@mesh, {{\[\["tp"\], \[\]\]}}>

// At tp 4 the four heads still split. Six heads at tp 4 cannot: one line
// names the reshape, the extent and the tp values that work (tp a multiple
// of the heads is how grouped-query KV heads are kept whole, each rank
// using its own).
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-shard-strategy="tp=4 remarks=true" 2>&1 | FileCheck %s --check-prefix=TP4
// TP4: remark: tp: 'attn.qkv.weight' split along dimension 1 in 3 groups
// TP4: remark: tp: 'attn.out.weight' split along dimension 0
// RUN: not pcc-opt %S/Inputs/six-heads.mlir --pcc-shard-strategy="tp=4" 2>&1 | FileCheck %s --check-prefix=SIX
// SIX: six-heads.mlir:5:9: error: cannot split dimension of extent 6 (attention heads of 'attn.q.weight') over tp 4: tp must divide it (tp = 2, 3, 6) or be a multiple of it
// RUN: pcc-opt %S/Inputs/six-heads.mlir --pcc-shard-strategy="tp=3 remarks=true" 2>&1 | FileCheck %s --check-prefix=THREE
// THREE: remark: tp: 'attn.q.weight' split along dimension 1

// --shard overrides the strategy by initializer name.
// RUN: pcc-opt %S/Inputs/gpt-block.mlir --pcc-shard-strategy="tp=2 remarks=true shard=mlp\..*=rep;wte=col" 2>&1 | FileCheck %s --check-prefix=USER
// USER: remark: tp: 'wte' split along dimension 1
// USER: remark: tp: 'mlp.fc.weight' whole
// USER: remark: tp: 'mlp.proj.weight' whole
// RUN: not pcc-opt %S/Inputs/gpt-block.mlir --pcc-shard-strategy="tp=2 shard=wte=sideways" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: --shard 'wte=sideways': expected REGEX=col, REGEX=row or REGEX=rep
