// RUN: pcc-opt %s --pcc-verify-schedule --split-input-file -verify-diagnostics

// Hand-broken versions of the two-rank, one-microbatch table:
//   rank 0: F 0, send act 0, recv grad 1, B 0
//   rank 1: recv act 0, F 1, B 1, send grad 1

// A missing action is reported at the rank that should run it.
dist.schedule @missing {kind = "gpipe", microbatches = 1, ranks = 2, virtual_stages = 1} {
  // expected-error @+1 {{rank 0 never runs B stage 0 microbatch 0}}
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
  }
  dist.rank 1 {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
  }
}

// -----

dist.schedule @duplicate {kind = "gpipe", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    // expected-error @+1 {{F stage 0 microbatch 0 appears twice}}
    dist.compute F stage 0 microbatch 0
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

// -----

dist.schedule @backward_first {kind = "gpipe", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.compute B stage 0 microbatch 0
  }
  dist.rank 1 {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    // expected-error @+1 {{B stage 1 microbatch 0 needs F stage 1 microbatch 0 earlier on rank 1}}
    dist.compute B stage 1 microbatch 0
    dist.compute F stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
  }
}

// -----

dist.schedule @forward_before_recv {kind = "gpipe", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.compute B stage 0 microbatch 0
  }
  dist.rank 1 {
    // expected-error @+1 {{F stage 1 microbatch 0 needs recv act stage 0 microbatch 0 from rank 0 earlier on rank 1}}
    dist.compute F stage 1 microbatch 0
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
  }
}

// -----

// Without its receive, the send is what is wrong (F stage 1 also lacks its
// input, but the channel says more).
dist.schedule @send_without_recv {kind = "gpipe", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    // expected-error @+1 {{send act stage 0 microbatch 0 to rank 1 has no matching recv on rank 1}}
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.compute B stage 0 microbatch 0
  }
  dist.rank 1 {
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
  }
}

// -----

dist.schedule @recv_without_send {kind = "gpipe", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    // expected-error @+1 {{recv grad stage 1 microbatch 0 from rank 1 has no matching send on rank 1}}
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.compute B stage 0 microbatch 0
  }
  dist.rank 1 {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
  }
}

// -----

// Two microbatches received in the opposite order they were sent.
dist.schedule @recv_order {kind = "gpipe", microbatches = 2, ranks = 2, virtual_stages = 1} {
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
    // expected-error @+1 {{recv act stage 0 microbatch 1 from rank 0 is receive #1 from rank 0, whose send #1 to rank 1 is send act stage 0 microbatch 0 to rank 1: receives must follow the order of the sends}}
    dist.transfer recv act stage 0 microbatch 1 peer 0
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.compute F stage 1 microbatch 1
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
    dist.compute B stage 1 microbatch 1
    dist.transfer send grad stage 1 microbatch 1 peer 0
  }
}

// -----

// Each rank receives before it sends what the other waits for: every
// dependency holds within each rank, yet neither can move.
dist.schedule @deadlock {kind = "gpipe", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    // expected-error @+1 {{the schedule deadlocks: rank 0 waits at recv grad stage 1 microbatch 0 from rank 1; rank 1 waits at recv act stage 0 microbatch 0 from rank 0}}
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.compute B stage 0 microbatch 0
  }
  dist.rank 1 {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
  }
}

// -----

// A W before its B.
dist.schedule @w_before_b {kind = "zb-h1", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    // expected-error @+1 {{W stage 0 microbatch 0 needs B stage 0 microbatch 0 earlier on rank 0}}
    dist.compute W stage 0 microbatch 0
    dist.compute B stage 0 microbatch 0
  }
  dist.rank 1 {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
    dist.compute W stage 1 microbatch 0
  }
}

// -----

// A W without its B anywhere.
dist.schedule @w_without_b {kind = "zb-h1", microbatches = 1, ranks = 1, virtual_stages = 1} {
  // expected-error @+1 {{rank 0 never runs B stage 0 microbatch 0}}
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.compute W stage 0 microbatch 0
  }
}

// -----

// Once one W appears, the backwards are split: every B needs its W.
dist.schedule @b_without_w {kind = "zb-h1", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.compute B stage 0 microbatch 0
    dist.compute W stage 0 microbatch 0
  }
  // expected-error @+1 {{rank 1 never runs W stage 1 microbatch 0 (the schedule splits backwards: every B needs its W)}}
  dist.rank 1 {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
  }
}

// -----

// The op verifier already rejects a stage on the wrong rank.
dist.schedule @wrong_rank {kind = "gpipe", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    // expected-error @+1 {{'dist.compute' op stage 1 is on rank 1, not on rank 0}}
    dist.compute F stage 1 microbatch 0
  }
  dist.rank 1 {
  }
}

// -----

// A wait comes after its send.
dist.schedule @wait_first {kind = "gpipe", microbatches = 1, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    // expected-error @+1 {{wait act stage 0 microbatch 0 to rank 1 needs send act stage 0 microbatch 0 to rank 1 earlier on rank 0}}
    dist.transfer wait act stage 0 microbatch 0 peer 1
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

// -----

// Each rank waits for a send whose receive comes after the other's wait.
dist.schedule @waits_deadlock {kind = "1f1b", microbatches = 2, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.compute F stage 0 microbatch 1
    dist.transfer send act stage 0 microbatch 1 peer 1
    // expected-error @+1 {{the schedule deadlocks: rank 0 waits at wait act stage 0 microbatch 1 to rank 1; rank 1 waits at wait grad stage 1 microbatch 0 to rank 0}}
    dist.transfer wait act stage 0 microbatch 1 peer 1
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
    dist.transfer wait grad stage 1 microbatch 0 peer 0
    dist.transfer recv act stage 0 microbatch 1 peer 0
    dist.compute F stage 1 microbatch 1
    dist.compute B stage 1 microbatch 1
    dist.transfer send grad stage 1 microbatch 1 peer 0
  }
}

// -----

// A table of two steps without a flush (2bw, p = 2, m = 2) whose rank 1
// claims a lead of 2: its fill would run F 1 of the first step, whose
// activation rank 0 sends only in its steady call. The sequences of calls a
// run makes are checked as schedules, and the fill followed by the drain
// (a step with a flush) lacks the receive.
dist.schedule @two_steps_lead {kind = "2bw", microbatches = 2 : i64, ranks = 2 : i64, steps = 2 : i64, virtual_stages = 1 : i64} {
  dist.rank 0 attributes {lead = 1 : i64} {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.transfer wait act stage 0 microbatch 0 peer 1
    dist.compute F stage 0 microbatch 1
    dist.transfer send act stage 0 microbatch 1 peer 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.transfer wait act stage 0 microbatch 1 peer 1
    dist.compute B stage 0 microbatch 0
    dist.compute F stage 0 microbatch 2
    dist.transfer send act stage 0 microbatch 2 peer 1
    dist.transfer recv grad stage 1 microbatch 1 peer 1
    dist.transfer wait act stage 0 microbatch 2 peer 1
    dist.compute B stage 0 microbatch 1
    dist.compute F stage 0 microbatch 3
    dist.transfer send act stage 0 microbatch 3 peer 1
    dist.transfer recv grad stage 1 microbatch 2 peer 1
    dist.transfer wait act stage 0 microbatch 3 peer 1
    dist.compute B stage 0 microbatch 2
    dist.transfer recv grad stage 1 microbatch 3 peer 1
    dist.compute B stage 0 microbatch 3
  }
  dist.rank 1 attributes {lead = 2 : i64} {
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
    dist.transfer recv act stage 0 microbatch 1 peer 0
    dist.transfer wait grad stage 1 microbatch 0 peer 0
    // expected-error @+1 {{a step from the fill and the drain: F stage 1 microbatch 1 needs recv act stage 0 microbatch 1 from rank 0 earlier on rank 1}}
    dist.compute F stage 1 microbatch 1
    dist.compute B stage 1 microbatch 1
    dist.transfer send grad stage 1 microbatch 1 peer 0
    dist.transfer recv act stage 0 microbatch 2 peer 0
    dist.transfer wait grad stage 1 microbatch 1 peer 0
    dist.compute F stage 1 microbatch 2
    dist.compute B stage 1 microbatch 2
    dist.transfer send grad stage 1 microbatch 2 peer 0
    dist.transfer recv act stage 0 microbatch 3 peer 0
    dist.transfer wait grad stage 1 microbatch 2 peer 0
    dist.compute F stage 1 microbatch 3
    dist.compute B stage 1 microbatch 3
    dist.transfer send grad stage 1 microbatch 3 peer 0
  }
}

// -----

// Chimera's two pipelines (p = 2, m = 2) cross between the same two ranks:
// rank 0 sends microbatch 0's activation down and microbatch 1's gradient
// up to rank 1, which must take them in that order (transfers between two
// ranks match in order). Here rank 1 asks for the gradient first.
dist.schedule @crossed {kind = "chimera", microbatches = 2, pipelines = 2, ranks = 2, virtual_stages = 1} {
  dist.rank 0 {
    dist.compute F stage 0 microbatch 0
    dist.transfer send act stage 0 microbatch 0 peer 1
    dist.transfer recv act stage 0 microbatch 1 peer 1
    dist.compute F stage 1 microbatch 1
    dist.compute B stage 1 microbatch 1
    dist.transfer send grad stage 1 microbatch 1 peer 1
    dist.transfer recv grad stage 1 microbatch 0 peer 1
    dist.compute B stage 0 microbatch 0
  }
  dist.rank 1 {
    dist.compute F stage 0 microbatch 1
    dist.transfer send act stage 0 microbatch 1 peer 0
    // expected-error @+1 {{recv grad stage 1 microbatch 1 from rank 0 is receive #1 from rank 0, whose send #1 to rank 1 is send act stage 0 microbatch 0 to rank 1: receives must follow the order of the sends}}
    dist.transfer recv grad stage 1 microbatch 1 peer 0
    dist.transfer recv act stage 0 microbatch 0 peer 0
    dist.compute F stage 1 microbatch 0
    dist.compute B stage 1 microbatch 0
    dist.transfer send grad stage 1 microbatch 0 peer 0
    dist.compute B stage 0 microbatch 1
  }
}
