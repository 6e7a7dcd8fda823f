// RUN: pcc-opt %s | FileCheck %s
// RUN: pcc-opt %s | pcc-opt | FileCheck %s

// Every Dist op and attribute round-trips through its printed form.

// CHECK: dist.mesh @mesh(pp = 2, tp = 4)
dist.mesh @mesh(pp = 2, tp = 4)

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // CHECK: dist.all_reduce %{{.*}} on @mesh axes ["tp"] sum : tensor<8x4xf32>
  %0 = dist.all_reduce %x on @mesh axes ["tp"] sum : tensor<8x4xf32>
  // CHECK: dist.all_reduce %{{.*}} on @mesh axes ["tp", "pp"] max : tensor<8x4xf32>
  %1 = dist.all_reduce %0 on @mesh axes ["tp", "pp"] max : tensor<8x4xf32>
  // CHECK: dist.all_gather %{{.*}} on @mesh axes ["tp"] dim 1 : tensor<8x4xf32> -> tensor<8x16xf32>
  %2 = dist.all_gather %1 on @mesh axes ["tp"] dim 1 : tensor<8x4xf32> -> tensor<8x16xf32>
  // CHECK: dist.reduce_scatter %{{.*}} on @mesh axes ["tp"] dim 1 sum : tensor<8x16xf32> -> tensor<8x4xf32>
  %3 = dist.reduce_scatter %2 on @mesh axes ["tp"] dim 1 sum : tensor<8x16xf32> -> tensor<8x4xf32>
  // CHECK: dist.all_to_all %{{.*}} on @mesh axes ["tp"] split 0 concat 1 : tensor<8x4xf32> -> tensor<2x16xf32>
  %4 = dist.all_to_all %3 on @mesh axes ["tp"] split 0 concat 1 : tensor<8x4xf32> -> tensor<2x16xf32>
  return %3 : tensor<8x4xf32>
}

// CHECK-LABEL: func.func @transfers
func.func @transfers(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK: dist.send %{{.*}} on @mesh axes ["pp"] to 1 tag 7 : tensor<2x8xf32>
  dist.send %x on @mesh axes ["pp"] to 1 tag 7 : tensor<2x8xf32>
  // CHECK: dist.recv on @mesh axes ["pp"] from 0 tag 7 : tensor<2x8xf32>
  %y = dist.recv on @mesh axes ["pp"] from 0 tag 7 : tensor<2x8xf32>
  // CHECK: dist.wait_send %{{.*}} on @mesh axes ["pp"] to 1 tag 7 : tensor<2x8xf32>
  dist.wait_send %x on @mesh axes ["pp"] to 1 tag 7 : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// Shardings, here as discardable attributes: split dimensions, replicated
// ones, and partial results with their reduction.
// CHECK-LABEL: func.func @shardings
// CHECK-SAME: dist.sharding = #dist.sharding<@mesh, {{\[\[}}"tp"], []]>
// CHECK-SAME: dist.sharding = #dist.sharding<@mesh, {{\[\[}}], ["pp", "tp"]]>
// CHECK-SAME: dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []], partial = ["tp"] max>
// CHECK-SAME: dist.sharding = #dist.sharding<@mesh, {{\[\[}}], ["tp"]] groups [1, 3]>
// CHECK-SAME: dist.sharding = #dist.sharding<@mesh, {{\[\[}}], []], partial = ["tp"] sum>
func.func @shardings(%a: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [["tp"], []]>},
                     %b: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [[], ["pp", "tp"]]>},
                     %c: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = ["tp"] max>},
                     %d: tensor<8x12xf32> {dist.sharding = #dist.sharding<@mesh, [[], ["tp"]] groups [1, 3]>},
                     %e: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = ["tp"] sum>}) {
  return
}

// A rank's block of a whole tensor (no communication; groups: the block of
// every group), and its position in the group.
// CHECK-LABEL: func.func @local
// CHECK: dist.all_slice %{{.*}} on @mesh axes ["tp"] dim 1 groups 3 : tensor<2x24xf32> -> tensor<2x6xf32>
// CHECK: dist.axis_index on @mesh axes ["tp"] : tensor<i64>
func.func @local(%x: tensor<2x24xf32>) -> (tensor<2x6xf32>, tensor<i64>) {
  %0 = dist.all_slice %x on @mesh axes ["tp"] dim 1 groups 3 : tensor<2x24xf32> -> tensor<2x6xf32>
  %1 = dist.axis_index on @mesh axes ["tp"] : tensor<i64>
  return %0, %1 : tensor<2x6xf32>, tensor<i64>
}

// A fragment of a pipeline schedule: rank 0 holds virtual stages 0 and 2,
// rank 1 stages 1 and 3 (two chunks per rank). The op verifiers check each
// action on its own; pcc-verify-schedule checks the whole table and writes
// the optional results (busy, peak_stashed, ...).
// CHECK-LABEL: dist.schedule @schedule {base_bytes = array<i64: 64, 64>, costs = array<f64: {{.*}}>, kind = "custom", microbatches = 1 : i64, ranks = 2 : i64, stash_bytes = array<i64: 8, 8, 8, 8>, virtual_stages = 2 : i64} {
// CHECK-NEXT:    dist.rank 0 attributes {busy = 2.5{{0*}}e+00 : f64, peak_bytes = 80 : i64, peak_stashed = 2 : i64} {
// CHECK-NEXT:      dist.compute F stage 0 microbatch 0
// CHECK-NEXT:      dist.transfer send act stage 0 microbatch 0 peer 1
// CHECK-NEXT:      dist.transfer recv act stage 1 microbatch 0 peer 1
// CHECK-NEXT:      dist.compute F stage 2 microbatch 0
// CHECK-NEXT:      dist.transfer send act stage 2 microbatch 0 peer 1
// CHECK-NEXT:      dist.transfer recv grad stage 3 microbatch 0 peer 1
// CHECK-NEXT:      dist.compute B stage 2 microbatch 0
// CHECK-NEXT:      dist.compute W stage 2 microbatch 0
// CHECK-NEXT:    }
// CHECK-NEXT:    dist.rank 1 {
// CHECK-NEXT:      dist.transfer recv act stage 0 microbatch 0 peer 0
// CHECK-NEXT:      dist.compute F stage 1 microbatch 0
// CHECK-NEXT:      dist.transfer send act stage 1 microbatch 0 peer 0
// CHECK-NEXT:    }
// CHECK-NEXT:  }
dist.schedule @schedule {kind = "custom", microbatches = 1, ranks = 2, virtual_stages = 2,
                         costs = array<f64: 1.0, 1.0, 0.5, 1.0, 1.0, 0.5, 1.0, 1.0, 0.5, 1.0, 1.0, 0.5>,
                         stash_bytes = array<i64: 8, 8, 8, 8>, base_bytes = array<i64: 64, 64>} {
  dist.rank 0 attributes {busy = 2.5 : f64, peak_stashed = 2, peak_bytes = 80} {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.transfer recv act stage 1 microbatch 0 peer 1
    dist.compute F stage 2 microbatch 0
    dist.transfer send act stage 2 microbatch 0 peer 1
    dist.transfer recv grad stage 3 microbatch 0 peer 1
    dist.compute B stage 2 microbatch 0
    dist.compute W stage 2 microbatch 0
  }
  dist.rank 1 {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.transfer send act stage 1 microbatch 0 peer 0
  }
}
