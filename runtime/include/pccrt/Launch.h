//===- Launch.h - Starting and watching the ranks of a program --*- C++ -*-===//
//
// A program of several ranks runs as one process per rank. A launcher
// (Open MPI's mpirun, Slurm's srun) may have started this process as one of
// them; if not, launchRanks starts them under mpirun on this host and
// watches them, so that the failure of one rank ends them all with one
// line that says which rank failed and where the others were.
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_LAUNCH_H
#define PCCRT_LAUNCH_H

#include <cstdint>
#include <string>
#include <vector>

namespace pccrt {

/// True when a launcher started this process as one rank of a job: Open
/// MPI's mpirun (OMPI_COMM_WORLD_SIZE), a PMI process manager (PMI_SIZE) or
/// Slurm's srun (SLURM_PROCID and SLURM_NTASKS in a job step, not in the
/// batch script). \p worldSize receives the number of ranks it started.
bool startedByLauncher(int64_t *worldSize);

struct LaunchOptions {
  int64_t ranks = 1;
  /// What every rank runs: an absolute executable path, then its arguments.
  std::vector<std::string> command;
  /// How long one rank may wait in one operation. The ranks' watchdogs
  /// enforce it; the launcher stops the job if one has not 10 s later.
  double timeoutSeconds = 300;
  /// On an interrupt (SIGINT, SIGTERM), pass it to the ranks and give them
  /// this many seconds to end on their own (a run that saves its
  /// checkpoint when interrupted) before ending the job; 0: end it at once.
  double graceSeconds = 0;
};

/// Runs options.command as options.ranks ranks under mpirun (found on
/// PATH) on this host, each with a status file in $PCCRT_STATUS_DIR
/// (RankMonitor::forRank). Rank 0's output and the ranks' own error lines
/// appear as they come; mpirun's messages and Open MPI's backtraces do not.
/// Returns 0 if every rank succeeded. Otherwise returns 1, with no process
/// of the job left running, and \p errors holds one line per failure that
/// no rank printed: an error a rank left to the launcher (once, prefixed
/// with the ranks that had it unless all did), or which rank failed at which
/// step and which operation the others were waiting in (for ranks that
/// never got through MPI's start, with mpirun's own first line). A job
/// that failed before any rank was set up or printed a line (Open MPI's
/// start can fail on a loaded host) is started once more, with a note on
/// stderr. Throws an Error if mpirun cannot be started.
int launchRanks(const LaunchOptions &options, std::vector<std::string> &errors);

} // namespace pccrt

#endif // PCCRT_LAUNCH_H
