// The action tables of each schedule kind on small pipelines, accepted by
// pcc-verify-schedule, which records the bubble. With unit costs (F = 1,
// B = 2, or B = W = 1 when split), GPipe and 1F1B leave the classical bubble
// (p - 1) / (m + p - 1); interleaving and zero bubble leave less.

// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=gpipe ranks=2 microbatches=2" --pcc-verify-schedule | FileCheck %s --check-prefix=GPIPE
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=1f1b ranks=2 microbatches=4" --pcc-verify-schedule | grep -v "transfer wait" | FileCheck %s --check-prefix=P2M4
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=1f1b ranks=4 microbatches=4" --pcc-verify-schedule | grep -v dist.transfer | FileCheck %s --check-prefix=P4M4
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=1f1b ranks=4 microbatches=2" --pcc-verify-schedule | grep -v dist.transfer | FileCheck %s --check-prefix=P4M2
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=interleaved ranks=2 virtual-stages=2 microbatches=4" --pcc-verify-schedule | grep -v "transfer wait" | FileCheck %s --check-prefix=INTER
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=zb-h1 ranks=2 microbatches=2" --pcc-verify-schedule | grep -v "transfer wait" | FileCheck %s --check-prefix=ZB
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=1f1b ranks=2 microbatches=4 costs=1,2,1,2,3,1 stash-bytes=100,50 base-bytes=1000,2000" --pcc-verify-schedule=remarks=true 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=1f1b ranks=2 microbatches=4 costs=1,2,1,2,3,1 stash-bytes=100,50 base-bytes=1000,2000" --pcc-verify-schedule | FileCheck %s --check-prefix=COSTS
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=1f1b microbatches=3" | FileCheck %s --check-prefix=MESH
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=2bw ranks=2 microbatches=2" --pcc-verify-schedule=remarks=true 2>&1 | grep -v "transfer wait" | FileCheck %s --check-prefix=TWOBW
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=chimera ranks=2 microbatches=2" --pcc-verify-schedule=remarks=true 2>&1 | grep -v "transfer wait" | FileCheck %s --check-prefix=CHIMERA
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=chimera ranks=4 microbatches=8" --pcc-verify-schedule=remarks=true 2>&1 >/dev/null | FileCheck %s --check-prefix=CHIMERA4
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=chimera ranks=8 microbatches=16" --pcc-verify-schedule=remarks=true 2>&1 >/dev/null | FileCheck %s --check-prefix=CHIMERA8
// RUN: pcc-opt %s --pcc-pipeline-schedule="kind=chimera ranks=6 microbatches=8" --pcc-verify-schedule=remarks=true 2>&1 >/dev/null | FileCheck %s --check-prefix=CHIMERA6

dist.mesh @mesh(pp = 3, tp = 2)

// GPipe: every forward, then every backward; a receive right before the
// computation that reads it, a send right after the one that produces it,
// and its wait before the first computation that starts once the send's
// receive has run (in the simulation: rank 1 takes act 0 at time 1, when
// rank 0 starts F1). The last sends complete at the step's end.
// Bubble 1/3.
// GPIPE:      dist.schedule @schedule {bubble_fraction = 0.3333{{[0-9]*}} : f64, kind = "gpipe", makespan = 9.{{0+}}e+00 : f64, microbatches = 2 : i64, ranks = 2 : i64, virtual_stages = 1 : i64} {
// GPIPE-NEXT:   dist.rank 0 attributes {busy = 6.{{0+}}e+00 : f64, peak_stashed = 2 : i64} {
// GPIPE-NEXT:     dist.compute F stage 0 microbatch 0
// GPIPE-NEXT:     dist.transfer send act stage 0 microbatch 0 peer 1
// GPIPE-NEXT:     dist.transfer wait act stage 0 microbatch 0 peer 1
// GPIPE-NEXT:     dist.compute F stage 0 microbatch 1
// GPIPE-NEXT:     dist.transfer send act stage 0 microbatch 1 peer 1
// GPIPE-NEXT:     dist.transfer recv grad stage 1 microbatch 0 peer 1
// GPIPE-NEXT:     dist.transfer wait act stage 0 microbatch 1 peer 1
// GPIPE-NEXT:     dist.compute B stage 0 microbatch 0
// GPIPE-NEXT:     dist.transfer recv grad stage 1 microbatch 1 peer 1
// GPIPE-NEXT:     dist.compute B stage 0 microbatch 1
// GPIPE-NEXT:   }
// GPIPE-NEXT:   dist.rank 1 attributes {busy = 6.{{0+}}e+00 : f64, peak_stashed = 2 : i64} {
// GPIPE-NEXT:     dist.transfer recv act stage 0 microbatch 0 peer 0
// GPIPE-NEXT:     dist.compute F stage 1 microbatch 0
// GPIPE-NEXT:     dist.transfer recv act stage 0 microbatch 1 peer 0
// GPIPE-NEXT:     dist.compute F stage 1 microbatch 1
// GPIPE-NEXT:     dist.compute B stage 1 microbatch 0
// GPIPE-NEXT:     dist.transfer send grad stage 1 microbatch 0 peer 0
// GPIPE-NEXT:     dist.transfer wait grad stage 1 microbatch 0 peer 0
// GPIPE-NEXT:     dist.compute B stage 1 microbatch 1
// GPIPE-NEXT:     dist.transfer send grad stage 1 microbatch 1 peer 0
// GPIPE-NEXT:   }
// GPIPE-NEXT: }

// 1F1B, p = 2, m = 4: one warm-up forward on rank 0, none on rank 1; at most
// p - r microbatches in flight on rank r. Bubble 1/5.
// P2M4:      dist.schedule @schedule {bubble_fraction = 0.19999{{[0-9]*}} : f64, kind = "1f1b", makespan = 1.5{{0+}}e+01 : f64
// P2M4-NEXT:   dist.rank 0 attributes {busy = 1.2{{0+}}e+01 : f64, peak_stashed = 2 : i64} {
// P2M4-NEXT:     dist.compute F stage 0 microbatch 0
// P2M4-NEXT:     dist.transfer send act stage 0 microbatch 0 peer 1
// P2M4-NEXT:     dist.compute F stage 0 microbatch 1
// P2M4-NEXT:     dist.transfer send act stage 0 microbatch 1 peer 1
// P2M4-NEXT:     dist.transfer recv grad stage 1 microbatch 0 peer 1
// P2M4-NEXT:     dist.compute B stage 0 microbatch 0
// P2M4-NEXT:     dist.compute F stage 0 microbatch 2
// P2M4-NEXT:     dist.transfer send act stage 0 microbatch 2 peer 1
// P2M4-NEXT:     dist.transfer recv grad stage 1 microbatch 1 peer 1
// P2M4-NEXT:     dist.compute B stage 0 microbatch 1
// P2M4-NEXT:     dist.compute F stage 0 microbatch 3
// P2M4-NEXT:     dist.transfer send act stage 0 microbatch 3 peer 1
// P2M4-NEXT:     dist.transfer recv grad stage 1 microbatch 2 peer 1
// P2M4-NEXT:     dist.compute B stage 0 microbatch 2
// P2M4-NEXT:     dist.transfer recv grad stage 1 microbatch 3 peer 1
// P2M4-NEXT:     dist.compute B stage 0 microbatch 3
// P2M4-NEXT:   }
// P2M4-NEXT:   dist.rank 1 attributes {busy = 1.2{{0+}}e+01 : f64, peak_stashed = 1 : i64} {
// P2M4-NEXT:     dist.transfer recv act stage 0 microbatch 0 peer 0
// P2M4-NEXT:     dist.compute F stage 1 microbatch 0
// P2M4-NEXT:     dist.compute B stage 1 microbatch 0
// P2M4-NEXT:     dist.transfer send grad stage 1 microbatch 0 peer 0
// P2M4-NEXT:     dist.transfer recv act stage 0 microbatch 1 peer 0
// P2M4-NEXT:     dist.compute F stage 1 microbatch 1
// P2M4-NEXT:     dist.compute B stage 1 microbatch 1
// P2M4-NEXT:     dist.transfer send grad stage 1 microbatch 1 peer 0
// P2M4-NEXT:     dist.transfer recv act stage 0 microbatch 2 peer 0
// P2M4-NEXT:     dist.compute F stage 1 microbatch 2
// P2M4-NEXT:     dist.compute B stage 1 microbatch 2
// P2M4-NEXT:     dist.transfer send grad stage 1 microbatch 2 peer 0
// P2M4-NEXT:     dist.transfer recv act stage 0 microbatch 3 peer 0
// P2M4-NEXT:     dist.compute F stage 1 microbatch 3
// P2M4-NEXT:     dist.compute B stage 1 microbatch 3
// P2M4-NEXT:     dist.transfer send grad stage 1 microbatch 3 peer 0
// P2M4-NEXT:   }
// P2M4-NEXT: }

// 1F1B, p = 4, m = 4 (computations only): 3, 2, 1 and 0 warm-up forwards.
// Bubble 3/7.
// P4M4:      dist.schedule @schedule {bubble_fraction = 0.4285{{[0-9]*}} : f64, kind = "1f1b"
// P4M4-NEXT:   dist.rank 0 attributes {{.*}}peak_stashed = 4
// P4M4-NEXT:     dist.compute F stage 0 microbatch 0
// P4M4-NEXT:     dist.compute F stage 0 microbatch 1
// P4M4-NEXT:     dist.compute F stage 0 microbatch 2
// P4M4-NEXT:     dist.compute F stage 0 microbatch 3
// P4M4-NEXT:     dist.compute B stage 0 microbatch 0
// P4M4-NEXT:     dist.compute B stage 0 microbatch 1
// P4M4-NEXT:     dist.compute B stage 0 microbatch 2
// P4M4-NEXT:     dist.compute B stage 0 microbatch 3
// P4M4-NEXT:   }
// P4M4-NEXT:   dist.rank 1 attributes {{.*}}peak_stashed = 3
// P4M4-NEXT:     dist.compute F stage 1 microbatch 0
// P4M4-NEXT:     dist.compute F stage 1 microbatch 1
// P4M4-NEXT:     dist.compute F stage 1 microbatch 2
// P4M4-NEXT:     dist.compute B stage 1 microbatch 0
// P4M4-NEXT:     dist.compute F stage 1 microbatch 3
// P4M4-NEXT:     dist.compute B stage 1 microbatch 1
// P4M4-NEXT:     dist.compute B stage 1 microbatch 2
// P4M4-NEXT:     dist.compute B stage 1 microbatch 3
// P4M4-NEXT:   }
// P4M4-NEXT:   dist.rank 2 attributes {{.*}}peak_stashed = 2
// P4M4-NEXT:     dist.compute F stage 2 microbatch 0
// P4M4-NEXT:     dist.compute F stage 2 microbatch 1
// P4M4-NEXT:     dist.compute B stage 2 microbatch 0
// P4M4-NEXT:     dist.compute F stage 2 microbatch 2
// P4M4-NEXT:     dist.compute B stage 2 microbatch 1
// P4M4-NEXT:     dist.compute F stage 2 microbatch 3
// P4M4-NEXT:     dist.compute B stage 2 microbatch 2
// P4M4-NEXT:     dist.compute B stage 2 microbatch 3
// P4M4-NEXT:   }
// P4M4-NEXT:   dist.rank 3 attributes {{.*}}peak_stashed = 1
// P4M4-NEXT:     dist.compute F stage 3 microbatch 0
// P4M4-NEXT:     dist.compute B stage 3 microbatch 0
// P4M4-NEXT:     dist.compute F stage 3 microbatch 1
// P4M4-NEXT:     dist.compute B stage 3 microbatch 1
// P4M4-NEXT:     dist.compute F stage 3 microbatch 2
// P4M4-NEXT:     dist.compute B stage 3 microbatch 2
// P4M4-NEXT:     dist.compute F stage 3 microbatch 3
// P4M4-NEXT:     dist.compute B stage 3 microbatch 3
// P4M4-NEXT:   }

// 1F1B with fewer microbatches than ranks (p = 4, m = 2): warm-up is capped
// at m, so ranks 0 and 1 run both forwards first. Bubble 3/5.
// P4M2:      dist.schedule @schedule {bubble_fraction = 6.{{0+}}e-01 : f64, kind = "1f1b"
// P4M2-NEXT:   dist.rank 0 attributes {{.*}}peak_stashed = 2
// P4M2-NEXT:     dist.compute F stage 0 microbatch 0
// P4M2-NEXT:     dist.compute F stage 0 microbatch 1
// P4M2-NEXT:     dist.compute B stage 0 microbatch 0
// P4M2-NEXT:     dist.compute B stage 0 microbatch 1
// P4M2-NEXT:   }
// P4M2-NEXT:   dist.rank 1 attributes {{.*}}peak_stashed = 2
// P4M2-NEXT:     dist.compute F stage 1 microbatch 0
// P4M2-NEXT:     dist.compute F stage 1 microbatch 1
// P4M2-NEXT:     dist.compute B stage 1 microbatch 0
// P4M2-NEXT:     dist.compute B stage 1 microbatch 1
// P4M2-NEXT:   }
// P4M2-NEXT:   dist.rank 2 attributes {{.*}}peak_stashed = 2
// P4M2-NEXT:     dist.compute F stage 2 microbatch 0
// P4M2-NEXT:     dist.compute F stage 2 microbatch 1
// P4M2-NEXT:     dist.compute B stage 2 microbatch 0
// P4M2-NEXT:     dist.compute B stage 2 microbatch 1
// P4M2-NEXT:   }
// P4M2-NEXT:   dist.rank 3 attributes {{.*}}peak_stashed = 1
// P4M2-NEXT:     dist.compute F stage 3 microbatch 0
// P4M2-NEXT:     dist.compute B stage 3 microbatch 0
// P4M2-NEXT:     dist.compute F stage 3 microbatch 1
// P4M2-NEXT:     dist.compute B stage 3 microbatch 1
// P4M2-NEXT:   }

// Megatron's interleaved 1F1B, p = 2, v = 2 (rank 0 holds stages 0 and 2,
// rank 1 stages 1 and 3), m = 4: microbatches go through a chunk two at a
// time; warm-up is (p - r - 1) * 2 + (v - 1) * p = 4 and 2 steps. Rank 1
// feeds rank 0's second chunk, so activations and gradients share each
// channel, in the same order on both ends. Bubble 1/9, below 1F1B's 1/5.
// INTER:      dist.schedule @schedule {bubble_fraction = 0.1111{{[0-9]*}} : f64, kind = "interleaved", makespan = 2.7{{0+}}e+01 : f64, microbatches = 4 : i64, ranks = 2 : i64, virtual_stages = 2 : i64} {
// INTER-NEXT:   dist.rank 0 attributes {busy = 2.4{{0+}}e+01 : f64, peak_stashed = 5 : i64} {
// INTER-NEXT:     dist.compute F stage 0 microbatch 0
// INTER-NEXT:     dist.transfer send act stage 0 microbatch 0 peer 1
// INTER-NEXT:     dist.compute F stage 0 microbatch 1
// INTER-NEXT:     dist.transfer send act stage 0 microbatch 1 peer 1
// INTER-NEXT:     dist.transfer recv act stage 1 microbatch 0 peer 1
// INTER-NEXT:     dist.compute F stage 2 microbatch 0
// INTER-NEXT:     dist.transfer send act stage 2 microbatch 0 peer 1
// INTER-NEXT:     dist.transfer recv act stage 1 microbatch 1 peer 1
// INTER-NEXT:     dist.compute F stage 2 microbatch 1
// INTER-NEXT:     dist.transfer send act stage 2 microbatch 1 peer 1
// INTER-NEXT:     dist.compute F stage 0 microbatch 2
// INTER-NEXT:     dist.transfer send act stage 0 microbatch 2 peer 1
// INTER-NEXT:     dist.transfer recv grad stage 3 microbatch 0 peer 1
// INTER-NEXT:     dist.compute B stage 2 microbatch 0
// INTER-NEXT:     dist.transfer send grad stage 2 microbatch 0 peer 1
// INTER-NEXT:     dist.compute F stage 0 microbatch 3
// INTER-NEXT:     dist.transfer send act stage 0 microbatch 3 peer 1
// INTER-NEXT:     dist.transfer recv grad stage 3 microbatch 1 peer 1
// INTER-NEXT:     dist.compute B stage 2 microbatch 1
// INTER-NEXT:     dist.transfer send grad stage 2 microbatch 1 peer 1
// INTER-NEXT:     dist.transfer recv act stage 1 microbatch 2 peer 1
// INTER-NEXT:     dist.compute F stage 2 microbatch 2
// INTER-NEXT:     dist.transfer send act stage 2 microbatch 2 peer 1
// INTER-NEXT:     dist.transfer recv grad stage 1 microbatch 0 peer 1
// INTER-NEXT:     dist.compute B stage 0 microbatch 0
// INTER-NEXT:     dist.transfer recv act stage 1 microbatch 3 peer 1
// INTER-NEXT:     dist.compute F stage 2 microbatch 3
// INTER-NEXT:     dist.transfer send act stage 2 microbatch 3 peer 1
// INTER-NEXT:     dist.transfer recv grad stage 1 microbatch 1 peer 1
// INTER-NEXT:     dist.compute B stage 0 microbatch 1
// INTER-NEXT:     dist.transfer recv grad stage 3 microbatch 2 peer 1
// INTER-NEXT:     dist.compute B stage 2 microbatch 2
// INTER-NEXT:     dist.transfer send grad stage 2 microbatch 2 peer 1
// INTER-NEXT:     dist.transfer recv grad stage 3 microbatch 3 peer 1
// INTER-NEXT:     dist.compute B stage 2 microbatch 3
// INTER-NEXT:     dist.transfer send grad stage 2 microbatch 3 peer 1
// INTER-NEXT:     dist.transfer recv grad stage 1 microbatch 2 peer 1
// INTER-NEXT:     dist.compute B stage 0 microbatch 2
// INTER-NEXT:     dist.transfer recv grad stage 1 microbatch 3 peer 1
// INTER-NEXT:     dist.compute B stage 0 microbatch 3
// INTER-NEXT:   }
// INTER-NEXT:   dist.rank 1 attributes {busy = 2.4{{0+}}e+01 : f64, peak_stashed = 3 : i64} {
// INTER-NEXT:     dist.transfer recv act stage 0 microbatch 0 peer 0
// INTER-NEXT:     dist.compute F stage 1 microbatch 0
// INTER-NEXT:     dist.transfer send act stage 1 microbatch 0 peer 0
// INTER-NEXT:     dist.transfer recv act stage 0 microbatch 1 peer 0
// INTER-NEXT:     dist.compute F stage 1 microbatch 1
// INTER-NEXT:     dist.transfer send act stage 1 microbatch 1 peer 0
// INTER-NEXT:     dist.transfer recv act stage 2 microbatch 0 peer 0
// INTER-NEXT:     dist.compute F stage 3 microbatch 0
// INTER-NEXT:     dist.compute B stage 3 microbatch 0
// INTER-NEXT:     dist.transfer send grad stage 3 microbatch 0 peer 0
// INTER-NEXT:     dist.transfer recv act stage 2 microbatch 1 peer 0
// INTER-NEXT:     dist.compute F stage 3 microbatch 1
// INTER-NEXT:     dist.compute B stage 3 microbatch 1
// INTER-NEXT:     dist.transfer send grad stage 3 microbatch 1 peer 0
// INTER-NEXT:     dist.transfer recv act stage 0 microbatch 2 peer 0
// INTER-NEXT:     dist.compute F stage 1 microbatch 2
// INTER-NEXT:     dist.transfer send act stage 1 microbatch 2 peer 0
// INTER-NEXT:     dist.transfer recv grad stage 2 microbatch 0 peer 0
// INTER-NEXT:     dist.compute B stage 1 microbatch 0
// INTER-NEXT:     dist.transfer send grad stage 1 microbatch 0 peer 0
// INTER-NEXT:     dist.transfer recv act stage 0 microbatch 3 peer 0
// INTER-NEXT:     dist.compute F stage 1 microbatch 3
// INTER-NEXT:     dist.transfer send act stage 1 microbatch 3 peer 0
// INTER-NEXT:     dist.transfer recv grad stage 2 microbatch 1 peer 0
// INTER-NEXT:     dist.compute B stage 1 microbatch 1
// INTER-NEXT:     dist.transfer send grad stage 1 microbatch 1 peer 0
// INTER-NEXT:     dist.transfer recv act stage 2 microbatch 2 peer 0
// INTER-NEXT:     dist.compute F stage 3 microbatch 2
// INTER-NEXT:     dist.compute B stage 3 microbatch 2
// INTER-NEXT:     dist.transfer send grad stage 3 microbatch 2 peer 0
// INTER-NEXT:     dist.transfer recv act stage 2 microbatch 3 peer 0
// INTER-NEXT:     dist.compute F stage 3 microbatch 3
// INTER-NEXT:     dist.compute B stage 3 microbatch 3
// INTER-NEXT:     dist.transfer send grad stage 3 microbatch 3 peer 0
// INTER-NEXT:     dist.transfer recv grad stage 2 microbatch 2 peer 0
// INTER-NEXT:     dist.compute B stage 1 microbatch 2
// INTER-NEXT:     dist.transfer send grad stage 1 microbatch 2 peer 0
// INTER-NEXT:     dist.transfer recv grad stage 2 microbatch 3 peer 0
// INTER-NEXT:     dist.compute B stage 1 microbatch 3
// INTER-NEXT:     dist.transfer send grad stage 1 microbatch 3 peer 0
// INTER-NEXT:   }
// INTER-NEXT: }

// Zero bubble H1, p = 2, m = 2: W split off and run where the ranks would
// wait; never more than p - r microbatches stashed (1F1B's peaks, 2 and 1).
// Bubble 1/4, below 1F1B's 1/3 for the same work.
// ZB:      dist.schedule @schedule {bubble_fraction = 2.5{{0+}}e-01 : f64, kind = "zb-h1", makespan = 8.{{0+}}e+00 : f64, microbatches = 2 : i64, ranks = 2 : i64, virtual_stages = 1 : i64} {
// ZB-NEXT:   dist.rank 0 attributes {busy = 6.{{0+}}e+00 : f64, peak_stashed = 2 : i64} {
// ZB-NEXT:     dist.compute F stage 0 microbatch 0
// ZB-NEXT:     dist.transfer send act stage 0 microbatch 0 peer 1
// ZB-NEXT:     dist.compute F stage 0 microbatch 1
// ZB-NEXT:     dist.transfer send act stage 0 microbatch 1 peer 1
// ZB-NEXT:     dist.transfer recv grad stage 1 microbatch 0 peer 1
// ZB-NEXT:     dist.compute B stage 0 microbatch 0
// ZB-NEXT:     dist.compute W stage 0 microbatch 0
// ZB-NEXT:     dist.transfer recv grad stage 1 microbatch 1 peer 1
// ZB-NEXT:     dist.compute B stage 0 microbatch 1
// ZB-NEXT:     dist.compute W stage 0 microbatch 1
// ZB-NEXT:   }
// ZB-NEXT:   dist.rank 1 attributes {busy = 6.{{0+}}e+00 : f64, peak_stashed = 1 : i64} {
// ZB-NEXT:     dist.transfer recv act stage 0 microbatch 0 peer 0
// ZB-NEXT:     dist.compute F stage 1 microbatch 0
// ZB-NEXT:     dist.compute B stage 1 microbatch 0
// ZB-NEXT:     dist.transfer send grad stage 1 microbatch 0 peer 0
// ZB-NEXT:     dist.compute W stage 1 microbatch 0
// ZB-NEXT:     dist.transfer recv act stage 0 microbatch 1 peer 0
// ZB-NEXT:     dist.compute F stage 1 microbatch 1
// ZB-NEXT:     dist.compute B stage 1 microbatch 1
// ZB-NEXT:     dist.transfer send grad stage 1 microbatch 1 peer 0
// ZB-NEXT:     dist.compute W stage 1 microbatch 1
// ZB-NEXT:   }
// ZB-NEXT: }

// Costs in seconds (stage 0: F 1, B 2, W 1; stage 1: F 2, B 3, W 1; B
// includes W when not split) and bytes: rank 1 computes 24 s of the 28,
// rank 0 16; rank 0 holds 1000 bytes and up to two stashed microbatches of
// 100, rank 1 2000 and one of 50.
// REMARK: remark: schedule @schedule (1f1b, 2 ranks, 4 microbatches): bubble 28.6%, makespan 28; rank 0 busy 16, peak 2 stashed, 1200 bytes; rank 1 busy 24, peak 1 stashed, 2050 bytes
// COSTS: dist.schedule @schedule {base_bytes = array<i64: 1000, 2000>, bubble_fraction = 0.2857{{[0-9]*}} : f64, costs = array<f64: 1.{{0+}}e+00, 2.{{0+}}e+00, 1.{{0+}}e+00, 2.{{0+}}e+00, 3.{{0+}}e+00, 1.{{0+}}e+00>, kind = "1f1b", makespan = 2.8{{0+}}e+01 : f64, microbatches = 4 : i64, ranks = 2 : i64, stash_bytes = array<i64: 100, 50>, virtual_stages = 1 : i64} {
// COSTS-NEXT: dist.rank 0 attributes {busy = 1.6{{0+}}e+01 : f64, peak_bytes = 1200 : i64, peak_stashed = 2 : i64} {
// COSTS: dist.rank 1 attributes {busy = 2.4{{0+}}e+01 : f64, peak_bytes = 2050 : i64, peak_stashed = 1 : i64} {

// Without ranks, the pipeline ranks are the mesh's pp axis.
// MESH: dist.mesh @mesh(pp = 3, tp = 2)
// MESH: dist.schedule @schedule {kind = "1f1b", microbatches = 3 : i64, ranks = 3 : i64, virtual_stages = 1 : i64} {
// MESH: dist.rank 0 {
// MESH: dist.rank 1 {
// MESH: dist.rank 2 {

// PipeDream-2BW, p = 2, m = 2: 1F1B over two steps' microbatches (0-1 and
// 2-3) without a flush between them; rank 0 leads by one forward. The
// lowering cuts the table into the fill (rank 0's F0), the steady call
// (rank 0: F1 B0 F2 B1, F2 being the next step's first; rank 1: F0 B0 F1
// B1, and the activation of the next step's first microbatch) and the
// drain. Once full, a step takes 8 units with every rank starting it at
// once: bubble 1/4, against 1F1B's 1/3 at the same p and m.
// TWOBW:      remark: schedule @schedule (2bw, 2 ranks, 2 microbatches a step, no flush between steps): once full, a step's bubble 25.0%, makespan 8; rank 0 busy 6, peak 2 stashed; rank 1 busy 6, peak 1 stashed
// TWOBW:      dist.schedule @schedule {bubble_fraction = 2.5{{0+}}e-01 : f64, kind = "2bw", makespan = 8.{{0+}}e+00 : f64, microbatches = 2 : i64, ranks = 2 : i64, steps = 2 : i64, virtual_stages = 1 : i64} {
// TWOBW-NEXT:   dist.rank 0 attributes {busy = 6.{{0+}}e+00 : f64, lead = 1 : i64, peak_stashed = 2 : i64} {
// TWOBW-NEXT:     dist.compute F stage 0 microbatch 0
// TWOBW-NEXT:     dist.transfer send act stage 0 microbatch 0 peer 1
// TWOBW-NEXT:     dist.compute F stage 0 microbatch 1
// TWOBW-NEXT:     dist.transfer send act stage 0 microbatch 1 peer 1
// TWOBW-NEXT:     dist.transfer recv grad stage 1 microbatch 0 peer 1
// TWOBW-NEXT:     dist.compute B stage 0 microbatch 0
// TWOBW-NEXT:     dist.compute F stage 0 microbatch 2
// TWOBW-NEXT:     dist.transfer send act stage 0 microbatch 2 peer 1
// TWOBW-NEXT:     dist.transfer recv grad stage 1 microbatch 1 peer 1
// TWOBW-NEXT:     dist.compute B stage 0 microbatch 1
// TWOBW-NEXT:     dist.compute F stage 0 microbatch 3
// TWOBW-NEXT:     dist.transfer send act stage 0 microbatch 3 peer 1
// TWOBW-NEXT:     dist.transfer recv grad stage 1 microbatch 2 peer 1
// TWOBW-NEXT:     dist.compute B stage 0 microbatch 2
// TWOBW-NEXT:     dist.transfer recv grad stage 1 microbatch 3 peer 1
// TWOBW-NEXT:     dist.compute B stage 0 microbatch 3
// TWOBW-NEXT:   }
// TWOBW-NEXT:   dist.rank 1 attributes {busy = 6.{{0+}}e+00 : f64, lead = 0 : i64, peak_stashed = 1 : i64} {
// TWOBW-NEXT:     dist.transfer recv act stage 0 microbatch 0 peer 0
// TWOBW-NEXT:     dist.compute F stage 1 microbatch 0
// TWOBW-NEXT:     dist.compute B stage 1 microbatch 0
// TWOBW-NEXT:     dist.transfer send grad stage 1 microbatch 0 peer 0
// TWOBW-NEXT:     dist.transfer recv act stage 0 microbatch 1 peer 0
// TWOBW-NEXT:     dist.compute F stage 1 microbatch 1
// TWOBW-NEXT:     dist.compute B stage 1 microbatch 1
// TWOBW-NEXT:     dist.transfer send grad stage 1 microbatch 1 peer 0
// TWOBW-NEXT:     dist.transfer recv act stage 0 microbatch 2 peer 0
// TWOBW-NEXT:     dist.compute F stage 1 microbatch 2
// TWOBW-NEXT:     dist.compute B stage 1 microbatch 2
// TWOBW-NEXT:     dist.transfer send grad stage 1 microbatch 2 peer 0
// TWOBW-NEXT:     dist.transfer recv act stage 0 microbatch 3 peer 0
// TWOBW-NEXT:     dist.compute F stage 1 microbatch 3
// TWOBW-NEXT:     dist.compute B stage 1 microbatch 3
// TWOBW-NEXT:     dist.transfer send grad stage 1 microbatch 3 peer 0
// TWOBW-NEXT:   }
// TWOBW-NEXT: }

// Chimera, p = 2, m = 2: microbatch 0 flows down (stage 0 on rank 0, stage
// 1 on rank 1), microbatch 1 up (stage 0 on rank 1, stage 1 on rank 0).
// Each rank runs the other pipeline's last stage while it waits for its
// own pipeline's gradient: no bubble, against 1F1B's 1/3.
// CHIMERA:      remark: schedule @schedule (chimera, 2 ranks, 2 microbatches): bubble 0.0%, makespan 6; rank 0 busy 6, peak 2 stashed; rank 1 busy 6, peak 2 stashed
// CHIMERA:      dist.schedule @schedule {bubble_fraction = 0.{{0+}}e+00 : f64, kind = "chimera", makespan = 6.{{0+}}e+00 : f64, microbatches = 2 : i64, pipelines = 2 : i64, ranks = 2 : i64, virtual_stages = 1 : i64} {
// CHIMERA-NEXT:   dist.rank 0 attributes {busy = 6.{{0+}}e+00 : f64, peak_stashed = 2 : i64} {
// CHIMERA-NEXT:     dist.compute F stage 0 microbatch 0
// CHIMERA-NEXT:     dist.transfer send act stage 0 microbatch 0 peer 1
// CHIMERA-NEXT:     dist.transfer recv act stage 0 microbatch 1 peer 1
// CHIMERA-NEXT:     dist.compute F stage 1 microbatch 1
// CHIMERA-NEXT:     dist.compute B stage 1 microbatch 1
// CHIMERA-NEXT:     dist.transfer send grad stage 1 microbatch 1 peer 1
// CHIMERA-NEXT:     dist.transfer recv grad stage 1 microbatch 0 peer 1
// CHIMERA-NEXT:     dist.compute B stage 0 microbatch 0
// CHIMERA-NEXT:   }
// CHIMERA-NEXT:   dist.rank 1 attributes {busy = 6.{{0+}}e+00 : f64, peak_stashed = 2 : i64} {
// CHIMERA-NEXT:     dist.compute F stage 0 microbatch 1
// CHIMERA-NEXT:     dist.transfer send act stage 0 microbatch 1 peer 0
// CHIMERA-NEXT:     dist.transfer recv act stage 0 microbatch 0 peer 0
// CHIMERA-NEXT:     dist.compute F stage 1 microbatch 0
// CHIMERA-NEXT:     dist.compute B stage 1 microbatch 0
// CHIMERA-NEXT:     dist.transfer send grad stage 1 microbatch 0 peer 0
// CHIMERA-NEXT:     dist.transfer recv grad stage 1 microbatch 1 peer 0
// CHIMERA-NEXT:     dist.compute B stage 0 microbatch 1
// CHIMERA-NEXT:   }
// CHIMERA-NEXT: }

// p = 4, m = 8: the two pipelines' activations and gradients between two
// ranks cross; each rank sends in the order its peer receives, and the
// bubble is about half of 1F1B's 3/11 (forwards first, each stage s
// within 1F1B's p - s chunks in flight; the backwards-first order's is
// 17.2%).
// CHIMERA4: remark: schedule @schedule (chimera, 4 ranks, 8 microbatches): bubble 14.3%, makespan 28; rank 0 busy 24, peak 5 stashed; rank 1 busy 24, peak 5 stashed; rank 2 busy 24, peak 5 stashed; rank 3 busy 24, peak 5 stashed

// p = 8, m = 16: forwards first keeps each rank's two stages within
// p + 1 chunks in flight (1F1B's peak is p) and leaves 20% against
// 1F1B's 30.4% (the backwards-first order's: 26.2%, with 11 chunks in
// flight).
// CHIMERA8: remark: schedule @schedule (chimera, 8 ranks, 16 microbatches): bubble 20.0%, makespan 60; rank 0 busy 48, peak 9 stashed
// CHIMERA8-SAME: rank 7 busy 48, peak 9 stashed{{$}}

// p = 6, m = 8: backwards first finishes first here (forwards first:
// 22.6%), so its order is kept, with 8 chunks in flight on the middle
// ranks.
// CHIMERA6: remark: schedule @schedule (chimera, 6 ranks, 8 microbatches): bubble 20.0%, makespan 30; rank 0 busy 24, peak 5 stashed; rank 1 busy 24, peak 6 stashed; rank 2 busy 24, peak 8 stashed
