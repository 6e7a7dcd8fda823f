// Options no schedule fits are one-line errors at the module.
// RUN: pcc-opt %s --pcc-pipeline-schedule --split-input-file -verify-diagnostics
// RUN: not pcc-opt %s --split-input-file --pcc-pipeline-schedule="kind=interleaved ranks=4 virtual-stages=2 microbatches=6" 2>&1 | FileCheck %s --check-prefix=MULTIPLE
// RUN: not pcc-opt %s --split-input-file --pcc-pipeline-schedule="kind=pipedream ranks=2" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not pcc-opt %s --split-input-file --pcc-pipeline-schedule="kind=1f1b ranks=2 virtual-stages=2" 2>&1 | FileCheck %s --check-prefix=CHUNKS
// RUN: not pcc-opt %s --split-input-file --pcc-pipeline-schedule="kind=interleaved ranks=2 microbatches=2" 2>&1 | FileCheck %s --check-prefix=ONECHUNK
// RUN: not pcc-opt %s --split-input-file --pcc-pipeline-schedule="ranks=2 microbatches=0" 2>&1 | FileCheck %s --check-prefix=MICRO
// RUN: not pcc-opt %s --split-input-file --pcc-pipeline-schedule="ranks=2 costs=1,2,1" 2>&1 | FileCheck %s --check-prefix=COSTS
// RUN: not pcc-opt %s --split-input-file --pcc-pipeline-schedule="kind=2bw ranks=4 microbatches=2" 2>&1 | FileCheck %s --check-prefix=TWOBW
// RUN: not pcc-opt %s --split-input-file --pcc-pipeline-schedule="kind=chimera ranks=3 microbatches=2" 2>&1 | FileCheck %s --check-prefix=CHIMERA-RANKS
// RUN: not pcc-opt %s --split-input-file --pcc-pipeline-schedule="kind=chimera ranks=2 microbatches=3" 2>&1 | FileCheck %s --check-prefix=CHIMERA-MICRO

// Each error is reported once per module (two modules below).
// MULTIPLE-COUNT-2: error: the interleaved schedule needs the microbatches to be a multiple of the pipeline ranks (4); got 6
// KIND-COUNT-2: error: unknown pipeline schedule 'pipedream'; expected gpipe, 1f1b, interleaved, zb-h1, 2bw or chimera
// CHUNKS-COUNT-2: error: the 1f1b schedule has 1 virtual stage per rank; got 2 (interleaved takes more)
// ONECHUNK-COUNT-2: error: the interleaved schedule needs at least 2 virtual stages per rank; got 1 (1f1b takes 1)
// MICRO-COUNT-2: error: a pipeline schedule needs at least 1 microbatch; got 0
// COSTS-COUNT-2: error: costs has 3 values; expected F, B and W times for each of the 2 virtual stages (6)
// CHIMERA-RANKS-COUNT-2: error: the chimera schedule needs an even number of pipeline ranks and of microbatches (one pipeline each way); got 3 ranks and 2 microbatches
// CHIMERA-MICRO-COUNT-2: error: the chimera schedule needs an even number of pipeline ranks and of microbatches (one pipeline each way); got 2 ranks and 3 microbatches
// TWOBW-COUNT-2: error: the 2bw schedule needs at least 3 microbatches for 4 pipeline ranks (the first rank's forwards run that far into the next step); got 2

// ranks=0 (the default) reads the mesh's pp axis.
// expected-error @+1 {{ranks=0 takes the pipeline ranks from axis 'pp' of dist.mesh @mesh, which the module does not have}}
module {
}

// -----

// expected-error @+1 {{ranks=0 takes the pipeline ranks from axis 'pp' of dist.mesh @mesh, which the module does not have}}
module {
  dist.mesh @mesh(tp = 2)
}
