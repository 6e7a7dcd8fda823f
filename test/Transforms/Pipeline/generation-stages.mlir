// RUN: pcc-opt %s --pcc-parallelize="generate=true max-batch=2 max-tokens=4 kv-block=4 pp=2" | FileCheck %s

// A generation build over two pipeline ranks: the prefill is cut by its
// costs, one layer per rank here, and the decode follows it, so that each
// rank holds its layer's weights and KV cache for both steps. Each step is
// lowered with its own schedule into one public function per rank, named
// by its entry point. The cache is written in place through the argument
// the rank passes its stage: no function returns it.

func.func @lm(%ids: tensor<1x8xi64> {onnx.name = "input_ids"}) -> (tensor<1x8x16xf32> {onnx.name = "logits"}) {
  %emb = graph.weight "emb" dense<0.5> : tensor<16x64xf32>
  %w0 = graph.weight "layer0.w" dense<0.125> : tensor<64x64xf32>
  %w1 = graph.weight "layer1.w" dense<0.25> : tensor<64x64xf32>
  %head = graph.weight "head" dense<0.75> : tensor<64x16xf32>
  %x = graph.gather %emb[%ids] {axis = 0 : i64} : (tensor<16x64xf32>, tensor<1x8xi64>) -> tensor<1x8x64xf32>
  %q0 = graph.matmul %x, %w0 : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
  %q0r = graph.reshape %q0 : tensor<1x8x64xf32> to tensor<1x1x8x64xf32>
  %o0:2 = graph.attention %q0r, %q0r, %q0r {causal, scale = 0.5 : f32} : (tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32>) -> (tensor<1x1x8x64xf32>, tensor<1x1x8xf32>)
  %y0 = graph.reshape %o0#0 : tensor<1x1x8x64xf32> to tensor<1x8x64xf32>
  %x1 = graph.add %y0, %x : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  %q1 = graph.matmul %x1, %w1 : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
  %q1r = graph.reshape %q1 : tensor<1x8x64xf32> to tensor<1x1x8x64xf32>
  %o1:2 = graph.attention %q1r, %q1r, %q1r {causal, scale = 0.5 : f32} : (tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32>) -> (tensor<1x1x8x64xf32>, tensor<1x1x8xf32>)
  %y1 = graph.reshape %o1#0 : tensor<1x1x8x64xf32> to tensor<1x8x64xf32>
  %x2 = graph.add %y1, %x1 : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  %logits = graph.matmul %x2, %head : (tensor<1x8x64xf32>, tensor<64x16xf32>) -> tensor<1x8x16xf32>
  return %logits : tensor<1x8x16xf32>
}

// CHECK-LABEL: func.func @prefill_rank0(
// CHECK-SAME: graph.state = "kv_cache.0.key"
// CHECK-SAME: graph.state = "kv_cache.0.value"
// CHECK-NOT: kv_cache.1
// CHECK-SAME: attributes {dist.rank = 0 : i64, pcc.entry = "prefill"}
// CHECK: call @prefill_stage0_forward
// CHECK: dist.send
// CHECK: return{{$}}
// CHECK-LABEL: func.func @prefill_rank1(
// CHECK-NOT: kv_cache.0
// CHECK-SAME: graph.state = "kv_cache.1.key"
// CHECK-SAME: graph.state = "kv_cache.1.value"
// CHECK-SAME: -> (tensor<2x16xf32> {dist.result_index = 0 : i64, onnx.name = "logits"})
// CHECK-SAME: attributes {dist.rank = 1 : i64, pcc.entry = "prefill"}
// CHECK: dist.recv
// CHECK: call @prefill_stage1_forward
// CHECK-LABEL: func.func @decode_rank0(
// CHECK-SAME: graph.state = "kv_cache.0.key"
// CHECK-SAME: graph.state = "kv_cache.0.value"
// CHECK-NOT: kv_cache.1
// CHECK-SAME: attributes {dist.rank = 0 : i64, pcc.entry = "decode"}
// CHECK-LABEL: func.func @decode_rank1(
// CHECK-NOT: kv_cache.0
// CHECK-SAME: graph.state = "kv_cache.1.key"
// CHECK-SAME: attributes {dist.rank = 1 : i64, pcc.entry = "decode"}
// CHECK: dist.schedule @prefill_schedule
// CHECK: dist.schedule @decode_schedule
