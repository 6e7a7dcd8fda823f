// Hand-written schedules the verifier accepts, with what it records.
// RUN: pcc-opt %s --pcc-verify-schedule | FileCheck %s
// RUN: pcc-opt %s --pcc-verify-schedule=remarks=true 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// Two virtual stages on one rank need no transfer; F of stage 1 reads F of
// stage 0 on the same rank, B of stage 0 reads B of stage 1.
// CHECK-LABEL: dist.schedule @chunks
// CHECK-SAME: bubble_fraction = 0.{{0+}}e+00 : f64
// CHECK-SAME: makespan = 1.2{{0+}}e+01 : f64
// CHECK: dist.rank 0 attributes {busy = 1.2{{0+}}e+01 : f64, peak_stashed = 2 : i64}
// REMARK: remark: schedule @chunks (interleaved, 1 rank, 2 microbatches, 2 virtual stages): bubble 0.0%, makespan 12; rank 0 busy 12, peak 2 stashed
dist.schedule @chunks {kind = "interleaved", microbatches = 2, ranks = 1, virtual_stages = 2} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
    dist.compute F stage 0 microbatch 1
    dist.compute B stage 0 microbatch 0
    dist.compute F stage 1 microbatch 1
    dist.compute B stage 1 microbatch 1
    dist.compute B stage 0 microbatch 1
  }
}

// Split backwards with costs and bytes: a microbatch stays stashed until its
// W, so deferring both W's holds two (2 x 10 bytes over a base of 5). A B
// costs only its own time when W is split off.
// CHECK-LABEL: dist.schedule @deferred_w
// CHECK-SAME: bubble_fraction = 0.{{0+}}e+00 : f64
// CHECK-SAME: makespan = 1.2{{0+}}e+01 : f64
// CHECK: dist.rank 0 attributes {busy = 1.2{{0+}}e+01 : f64, peak_bytes = 25 : i64, peak_stashed = 2 : i64}
// REMARK: remark: schedule @deferred_w (zb-h1, 1 rank, 2 microbatches): bubble 0.0%, makespan 12; rank 0 busy 12, peak 2 stashed, 25 bytes
dist.schedule @deferred_w {kind = "zb-h1", microbatches = 2, ranks = 1, virtual_stages = 1,
                           costs = array<f64: 1.0, 2.0, 3.0>, stash_bytes = array<i64: 10>, base_bytes = array<i64: 5>} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.compute F stage 0 microbatch 1
    dist.compute B stage 0 microbatch 0
    dist.compute B stage 0 microbatch 1
    dist.compute W stage 0 microbatch 0
    dist.compute W stage 0 microbatch 1
  }
}

// Products deferred to once a step run after each rank's last action:
// rank 1's (2) while rank 0 runs its last backward, rank 0's (1) at the
// end. F = 1, B = 2: rank 0's last B ends at 9, rank 1's at 7.
// CHECK-LABEL: dist.schedule @deferred_products
// CHECK-SAME: bubble_fraction = 2.5{{0+}}e-01 : f64
// CHECK-SAME: makespan = 1.{{0+}}e+01 : f64
// REMARK: remark: schedule @deferred_products (1f1b, 2 ranks, 2 microbatches): bubble 25.0%, makespan 10; rank 0 busy 7, peak 2 stashed; rank 1 busy 8, peak 1 stashed
dist.schedule @deferred_products {kind = "1f1b", microbatches = 2, ranks = 2, virtual_stages = 1,
                                  costs = array<f64: 1.0, 2.0, 0.0, 1.0, 2.0, 0.0>, deferred_costs = array<f64: 1.0, 2.0>} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.compute F stage 0 microbatch 1
    dist.transfer send act stage 0 microbatch 1 peer 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.compute B stage 0 microbatch 0
    dist.transfer recv grad stage 1 microbatch 1 peer 1
    dist.compute B stage 0 microbatch 1
  }
  dist.rank 1 {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
    dist.transfer recv act stage 0 microbatch 1 peer 0
    dist.compute F stage 1 microbatch 1
    dist.compute B stage 1 microbatch 1
    dist.transfer send grad stage 1 microbatch 1 peer 0
  }
}

// A hand-made order no generator makes is fine as long as it is sound:
// rank 1 runs its two forwards before either backward, and rank 0 receives
// the gradients in the order they are sent. With unit costs (B = 2), rank 1
// finishes at 7 and rank 0 at 9 after waiting 3.
// CHECK-LABEL: dist.schedule @custom
// CHECK-SAME: bubble_fraction = 0.3333{{[0-9]*}} : f64
// CHECK-SAME: makespan = 9.{{0+}}e+00 : f64
// REMARK: remark: schedule @custom (custom, 2 ranks, 2 microbatches): bubble 33.3%, makespan 9; rank 0 busy 6, peak 2 stashed; rank 1 busy 6, peak 2 stashed
dist.schedule @custom {kind = "custom", microbatches = 2, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.compute F stage 0 microbatch 1
    dist.transfer send act stage 0 microbatch 1 peer 1
    dist.transfer recv grad stage 1 microbatch 1 peer 1
    dist.compute B stage 0 microbatch 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.compute B stage 0 microbatch 0
  }
  dist.rank 1 {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.transfer recv act stage 0 microbatch 1 peer 0
    dist.compute F stage 1 microbatch 1
    dist.compute B stage 1 microbatch 1
    dist.transfer send grad stage 1 microbatch 1 peer 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
  }
}

// Transfers take their time in flight: rank 1's forward waits for the
// activations to arrive (F 1 + flight 0.5), rank 0's backward for the
// gradient (rank 1 ends its B at 1.5 + 1 + 2 = 4.5, the gradient arrives
// at 4.75), and the send itself does not hold rank 0 up.
// CHECK-LABEL: dist.schedule @in_flight
// CHECK-SAME: makespan = 6.75{{0*}}e+00 : f64
dist.schedule @in_flight {kind = "gpipe", microbatches = 1, ranks = 2, virtual_stages = 1,
                          costs = array<f64: 1.0, 2.0, 0.0, 1.0, 2.0, 0.0>,
                          transfer_costs = array<f64: 0.5, 0.0, 0.0, 0.25>} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.compute B stage 0 microbatch 0
  }
  dist.rank 1 {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
  }
}

// A wait ends when its send's receive has: rank 0 waits for act 0 before F1
// until rank 1 took it (at 1.5, its arrival); rank 1 waits for grad 0 until
// rank 0 took it (5, its arrival), which holds its F1 up by 0.5. Sent bytes
// count from the send to the wait: rank 0 holds act 1 (100 bytes) and two
// stashes (10 each) at once, 1000 + 120 at most; rank 1 a gradient (50)
// and no stash, 2000 + 50. Rank 1's last gradient completes at the end.
// CHECK-LABEL: dist.schedule @waits
// CHECK-SAME: makespan = 1.05{{0*}}e+01 : f64
// CHECK: dist.rank 0 attributes {busy = 6.{{0+}}e+00 : f64, peak_bytes = 1120 : i64, peak_stashed = 2 : i64}
// CHECK: dist.rank 1 attributes {busy = 6.{{0+}}e+00 : f64, peak_bytes = 2050 : i64, peak_stashed = 1 : i64}
dist.schedule @waits {kind = "1f1b", microbatches = 2, ranks = 2, virtual_stages = 1,
                      costs = array<f64: 1.0, 2.0, 0.0, 1.0, 2.0, 0.0>,
                      transfer_costs = array<f64: 0.5, 0.0, 0.0, 0.5>,
                      transfer_bytes = array<i64: 100, 0, 0, 50>,
                      stash_bytes = array<i64: 10, 10>,
                      base_bytes = array<i64: 1000, 2000>} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.transfer wait act stage 0 microbatch 0 peer 1
    dist.compute F stage 0 microbatch 1
    dist.transfer send act stage 0 microbatch 1 peer 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.transfer wait act stage 0 microbatch 1 peer 1
    dist.compute B stage 0 microbatch 0
    dist.transfer recv grad stage 1 microbatch 1 peer 1
    dist.compute B stage 0 microbatch 1
  }
  dist.rank 1 {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
    dist.transfer recv act stage 0 microbatch 1 peer 0
    dist.transfer wait grad stage 1 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 1
    dist.compute B stage 1 microbatch 1
    dist.transfer send grad stage 1 microbatch 1 peer 0
  }
}
