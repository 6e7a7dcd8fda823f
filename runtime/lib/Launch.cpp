//===- Launch.cpp - Starting ranks under mpirun and watching them ---------===//
//
// The launcher runs mpirun in a process group of its own, reads the ranks'
// status files (RankMonitor) while they run, and filters mpirun's stderr:
// the ranks' lines pass, Open MPI's own do not. A failed job is described
// from the status files, which outlive the ranks: who failed at which step,
// and which operation the others were waiting in.
//
//===----------------------------------------------------------------------===//

#include "pccrt/Launch.h"

#include "Internal.h"

#include "pccrt/Comm.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace pccrt;
using namespace pccrt::detail;

namespace {
using Status = RankMonitor::Status;
using Phase = RankMonitor::Phase;

const char *environment(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

bool parseCount(const char *text, int64_t *out) {
  if (!text)
    return false;
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text, &end, 10);
  if (errno || end == text || *end || value < 1)
    return false;
  *out = value;
  return true;
}

double monotonicSeconds() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

/// The first executable `name` in a directory of $PATH, or "".
std::string findOnPath(const std::string &name) {
  const char *path = environment("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos)
      end = dirs.size();
    std::string dir = dirs.substr(at, end - at);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat info;
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    at = end + 1;
  }
  return "";
}

/// Open MPI's own stderr lines: "[host:pid] ..." (backtraces, error logs),
/// the rules around its help texts (which -q mostly suppresses), and the
/// warnings of the libevent it bundles ("[warn] Epoll MOD(1) on fd 25
/// failed...", printed when a rank's exit closes its sockets under it).
bool isOpenMpiLine(const std::string &line) {
  if (line.rfind("------", 0) == 0 &&
      line.find_first_not_of('-') == std::string::npos)
    return true;
  for (const char *level : {"[warn] ", "[err] ", "[debug] ", "[msg] "})
    if (line.rfind(level, 0) == 0)
      return true;
  if (line.empty() || line[0] != '[')
    return false;
  size_t close = line.find(']');
  size_t colon = line.find(':');
  if (close == std::string::npos || colon == std::string::npos ||
      colon > close || colon + 1 == close)
    return false;
  for (size_t i = colon + 1; i < close; ++i)
    if (line[i] < '0' || line[i] > '9')
      return false;
  return true;
}

volatile std::sig_atomic_t interruptedBy = 0;
void onSignal(int signal) { interruptedBy = signal; }

/// The status files of a job: made before mpirun starts, so that a rank
/// that dies before writing its own still reads as never started.
class StatusDir {
public:
  StatusDir(int64_t ranks) {
    const char *tmp = environment("TMPDIR");
    std::string pattern =
        std::string(tmp ? tmp : "/tmp") + "/pccrt-ranks-XXXXXX";
    if (!mkdtemp(pattern.data()))
      fail(pattern, std::string("cannot create the ranks' status folder: ") +
                        std::strerror(errno));
    path = pattern;
    for (int64_t r = 0; r < ranks; ++r) {
      std::string file = path + "/rank-" + std::to_string(r);
      int fd =
          ::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0 || ftruncate(fd, sizeof(Status)) != 0)
        fail(file, std::string("cannot create a rank status file: ") +
                       std::strerror(errno));
      void *memory =
          mmap(nullptr, sizeof(Status), PROT_READ, MAP_SHARED, fd, 0);
      ::close(fd);
      if (memory == MAP_FAILED)
        fail(file, std::string("cannot map a rank status file: ") +
                       std::strerror(errno));
      files.push_back(file);
      statuses.push_back(static_cast<const Status *>(memory));
    }
  }
  ~StatusDir() {
    for (const Status *status : statuses)
      munmap(const_cast<Status *>(status), sizeof(Status));
    for (const std::string &file : files)
      ::unlink(file.c_str());
    if (!path.empty())
      ::rmdir(path.c_str());
  }

  std::string path;
  std::vector<std::string> files;
  std::vector<const Status *> statuses;
};

/// "rank 1", "ranks 0 and 2", "ranks 0, 1 and 3".
std::string rankList(const std::vector<int64_t> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i)
      text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

std::string atStep(int64_t step) {
  return step > 0 ? "at step " + std::to_string(step) : "before the first step";
}

/// One snapshot of a rank's status.
struct RankState {
  Phase phase;
  CommOp op;
  int64_t step;
  int32_t pid;
  bool printed;
  std::string message;
};

RankState snapshot(const Status &status) {
  RankState state;
  state.phase = Phase(status.phase.load());
  state.op = CommOp(status.op.load());
  state.step = status.step.load();
  state.pid = status.pid.load();
  state.printed = status.printed.load() != 0;
  state.message = std::string(status.message,
                              strnlen(status.message, sizeof status.message));
  return state;
}

/// True if \p pid runs \p executable: a rank of this job, not a process
/// that has since reused its id.
bool runs(int32_t pid, const std::string &executable) {
  if (pid <= 0)
    return false;
  char target[PATH_MAX];
  std::string link = "/proc/" + std::to_string(pid) + "/exe";
  ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  if (n < 0)
    return false;
  std::string exe(target, size_t(n));
  // A rebuilt executable reads as "<path> (deleted)".
  return exe == executable || exe == executable + " (deleted)";
}

/// Describes a failed job from its ranks' last states, as lines.
std::vector<std::string> describeFailure(const std::vector<RankState> &ranks,
                                         int exitStatus, int signal,
                                         bool interrupted,
                                         const std::string &stoppedBecause,
                                         const std::string &mpirunLine) {
  std::vector<std::string> lines;
  int64_t n = int64_t(ranks.size());
  if (interrupted) {
    // The ranks were ended from outside; where they stood says nothing
    // about a failure.
    int64_t step = 0;
    for (const RankState &rank : ranks)
      step = std::max(step, rank.step);
    lines.push_back("interrupted " + atStep(step) + "; ended all " +
                    std::to_string(n) + " ranks");
    return lines;
  }
  // Errors the ranks left to the launcher, each once.
  std::map<std::string, std::vector<int64_t>> errors;
  bool anyError = false;
  for (int64_t r = 0; r < n; ++r)
    if (ranks[r].phase == Phase::Error) {
      anyError = true;
      if (!ranks[r].printed)
        errors[ranks[r].message].push_back(r);
    }
  for (const auto &[message, who] : errors)
    lines.push_back(int64_t(who.size()) == n ? message
                                             : rankList(who) + ": " + message);
  if (anyError)
    return lines;

  bool anyTimedOut = false, anyFault = false;
  for (const RankState &rank : ranks) {
    anyTimedOut |= rank.phase == Phase::TimedOut;
    anyFault |=
        rank.phase == Phase::FaultExit || rank.phase == Phase::FaultHang;
  }
  // Failed ranks, grouped by step and cause; waiting ones by operation and
  // step.
  std::map<std::pair<int64_t, std::string>, std::vector<int64_t>> failed;
  std::map<std::pair<std::string, int64_t>, std::vector<int64_t>> waiting;
  std::map<int64_t, std::vector<int64_t>> running;
  for (int64_t r = 0; r < n; ++r) {
    const RankState &rank = ranks[r];
    if (rank.phase == Phase::Done)
      continue;
    std::string cause;
    if (rank.phase == Phase::FaultExit)
      cause = "exited";
    else if (rank.phase == Phase::FaultHang)
      cause = "hung";
    else if (rank.phase == Phase::TimedOut || rank.op != CommOp::None) {
      waiting[{commOpName(rank.op), rank.step}].push_back(r);
      continue;
    } else if (anyFault && rank.phase == Phase::Running) {
      // Ended by mpirun on its way to the collective that the failed rank
      // would never join.
      running[rank.step].push_back(r);
      continue;
    } else if (anyTimedOut)
      // Alive when a peer gave up waiting for it: else mpirun would have
      // ended the job earlier.
      cause = "hung";
    else if (signal)
      cause = "killed by signal " + std::to_string(signal) + ", " +
              strsignal(signal);
    else
      cause = "exited";
    if (rank.phase == Phase::Starting)
      failed[{-1, cause}].push_back(r);
    else
      failed[{rank.step, cause}].push_back(r);
  }

  std::string line;
  int64_t failedStep = 0;
  for (const auto &[key, who] : failed) {
    line += line.empty() ? "" : ", ";
    line +=
        rankList(who) + " failed " +
        (key.first < 0 ? std::string("while starting") : atStep(key.first)) +
        " (" + key.second + ")";
    failedStep = key.first;
  }
  std::string waits;
  for (const auto &[key, who] : waiting) {
    waits += waits.empty() ? "" : ", ";
    waits += rankList(who) + (who.size() == 1 ? " was" : " were") +
             " waiting in " + key.first;
    if (failed.empty() || key.second != failedStep)
      waits += " " + atStep(key.second);
  }
  for (const auto &[step, who] : running) {
    waits += waits.empty() ? "" : ", ";
    waits += rankList(who) + (who.size() == 1 ? " was" : " were") +
             " running " +
             (step > 0 ? "step " + std::to_string(step) : "its setup");
  }
  // Ranks that never got through MPI's start said nothing themselves:
  // mpirun's (or Open MPI's) own first line says why.
  if (failed.count({-1, "exited"}) && !mpirunLine.empty())
    line += ": " + mpirunLine;
  if (!line.empty() && !waits.empty())
    line += "; " + waits;
  else if (!waits.empty())
    line = "no rank failed, but " + waits + " (mismatched collectives?)";
  if (line.empty()) {
    line = "the ranks ended with mpirun's exit status " +
           std::to_string(exitStatus);
    if (!mpirunLine.empty())
      line += ": " + mpirunLine;
  }
  if (!stoppedBecause.empty())
    line += " (" + stoppedBecause + ")";
  lines.push_back(line);
  return lines;
}
} // namespace

bool pccrt::startedByLauncher(int64_t *worldSize) {
  if (parseCount(environment("OMPI_COMM_WORLD_SIZE"), worldSize) ||
      parseCount(environment("PMI_SIZE"), worldSize))
    return true;
  // srun names the job step; a batch script runs in a step of its own
  // (ids from 0xfffffffa up) and is no launch of ranks.
  const char *step = environment("SLURM_STEP_ID");
  if (!step)
    step = environment("SLURM_STEPID");
  int64_t stepId = 0;
  if (environment("SLURM_PROCID") && step && parseCount(step, &stepId) &&
      stepId >= 0xfffffffa)
    return false;
  if (environment("SLURM_PROCID") && step &&
      parseCount(environment("SLURM_NTASKS"), worldSize))
    return true;
  return false;
}

/// One start of the job (see launchRanks). \p neverStarted is set when it
/// failed before any rank was set up or said anything: no step ran, and a
/// second start may succeed where a loaded host made Open MPI's fail.
static int launchOnce(const LaunchOptions &options,
                      std::vector<std::string> &errors, bool &neverStarted) {
  neverStarted = false;
  std::string mpirun = findOnPath("mpirun");
  if (mpirun.empty())
    throw Error("cannot start " + std::to_string(options.ranks) +
                " ranks: mpirun is not on PATH (install Open MPI, e.g. "
                "apt-get install openmpi-bin)");
  if (options.command.empty() || options.command[0].empty() ||
      options.command[0][0] != '/')
    throw Error("launchRanks needs the ranks' executable as an absolute path");
  StatusDir dir(options.ranks);

  std::vector<std::string> args = {
      mpirun, "-q", "-np", std::to_string(options.ranks),
      // Root in containers, more ranks than cores, no pinning of ranks that
      // share cores.
      "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-x",
      "PCCRT_STATUS_DIR"};
  // The ranks share this host's cores: a BLAS in each rank that starts a
  // thread per core would have them compete for the cores. Unless the user
  // chose, each rank gets its share.
  cpu_set_t cpus;
  int64_t cores = sched_getaffinity(0, sizeof cpus, &cpus) == 0
                      ? CPU_COUNT(&cpus)
                      : int64_t(sysconf(_SC_NPROCESSORS_ONLN));
  std::string share =
      std::to_string(std::max<int64_t>(1, cores / options.ranks));
  std::vector<std::pair<std::string, std::string>> threadLimits;
  for (const char *name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    if (!environment(name))
      threadLimits.emplace_back(name, share);
    args.push_back("-x");
    args.push_back(name);
  }
  args.insert(args.end(), options.command.begin(), options.command.end());
  std::vector<char *> argv;
  for (std::string &arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);

  int pipeFds[2];
  if (pipe2(pipeFds, O_CLOEXEC) != 0)
    throw Error(std::string("cannot start mpirun: ") + std::strerror(errno));
  // Block the signals the launcher handles until the child has reset them.
  struct sigaction action {};
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  struct sigaction oldInt, oldTerm, oldHup;
  interruptedBy = 0;
  sigaction(SIGINT, &action, &oldInt);
  sigaction(SIGTERM, &action, &oldTerm);
  sigaction(SIGHUP, &action, &oldHup);
  auto restoreSignals = [&] {
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
    sigaction(SIGHUP, &oldHup, nullptr);
  };

  pid_t launcher = getpid();
  pid_t child = fork();
  if (child < 0) {
    int error = errno;
    ::close(pipeFds[0]);
    ::close(pipeFds[1]);
    restoreSignals();
    throw Error(std::string("cannot start mpirun: ") + std::strerror(error));
  }
  if (child == 0) {
    // mpirun and what it starts leave with the launcher: their own process
    // group to be stopped as one, and a signal if the launcher dies.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != launcher)
      _exit(1);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0)
      dup2(null, 0);
    dup2(pipeFds[1], 2);
    setenv("PCCRT_STATUS_DIR", dir.path.c_str(), 1);
    for (const auto &[name, value] : threadLimits)
      setenv(name.c_str(), value.c_str(), 1);
    execv(mpirun.c_str(), argv.data());
    std::string message =
        "cannot run " + mpirun + ": " + std::strerror(errno) + "\n";
    ssize_t ignored = ::write(2, message.data(), message.size());
    (void)ignored;
    _exit(127);
  }
  setpgid(child, child);
  ::close(pipeFds[1]);

  // Watch: pass the ranks' stderr lines on, note mpirun's end, and stop
  // the job if it does not end by itself once a rank failed.
  std::string pending, firstMpirunLine;
  bool rankSpoke = false;
  auto emit = [&](const std::string &line) {
    if (isOpenMpiLine(line)) {
      if (firstMpirunLine.empty() &&
          line.find_first_not_of('-') != std::string::npos)
        firstMpirunLine = line;
      return;
    }
    rankSpoke = true;
    std::string out = line + "\n";
    ssize_t ignored = ::write(2, out.data(), out.size());
    (void)ignored;
  };
  auto drain = [&](int timeoutMs) {
    pollfd fd{pipeFds[0], POLLIN, 0};
    if (poll(&fd, 1, timeoutMs) <= 0)
      return false;
    char buffer[4096];
    ssize_t n = ::read(pipeFds[0], buffer, sizeof buffer);
    if (n <= 0)
      return false;
    pending.append(buffer, size_t(n));
    for (size_t end; (end = pending.find('\n')) != std::string::npos;) {
      emit(pending.substr(0, end));
      pending.erase(0, end + 1);
    }
    return true;
  };

  int waitStatus = 0;
  bool exited = false;
  double failureSeen = -1, stopAt = -1;
  std::string stoppedBecause;
  bool interrupted = false;
  int stopSignal = 0;
  double stopSignalAt = 0;
  while (!exited) {
    drain(100);
    pid_t done = waitpid(child, &waitStatus, WNOHANG);
    if (done == child) {
      exited = true;
      break;
    }
    double now = monotonicSeconds();
    if (interruptedBy && !interrupted) {
      interrupted = true;
      stoppedBecause = "interrupted";
      stopAt = now;
      // Ranks that end on their own when interrupted (saving a checkpoint
      // first) get the signal and some time; mpirun would end them at once.
      if (options.graceSeconds > 0) {
        for (const Status *status : dir.statuses)
          if (runs(status->pid.load(), options.command[0]))
            kill(status->pid.load(), interruptedBy);
        stopAt = now + options.graceSeconds;
      }
    }
    for (const Status *status : dir.statuses) {
      Phase phase = Phase(status->phase.load());
      // Once a rank has failed or given up, mpirun ends the job within
      // moments; the launcher waits that long before doing it itself.
      if ((phase == Phase::Error || phase == Phase::TimedOut ||
           phase == Phase::FaultExit) &&
          failureSeen < 0) {
        failureSeen = now;
        if (stopAt < 0)
          stopAt = now + 10;
      }
      // A watchdog that did not fire (a rank stopped, or stuck outside
      // user code) must not keep the job forever.
      if (options.timeoutSeconds > 0 && status->op.load() != 0) {
        double since = double(status->opSince.load()) * 1e-9;
        if (now - since > options.timeoutSeconds + 10 &&
            stoppedBecause.empty()) {
          stoppedBecause =
              "stopped by the launcher after " +
              std::to_string(int64_t(options.timeoutSeconds + 10)) + " s";
          stopAt = now;
        }
      }
    }
    if (stopAt >= 0 && now >= stopAt) {
      if (stoppedBecause.empty())
        stoppedBecause = "stopped by the launcher";
      // SIGTERM first, so that mpirun ends its ranks; then SIGKILL.
      if (stopSignal == 0) {
        kill(-child, SIGTERM);
        stopSignal = SIGTERM;
        stopSignalAt = now;
      } else if (stopSignal == SIGTERM && now - stopSignalAt > 3) {
        kill(-child, SIGKILL);
        stopSignal = SIGKILL;
      }
    }
  }
  // What mpirun left in the pipe; ranks that outlived it may still hold
  // the pipe, so this does not wait for its end.
  while (drain(200)) {
  }
  if (!pending.empty())
    emit(pending);
  ::close(pipeFds[0]);
  restoreSignals();

  // Take no chance on a rank that outlived mpirun (killed with SIGKILL,
  // it could not end its ranks).
  std::vector<RankState> ranks;
  for (const Status *status : dir.statuses)
    ranks.push_back(snapshot(*status));
  for (const RankState &rank : ranks)
    if (runs(rank.pid, options.command[0]))
      kill(rank.pid, SIGKILL);

  // Ranks that were passed an interrupt and ended well within their grace
  // (having saved their checkpoint) make a run that succeeded.
  bool endedWell = WIFEXITED(waitStatus) && WEXITSTATUS(waitStatus) == 0;
  bool ok = endedWell &&
            (stoppedBecause.empty() ||
             (interrupted && options.graceSeconds > 0 && stopSignal == 0));
  if (ok)
    return 0;
  // mpirun exits with 128 + N when a rank was killed by signal N.
  int exitStatus = WIFEXITED(waitStatus) ? WEXITSTATUS(waitStatus)
                                         : 128 + WTERMSIG(waitStatus);
  int rankSignal = 0;
  if (stoppedBecause.empty() && exitStatus > 128 && exitStatus < 128 + 65 &&
      exitStatus != 128 + SIGTERM && exitStatus != 128 + SIGKILL)
    rankSignal = exitStatus - 128;
  neverStarted = !interrupted && stoppedBecause.empty() && !rankSpoke &&
                 std::all_of(ranks.begin(), ranks.end(),
                             [](const RankState &rank) {
                               return rank.phase == Phase::Starting;
                             });
  errors = describeFailure(ranks, exitStatus, rankSignal, interrupted,
                           stoppedBecause, firstMpirunLine);
  return 1;
}

int pccrt::launchRanks(const LaunchOptions &options,
                       std::vector<std::string> &errors) {
  bool neverStarted = false;
  int status = launchOnce(options, errors, neverStarted);
  if (status == 0 || !neverStarted || interruptedBy)
    return status;
  // Nothing ran: start the job once more, and say so.
  std::string note = "pcc: note: " + (errors.empty() ? "" : errors.back()) +
                     "; starting the ranks once more\n";
  ssize_t ignored = ::write(2, note.data(), note.size());
  (void)ignored;
  errors.clear();
  ::sleep(1);
  return launchOnce(options, errors, neverStarted);
}
