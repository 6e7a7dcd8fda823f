// RUN: pcc-opt %s --split-input-file --verify-diagnostics

// expected-error@+1 {{'dist.mesh' op has two axes named 'tp'}}
dist.mesh @mesh(tp = 2, tp = 2)

// -----

// expected-error@+1 {{'dist.mesh' op axis 'tp' has size 0; sizes are at least 1}}
dist.mesh @mesh(tp = 0)

// -----

func.func @no_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'dist.all_reduce' op mesh @mesh is not a dist.mesh}}
  %0 = dist.all_reduce %x on @mesh axes ["tp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @unknown_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'dist.all_reduce' op axis 'pp' is not an axis of mesh @mesh}}
  %0 = dist.all_reduce %x on @mesh axes ["pp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @axis_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'dist.all_reduce' op axis 'tp' is listed twice}}
  %0 = dist.all_reduce %x on @mesh axes ["tp", "tp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @no_axes(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'dist.all_reduce' op needs at least one mesh axis}}
  %0 = dist.all_reduce %x on @mesh axes [] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @gather_shape(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  // expected-error@+1 {{'dist.all_gather' op result 'tensor<2x8xf32>' should have the shape 2x16}}
  %0 = dist.all_gather %x on @mesh axes ["tp"] dim 1 : tensor<2x4xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @gather_dim(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error@+1 {{'dist.all_gather' op dim 2 out of range for rank 2}}
  %0 = dist.all_gather %x on @mesh axes ["tp"] dim 2 : tensor<2x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

dist.mesh @mesh(tp = 4)
func.func @scatter_divisibility(%x: tensor<6x4xf32>) -> tensor<1x4xf32> {
  // expected-error@+1 {{'dist.reduce_scatter' op dimension 0 of extent 6 does not divide by the group size 4}}
  %0 = dist.reduce_scatter %x on @mesh axes ["tp"] dim 0 sum : tensor<6x4xf32> -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

dist.mesh @mesh(tp = 2)
func.func @all_to_all_shape(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error@+1 {{'dist.all_to_all' op result 'tensor<4x4xf32>' should have the shape 2x8}}
  %0 = dist.all_to_all %x on @mesh axes ["tp"] split 0 concat 1 : tensor<4x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

dist.mesh @mesh(pp = 2, tp = 2)
func.func @peer_outside(%x: tensor<4xf32>) {
  // expected-error@+1 {{'dist.send' op peer 2 is outside the group of 2 ranks}}
  dist.send %x on @mesh axes ["pp"] to 2 tag 0 : tensor<4xf32>
  return
}

// -----

dist.mesh @mesh(pp = 2)
func.func @wait_without_send(%x: tensor<4xf32>) {
  // A send of the same tensor, but to another tag.
  dist.send %x on @mesh axes ["pp"] to 1 tag 1 : tensor<4xf32>
  // expected-error@+1 {{'dist.wait_send' op completes no send: no dist.send of its tensor to 1 with tag 0 comes before it in its block}}
  dist.wait_send %x on @mesh axes ["pp"] to 1 tag 0 : tensor<4xf32>
  return
}

// -----

dist.mesh @mesh(pp = 2)
func.func @wait_twice(%x: tensor<4xf32>) {
  dist.send %x on @mesh axes ["pp"] to 1 tag 0 : tensor<4xf32>
  dist.wait_send %x on @mesh axes ["pp"] to 1 tag 0 : tensor<4xf32>
  // expected-error@+1 {{'dist.wait_send' op completes a send that an earlier dist.wait_send completed}}
  dist.wait_send %x on @mesh axes ["pp"] to 1 tag 0 : tensor<4xf32>
  return
}

// -----

dist.mesh @mesh(pp = 2)
func.func @negative_tag() -> tensor<4xf32> {
  // expected-error@+1 {{'dist.recv' op tag -1 is negative}}
  %0 = dist.recv on @mesh axes ["pp"] from 0 tag -1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh(tp = 2)
func.func @unknown_reduction(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{unknown reduction 'prod' (sum, max, min or mean)}}
  %0 = dist.all_reduce %x on @mesh axes ["tp"] prod : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error@+1 {{axis 'tp' is used twice}}
func.func @sharding_axis_twice(%a: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [["tp"], ["tp"]]>}) {
  return
}

// -----

// expected-error@+1 {{axis 'tp' is used twice}}
func.func @split_and_partial(%a: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [["tp"], []], partial = ["tp"] sum>}) {
  return
}

// -----

// expected-error@+1 {{groups has 1 entries for 2 dimensions}}
func.func @groups_per_dimension(%a: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [["tp"], []] groups [2]>}) {
  return
}

// -----

dist.mesh @mesh(tp = 2)
func.func @slice_indivisible(%x: tensor<2x9xf32>) -> tensor<2x3xf32> {
  // expected-error@+1 {{dimension 1 of extent 9 does not split into 3 group(s) of 2 blocks}}
  %0 = dist.all_slice %x on @mesh axes ["tp"] dim 1 groups 3 : tensor<2x9xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// expected-error@+1 {{'dist.schedule' op has 1 dist.rank ops for 2 ranks}}
dist.schedule @too_few_ranks {kind = "1f1b", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
  }
}

// -----

dist.schedule @rank_order {kind = "1f1b", microbatches = 1, ranks = 2, virtual_stages = 1} {
  // expected-error@+1 {{'dist.rank' op is rank 1 where rank 0 belongs: ranks appear once each, in order}}
  dist.rank 1 {
  }
  dist.rank 0 {
  }
}

// -----

// expected-error@+1 {{'dist.schedule' op attribute 'ranks' failed to satisfy constraint}}
dist.schedule @no_ranks {kind = "1f1b", microbatches = 1, ranks = 0, virtual_stages = 1} {
}

// -----

// expected-error@+1 {{'dist.schedule' op costs has 3 values; expected F, B and W times for each of the 2 virtual stages (6)}}
dist.schedule @costs {kind = "1f1b", microbatches = 1, ranks = 2, virtual_stages = 1, costs = array<f64: 1.0, 2.0, 1.0>} {
  dist.rank 0 {
  }
  dist.rank 1 {
  }
}

// -----

// expected-error@+1 {{'dist.schedule' op transfer_costs has 3 values; expected the activations' and the input gradient's transfer times for each of the 2 virtual stages (4)}}
dist.schedule @transfers {kind = "1f1b", microbatches = 1, ranks = 2, virtual_stages = 1, transfer_costs = array<f64: 1.0, 2.0, 1.0>} {
  dist.rank 0 {
  }
  dist.rank 1 {
  }
}

// -----

// expected-error@+1 {{'dist.schedule' op transfer_costs must be finite and non-negative; got -1.000000e+00}}
dist.schedule @negative_transfer {kind = "1f1b", microbatches = 1, ranks = 2, virtual_stages = 1, transfer_costs = array<f64: 1.0, 0.0, 0.0, -1.0>} {
  dist.rank 0 {
  }
  dist.rank 1 {
  }
}

// -----

// expected-error@+1 {{'dist.schedule' op deferred_costs has 1 values; expected the time of its deferred products for each of the 2 virtual stages (2)}}
dist.schedule @deferred {kind = "1f1b", microbatches = 1, ranks = 2, virtual_stages = 1, deferred_costs = array<f64: 1.0>} {
  dist.rank 0 {
  }
  dist.rank 1 {
  }
}

// -----

// expected-error@+1 {{'dist.schedule' op base_bytes has 1 values; expected one per rank (2)}}
dist.schedule @base_bytes {kind = "1f1b", microbatches = 1, ranks = 2, virtual_stages = 1, base_bytes = array<i64: 1>} {
  dist.rank 0 {
  }
  dist.rank 1 {
  }
}

// -----

// expected-error@+1 {{'dist.schedule' op stash_bytes must be non-negative; got -8}}
dist.schedule @stash_bytes {kind = "1f1b", microbatches = 1, ranks = 1, virtual_stages = 1, stash_bytes = array<i64: -8>} {
  dist.rank 0 {
  }
}

// -----

// expected-error@+1 {{'dist.rank' op expects parent op 'dist.schedule'}}
dist.rank 0 {
}

// -----

dist.schedule @stage_range {kind = "1f1b", microbatches = 2, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    // expected-error@+1 {{'dist.compute' op stage 2 is outside the schedule's 2 virtual stages}}
    dist.compute F stage 2 microbatch 0
  }
  dist.rank 1 {
  }
}

// -----

dist.schedule @microbatch_range {kind = "1f1b", microbatches = 2, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    // expected-error@+1 {{'dist.compute' op microbatch 2 is outside the schedule's 2 microbatches}}
    dist.compute F stage 0 microbatch 2
  }
  dist.rank 1 {
  }
}

// -----

// Rank 1 holds virtual stages 1 and 3 of four.
dist.schedule @wrong_rank {kind = "interleaved", microbatches = 2, ranks = 2, virtual_stages = 2} {
  dist.rank 0 {
  }
  dist.rank 1 {
    // expected-error@+1 {{'dist.compute' op stage 2 is on rank 0, not on rank 1}}
    dist.compute B stage 2 microbatch 0
  }
}

// -----

dist.schedule @unknown_phase {kind = "1f1b", microbatches = 1, ranks = 1, virtual_stages = 1} {
  dist.rank 0 {
    // expected-error@+1 {{expected string or keyword containing one of the following enum values for attribute 'phase' [F, B, W]}}
    dist.compute X stage 0 microbatch 0
  }
}

// -----

dist.schedule @peer_range {kind = "1f1b", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    // expected-error@+1 {{'dist.transfer' op peer 2 is outside the schedule's 2 ranks}}
    dist.transfer send act stage 0 microbatch 0 peer 2
  }
  dist.rank 1 {
  }
}

// -----

dist.schedule @wrong_peer {kind = "1f1b", microbatches = 1, ranks = 3, virtual_stages = 1} {
  dist.rank 0 {
    // expected-error@+1 {{'dist.transfer' op peer 2 does not hold stage 1 (rank 1 does)}}
    dist.transfer send act stage 0 microbatch 0 peer 2
  }
  dist.rank 1 {
  }
  dist.rank 2 {
  }
}

// -----

dist.schedule @send_elsewhere {kind = "1f1b", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
  }
  dist.rank 1 {
    // expected-error@+1 {{'dist.transfer' op stage 0 is on rank 0, not on rank 1}}
    dist.transfer send act stage 0 microbatch 0 peer 0
  }
}

// -----

dist.schedule @recv_elsewhere {kind = "1f1b", microbatches = 1, ranks = 3, virtual_stages = 1} {
  dist.rank 0 {
  }
  dist.rank 1 {
  }
  dist.rank 2 {
    // The gradient of stage 2 goes to stage 1, on rank 1.
    // expected-error@+1 {{'dist.transfer' op stage 1 is on rank 1, not on rank 2}}
    dist.transfer recv grad stage 2 microbatch 0 peer 2
  }
}

// -----

dist.schedule @last_activation {kind = "1f1b", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
  }
  dist.rank 1 {
    // expected-error@+1 {{'dist.transfer' op stage 1 is the last: its activation goes to no stage}}
    dist.transfer send act stage 1 microbatch 0 peer 0
  }
}

// -----

dist.schedule @first_gradient {kind = "1f1b", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    // expected-error@+1 {{'dist.transfer' op stage 0 is the first: its input gradient goes to no stage}}
    dist.transfer send grad stage 0 microbatch 0 peer 1
  }
  dist.rank 1 {
  }
}

// -----

// One rank holds both chunks: nothing to transfer.
dist.schedule @same_rank {kind = "interleaved", microbatches = 1, ranks = 1, virtual_stages = 2} {
  dist.rank 0 {
    // expected-error@+1 {{'dist.transfer' op stages 0 and 1 are both on rank 0 and need no transfer}}
    dist.transfer send act stage 0 microbatch 0 peer 0
  }
}

// -----

func.func @wait_not_collective(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'dist.wait' op waits for a value that no started collective (all_reduce, all_gather, reduce_scatter) makes}}
  %w = dist.wait %x : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

// The dialect's discardable attributes are verified where they stand.
// expected-error@+1 {{argument 0: dist.sharding gives 2 dimension(s) for a tensor of rank 1}}
func.func @sharding_rank(%a: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [["tp"], []]>}) {
  return
}

// -----

// expected-error@+1 {{dist.microbatches must be an integer of at least 1, not 0 : i64}}
func.func @microbatches_zero() attributes {dist.microbatches = 0 : i64} {
  return
}

// -----

// expected-error@+1 {{result 0: dist.batch_dim names dimension 2 of a tensor of rank 2}}
func.func @batch_dim_range(%a: tensor<2x4xf32>) -> (tensor<2x4xf32> {dist.batch_dim = 2 : i64}) {
  return %a : tensor<2x4xf32>
}

// -----

// expected-error@+1 {{dist.phase must be "forward", "backward", "weight" or "optimizer", not "sideways"}}
func.func private @phase() attributes {dist.phase = "sideways"}

// -----

// expected-error@+1 {{argument 0: dist.state must be an integer of at least 0, not -1 : i64}}
func.func private @role(%a: tensor<4xf32> {dist.state = -1 : i64})

// -----

// expected-error@+1 {{dist.stage_costs must hold 3 values per stage}}
func.func private @costs() attributes {dist.stage_costs = array<f64: 1.0, 2.0>}

// -----

func.func @stage(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{dist.stages must be a non-empty array<i64> of stages}}
  %b = graph.neg %a {dist.stages = array<i64>} : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

func.func private @callee()
func.func @action() {
  // expected-error@+1 {{dist.action must be "O", "W" or F, B or W and a microbatch (with a `+` when of the next step), not "X1"}}
  call @callee() {dist.action = "X1"} : () -> ()
  return
}

// -----

func.func @operands(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{dist.operands must be an array of 1 #dist.sharding}}
  %b = graph.neg %a {dist.operands = []} : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// expected-error@+1 {{result 0: dist.reduce_axes must be a non-empty array of mesh axis names}}
func.func private @reduce_axes() -> (tensor<4xf32> {dist.grad = 0 : i64, dist.reduce_axes = []})

// -----

// expected-error@+1 {{dist.unknown is no attribute of the Dist dialect}}
func.func private @unknown() attributes {dist.unknown}

// -----

// A lead is how far a rank runs into the next step: only a table of two
// steps has one.
dist.schedule @lead {kind = "1f1b", microbatches = 1, ranks = 1, virtual_stages = 1} {
  // expected-error @+1 {{'dist.rank' op has a lead, which only a table of 2 steps (steps = 2) has}}
  dist.rank 0 attributes {lead = 1 : i64} {
    dist.compute F stage 0 microbatch 0
    dist.compute B stage 0 microbatch 0
  }
}

// -----

// expected-error @+1 {{'dist.schedule' op covers 3 steps; a table without a flush covers 2 (a step and the next)}}
dist.schedule @three {kind = "2bw", microbatches = 1, ranks = 1, steps = 3, virtual_stages = 1} {
  dist.rank 0 {
  }
}

// -----

// The microbatches of a table of two steps are both steps'.
dist.schedule @beyond {kind = "2bw", microbatches = 1, ranks = 1, steps = 2, virtual_stages = 1} {
  dist.rank 0 {
    // expected-error @+1 {{'dist.compute' op microbatch 2 is outside the schedule's 2 microbatches}}
    dist.compute F stage 0 microbatch 2
  }
}

// -----

// expected-error @+1 {{'dist.schedule' op has 3 pipelines; at most 2 (one each way)}}
dist.schedule @three_ways {kind = "chimera", microbatches = 2, pipelines = 3, ranks = 1, virtual_stages = 1} {
  dist.rank 0 {
  }
}

// -----

// expected-error @+1 {{'dist.schedule' op has 2 pipelines, which need one stage per rank, one step and an even number of microbatches}}
dist.schedule @odd {kind = "chimera", microbatches = 3, pipelines = 2, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
  }
  dist.rank 1 {
  }
}

// -----

// The odd microbatches flow up: stage 0 of microbatch 1 is on the last rank.
dist.schedule @up {kind = "chimera", microbatches = 2, pipelines = 2, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    // expected-error @+1 {{'dist.compute' op stage 0 is on rank 1 for microbatch 1, not on rank 0}}
    dist.compute F stage 0 microbatch 1
  }
  dist.rank 1 {
  }
}
