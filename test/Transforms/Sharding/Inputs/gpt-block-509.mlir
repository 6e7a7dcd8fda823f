// One GPT block with a tied embedding and LM head of an odd vocabulary: hidden 16, 4 heads of 4,
// MLP 64, vocabulary 509, batch 2, sequence 8. Shared by the sharding tests.
func.func @main(%ids: tensor<2x8xi64> {onnx.name = "input_ids"}) -> (tensor<2x8x509xf32> {onnx.name = "logits"}) {
  %wte = graph.weight "wte" {exported_as = "parameter"} dense<0.01> : tensor<509x16xf32>
  %g1 = graph.weight "ln1.weight" {exported_as = "parameter"} dense<1.0> : tensor<16xf32>
  %b1 = graph.weight "ln1.bias" {exported_as = "parameter"} dense<0.0> : tensor<16xf32>
  %wqkv = graph.weight "attn.qkv.weight" {exported_as = "parameter"} dense<0.02> : tensor<16x48xf32>
  %bqkv = graph.weight "attn.qkv.bias" {exported_as = "parameter"} dense<0.01> : tensor<48xf32>
  %wo = graph.weight "attn.out.weight" {exported_as = "parameter"} dense<0.03> : tensor<16x16xf32>
  %g2 = graph.weight "ln2.weight" {exported_as = "parameter"} dense<1.0> : tensor<16xf32>
  %b2 = graph.weight "ln2.bias" {exported_as = "parameter"} dense<0.0> : tensor<16xf32>
  %w1 = graph.weight "mlp.fc.weight" {exported_as = "parameter"} dense<0.04> : tensor<16x64xf32>
  %bb1 = graph.weight "mlp.fc.bias" {exported_as = "parameter"} dense<0.01> : tensor<64xf32>
  %w2 = graph.weight "mlp.proj.weight" {exported_as = "parameter"} dense<0.05> : tensor<64x16xf32>
  %mask = graph.constant dense<true> : tensor<8x8xi1>
  %ninf = graph.constant dense<-1.0e9> : tensor<f32>
  %x = graph.gather %wte[%ids] {axis = 0 : i64} : (tensor<509x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  %h, %hm, %hr = graph.layer_norm %x, %g1, %b1 {axis = 2 : i64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x1xf32>, tensor<2x8x1xf32>)
  %qkv0 = graph.matmul %h, %wqkv : (tensor<2x8x16xf32>, tensor<16x48xf32>) -> tensor<2x8x48xf32>
  %qkv = graph.add %qkv0, %bqkv : (tensor<2x8x48xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  %q, %k, %v = graph.split %qkv {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q4 = graph.reshape %q : tensor<2x8x16xf32> to tensor<2x8x4x4xf32>
  %qt = graph.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x4xf32>) -> tensor<2x4x8x4xf32>
  %k4 = graph.reshape %k : tensor<2x8x16xf32> to tensor<2x8x4x4xf32>
  %kt = graph.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x4xf32>) -> tensor<2x4x4x8xf32>
  %v4 = graph.reshape %v : tensor<2x8x16xf32> to tensor<2x8x4x4xf32>
  %vt = graph.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x4xf32>) -> tensor<2x4x8x4xf32>
  %s = graph.matmul %qt, %kt : (tensor<2x4x8x4xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x8x8xf32>
  %sm = graph.where %mask, %s, %ninf : (tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %p = graph.softmax %sm {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = graph.matmul %p, %vt : (tensor<2x4x8x8xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x4xf32>
  %ot = graph.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x4xf32>) -> tensor<2x8x4x4xf32>
  %o2 = graph.reshape %ot : tensor<2x8x4x4xf32> to tensor<2x8x16xf32>
  %a = graph.matmul %o2, %wo : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %x2 = graph.add %x, %a : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %h2, %h2m, %h2r = graph.layer_norm %x2, %g2, %b2 {axis = 2 : i64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x1xf32>, tensor<2x8x1xf32>)
  %f0 = graph.matmul %h2, %w1 : (tensor<2x8x16xf32>, tensor<16x64xf32>) -> tensor<2x8x64xf32>
  %f1 = graph.add %f0, %bb1 : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %f = graph.tanh %f1 : tensor<2x8x64xf32>
  %m = graph.matmul %f, %w2 : (tensor<2x8x64xf32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
  %x3 = graph.add %x2, %m : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %head = graph.transpose %wte {perm = array<i64: 1, 0>} : (tensor<509x16xf32>) -> tensor<16x509xf32>
  %logits = graph.matmul %x3, %head : (tensor<2x8x16xf32>, tensor<16x509xf32>) -> tensor<2x8x509xf32>
  return %logits : tensor<2x8x509xf32>
}
