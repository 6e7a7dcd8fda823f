// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd fuse-attention=false dtype=bf16" | FileCheck %s
// RUN: pcc-opt %S/../Sharding/Inputs/gpt-block.mlir --pcc-parallelize="train=true optimizer=sgd fuse-attention=false" | FileCheck %s --check-prefix=F32
// pcc-narrow-stash on one GPT block with bf16 products: the MLP's
// activation (a tanh) is read by the second product, cast down, and by its
// own derivative. The derivative reads the 16-bit copy cast up in the
// backward, so the forward keeps that copy alone; nothing after the second
// product's cast reads the f32 activation.

// CHECK: %[[Y:[0-9]+]] = graph.tanh %{{[0-9]+}} : tensor<2x8x64xf32>
// CHECK-NEXT: %[[Y16:[0-9]+]] = graph.cast %[[Y]] : tensor<2x8x64xf32> to tensor<2x8x64xbf16>
// CHECK-NOT: %[[Y]]{{[^0-9]}}
// CHECK: graph.cast %[[Y16]] {graph.backward} : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
// CHECK-NOT: %[[Y]]{{[^0-9]}}
// CHECK: return

// In f32 there is no 16-bit copy: the derivative reads the activation.
// F32: %[[Y:[0-9]+]] = graph.tanh %{{[0-9]+}} : tensor<2x8x64xf32>
// F32: graph.mul %[[Y]], %[[Y]] {graph.backward}
