//===- CommBench.cpp - The collectives' speed on given sizes -------------===//
//
// pcc-bench-comm times the runtime's MPI communicator (as generated code
// calls it) on all-reduces, all-gathers and reduce-scatters of the sizes it
// is given, over one group of every rank, and prints, on rank 0, each
// collective's median time of R runs (after one of warm-up):
//
//   mpirun -n N pcc-bench-comm [--reps R] BYTES...
//
// BYTES is a rank's float data. bench/comm.sh runs it with and without the
// shared-memory collectives (PCCRT_SHM=0).
//
//===----------------------------------------------------------------------===//

#include "pccrt/Comm.h"
#include "pccrt/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

using namespace pccrt;

int main(int argc, char **argv) {
  int reps = 20;
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    char *end = nullptr;
    if (arg == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      long long v = std::strtoll(arg.c_str(), &end, 10);
      if (arg.empty() || *end || v < 4 || v > (int64_t(1) << 32)) {
        std::fprintf(stderr, "usage: mpirun -n N pcc-bench-comm [--reps R] "
                             "BYTES...\n");
        return 1;
      }
      sizes.push_back(v / 4);
    }
  }
  if (sizes.empty() || reps <= 0) {
    std::fprintf(stderr, "pcc-bench-comm: no sizes, or no runs\n");
    return 1;
  }
  int rank = 0;
  {
    int ranks = 0;
    initMpi(&rank, &ranks);
    std::unique_ptr<Communicator> comm = createMpiCommunicator({ranks});
    for (int64_t count : sizes) {
      std::vector<float> data(size_t(count), 1.0f);
      std::vector<float> all(size_t(count) * size_t(ranks));
      std::vector<float> part = data;
      // A one-float all-reduce lines the ranks up before each run.
      float token = 0;
      auto time = [&](const std::function<void()> &run) {
        std::vector<double> ms;
        for (int r = 0; r <= reps; ++r) {
          comm->allReduce(1, &token, 1, PCCRT_F32, PCCRT_REDUCE_SUM);
          auto start = std::chrono::steady_clock::now();
          run();
          ms.push_back(std::chrono::duration<double, std::milli>(
                           std::chrono::steady_clock::now() - start)
                           .count());
        }
        ms.erase(ms.begin());
        std::sort(ms.begin(), ms.end());
        return ms[ms.size() / 2];
      };
      double reduce = time([&] {
        comm->allReduce(1, data.data(), count, PCCRT_F32, PCCRT_REDUCE_SUM);
      });
      double gather = time([&] {
        comm->allGather(1, data.data(), all.data(), count, PCCRT_F32);
      });
      // Each rank keeps a share of a sum of `count` floats.
      int64_t share = std::max<int64_t>(1, count / ranks);
      double scatter = time([&] {
        comm->reduceScatter(1, all.data(), part.data(), share, PCCRT_F32,
                            PCCRT_REDUCE_SUM);
      });
      if (rank == 0)
        std::printf("%lld all_reduce %.3f all_gather %.3f reduce_scatter "
                    "%.3f\n",
                    (long long)(count * 4), reduce, gather, scatter);
    }
  }
  finalizeMpi(nullptr);
  return 0;
}
