// RUN: pcc-opt %s --pcc-pipeline-stages="pp=3" | FileCheck %s --check-prefix=DEFAULT
// RUN: pcc-opt %s --pcc-pipeline-stages="pp=3" | FileCheck %s --check-prefix=TRANSFER
// RUN: pcc-opt %s --pcc-pipeline-stages="pp=3 cost-table=%S/Inputs/slow-relu.json" | FileCheck %s --check-prefix=TABLE
// RUN: not pcc-opt %s --pcc-pipeline-stages="pp=3 cost-table=%S/Inputs/bad-cost.json" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not pcc-opt %s --pcc-pipeline-stages="pp=3 cost-table=%S/Inputs/missing.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not pcc-opt %s --pcc-pipeline-stages="pp=3 cost-table=%S/Inputs/fractional-node.json" 2>&1 | FileCheck %s --check-prefix=NODE

// The cost model balances stages by time: with the default throughputs the
// three equal matmuls get a stage each (the cheap ReLU joins one); a
// measured table in which ReLU is slow gives it a stage of its own.
// DEFAULT: graph.matmul {{.*}}dist.stage = 0
// DEFAULT: graph.relu {{.*}}dist.stage = 0
// DEFAULT: graph.matmul {{.*}}dist.stage = 1
// DEFAULT: graph.matmul {{.*}}dist.stage = 2
// TABLE: graph.matmul {{.*}}dist.stage = 0
// TABLE: graph.relu {{.*}}dist.stage = 1
// TABLE: graph.matmul {{.*}}dist.stage = 2
// TABLE: graph.matmul {{.*}}dist.stage = 2
// BAD: error: {{.*}}bad-cost.json: 'flops_per_second' must be a positive number
// MISSING: error: {{.*}}missing.json: cannot read the cost table
// NODE: error: {{.*}}fractional-node.json: 'devices_per_node' must be a whole number
// The stages' transfer times: activations from stages 0 and 1 to the
// next (no backward here), at the CPU's MPI latency and bandwidth (64 x 64
// floats: 2e-6 + 16384 / 4e9 s).
// TRANSFER: dist.transfer_costs = array<f64: 6.09{{[0-9]*}}E-6, 0.{{0+}}e+00, 6.09{{[0-9]*}}E-6, 0.{{0+}}e+00, 0.{{0+}}e+00, 0.{{0+}}e+00>
func.func @main(%x: tensor<64x64xf32> {onnx.name = "x"}) -> (tensor<64x64xf32> {onnx.name = "y"}) {
  %w1 = graph.weight "w1" dense<0.1> : tensor<64x64xf32>
  %w2 = graph.weight "w2" dense<0.2> : tensor<64x64xf32>
  %w3 = graph.weight "w3" dense<0.3> : tensor<64x64xf32>
  %h1 = graph.matmul %x, %w1 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %a1 = graph.relu %h1 : tensor<64x64xf32>
  %h2 = graph.matmul %a1, %w2 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %h3 = graph.matmul %h2, %w3 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return %h3 : tensor<64x64xf32>
}
