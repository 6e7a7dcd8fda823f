//===- CommTest.cpp - The MPI communicator on a 2 x 2 mesh ----------------===//
//
// Run by ctest under mpirun with 4 ranks: every collective and transfer of
// the backend-neutral interface, over each group of a 2 x 2 mesh, through
// the C++ API and through the C handle that generated code calls; started
// collectives on the communication thread; and the loading of the NCCL
// communicator (its operations need GPUs).
//
//===----------------------------------------------------------------------===//

#include "pccrt/Comm.h"
#include "pccrt/Runtime.h"

#include "GroupRanks.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace pccrt;

static int failures = 0;

static void expect(bool ok, const std::string &what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
    ++failures;
  }
}

using pcc_test::memberRank;

int main() {
  std::unique_ptr<Communicator> comm = createMpiCommunicator({2, 2});
  Communicator &c = *comm;
  int r = c.rank();
  expect(c.numRanks() == 4, "four ranks", r);
  expect(c.coordinate(0) == r / 2 && c.coordinate(1) == r % 2,
         "row-major coordinates", r);
  expect(c.groupSize(1) == 2 && c.groupSize(3) == 4, "group sizes", r);
  expect(c.groupPosition(2) == r % 2 && c.groupPosition(3) == r,
         "group positions", r);

  for (uint32_t axes : {1u, 2u, 3u}) {
    std::string on = " over axes mask " + std::to_string(axes);
    int64_t n = c.groupSize(axes);
    // all_reduce: sum, max, min, mean.
    float sum = 0, max = 0, min = 1e9;
    for (int64_t p = 0; p < n; ++p) {
      float v = float(memberRank(c, axes, p) + 1);
      sum += v, max = std::max(max, v), min = std::min(min, v);
    }
    for (auto [kind, want] : {std::pair{PCCRT_REDUCE_SUM, sum},
                              {PCCRT_REDUCE_MAX, max},
                              {PCCRT_REDUCE_MIN, min},
                              {PCCRT_REDUCE_MEAN, sum / float(n)}}) {
      std::vector<float> x{float(r + 1), float(r + 1)};
      c.allReduce(axes, x.data(), 2, PCCRT_F32, kind);
      expect(x[0] == want && x[1] == want,
             "all_reduce kind " + std::to_string(kind) + on, r);
    }
    // all_gather of two int64 per rank, in group order.
    std::vector<int64_t> mine{r, 10 * r}, all(2 * n);
    c.allGather(axes, mine.data(), all.data(), 2, PCCRT_I64);
    for (int64_t p = 0; p < n; ++p)
      expect(all[2 * p] == memberRank(c, axes, p) &&
                 all[2 * p + 1] == 10 * memberRank(c, axes, p),
             "all_gather" + on, r);
    // reduce_scatter: block p of rank q holds 10 q + p; this rank keeps the
    // sum of its block.
    std::vector<double> blocks(n), out(1);
    for (int64_t p = 0; p < n; ++p)
      blocks[p] = 10.0 * r + double(p);
    c.reduceScatter(axes, blocks.data(), out.data(), 1, PCCRT_F64,
                    PCCRT_REDUCE_SUM);
    double want = 0;
    for (int64_t p = 0; p < n; ++p)
      want += 10.0 * memberRank(c, axes, p) + double(c.groupPosition(axes));
    expect(out[0] == want, "reduce_scatter" + on, r);
    // Collectives large enough for the shared-memory path by default
    // (from 4 MiB a rank; a reduce_scatter of any size), cut into chunks of
    // a slot (1 MiB), the last one short: a float sum and max, a
    // reduce_scatter of doubles and an all_gather of bytes.
    {
      int64_t count = 5 * (int64_t(1) << 18) + 1237;
      auto value = [](int64_t rank, int64_t i) {
        return float((rank + 1) * (i % 97));
      };
      std::vector<float> sum(count), max(count);
      for (int64_t i = 0; i < count; ++i)
        sum[i] = max[i] = value(r, i);
      c.allReduce(axes, sum.data(), count, PCCRT_F32, PCCRT_REDUCE_SUM);
      c.allReduce(axes, max.data(), count, PCCRT_F32, PCCRT_REDUCE_MAX);
      int64_t wrong = 0;
      for (int64_t i = 0; i < count; ++i) {
        float s = 0, m = 0;
        for (int64_t p = 0; p < n; ++p) {
          s += value(memberRank(c, axes, p), i);
          m = std::max(m, value(memberRank(c, axes, p), i));
        }
        wrong += sum[i] != s || max[i] != m;
      }
      expect(wrong == 0, "a large all_reduce" + on, r);

      int64_t block = 100003;
      std::vector<double> in(n * block), mine(block);
      for (int64_t p = 0; p < n; ++p)
        for (int64_t i = 0; i < block; ++i)
          in[p * block + i] = 10.0 * r + double(p) + double(i % 13);
      c.reduceScatter(axes, in.data(), mine.data(), block, PCCRT_F64,
                      PCCRT_REDUCE_SUM);
      wrong = 0;
      for (int64_t i = 0; i < block; ++i) {
        double want = 0;
        for (int64_t p = 0; p < n; ++p)
          want += 10.0 * memberRank(c, axes, p) +
                  double(c.groupPosition(axes)) + double(i % 13);
        wrong += mine[i] != want;
      }
      expect(wrong == 0, "a large reduce_scatter" + on, r);

      int64_t bytes = 4200007;
      std::vector<int8_t> part(bytes), whole(n * bytes);
      for (int64_t i = 0; i < bytes; ++i)
        part[i] = int8_t((7 * r + i % 251) & 0x7f);
      c.allGather(axes, part.data(), whole.data(), bytes, PCCRT_I8);
      wrong = 0;
      for (int64_t p = 0; p < n; ++p)
        for (int64_t i = 0; i < bytes; ++i)
          wrong += whole[p * bytes + i] !=
                   int8_t((7 * memberRank(c, axes, p) + i % 251) & 0x7f);
      expect(wrong == 0, "a large all_gather" + on, r);
    }
    // all_to_all: block p goes to member p.
    std::vector<int32_t> send(n), recv(n);
    for (int64_t p = 0; p < n; ++p)
      send[p] = int32_t(100 * r + p);
    c.allToAll(axes, send.data(), recv.data(), 1, PCCRT_I32);
    for (int64_t p = 0; p < n; ++p)
      expect(recv[p] == 100 * memberRank(c, axes, p) + c.groupPosition(axes),
             "all_to_all" + on, r);
    // send/recv around the group's ring, even positions sending first.
    int64_t pos = c.groupPosition(axes);
    int32_t next = int32_t((pos + 1) % n), prev = int32_t((pos + n - 1) % n);
    float token = float(r), got = -1;
    if (pos % 2 == 0) {
      c.send(axes, next, 5, &token, 1, PCCRT_F32);
      c.recv(axes, prev, 5, &got, 1, PCCRT_F32);
    } else {
      c.recv(axes, prev, 5, &got, 1, PCCRT_F32);
      c.send(axes, next, 5, &token, 1, PCCRT_F32);
    }
    expect(got == float(memberRank(c, axes, prev)), "send/recv" + on, r);
    // Sends completed one by one, both ways round the ring: the receive
    // comes before the wait. Through the C handle, as generated code
    // calls them.
    pccrt_comm *ch = c.handle();
    float sent = float(r) + 0.5f, back = -1;
    int32_t request = -2;
    expect(ch->ops->start_send(ch, axes, next, 6, &sent, 1, PCCRT_F32,
                               &request) == PCCRT_OK,
           "start_send" + on, r);
    c.recv(axes, prev, 6, &back, 1, PCCRT_F32);
    expect(ch->ops->wait_send(ch, request) == PCCRT_OK &&
               back == float(memberRank(c, axes, prev)) + 0.5f,
           "start_send, recv, wait_send" + on, r);
    // A send that wait_all completed needs no wait_send; one still does
    // nothing.
    int32_t again = c.startSend(axes, next, 8, &sent, 1, PCCRT_F32);
    c.recv(axes, prev, 8, &back, 1, PCCRT_F32);
    c.waitAll();
    c.waitSend(again);
    expect(back == float(memberRank(c, axes, prev)) + 0.5f,
           "wait_all completes started sends" + on, r);
  }

  // Through the C handle, as generated code calls it.
  pccrt_comm *h = c.handle();
  float x = 1;
  expect(h->ops->all_reduce(h, 3, &x, 1, PCCRT_F32, PCCRT_REDUCE_SUM) ==
                 PCCRT_OK &&
             x == 4,
         "all_reduce through the C handle", r);
  // Errors come back as a code, with the message kept.
  expect(h->ops->send(h, 1, 7, 0, &x, 1, PCCRT_F32) == PCCRT_ERR_COMM &&
             c.lastError().find("peer 7 is outside a group of 2") !=
                 std::string::npos,
         "a bad peer is an error code with a message", r);
  expect(h->ops->all_reduce(h, 8, &x, 1, PCCRT_F32, PCCRT_REDUCE_SUM) ==
             PCCRT_ERR_COMM,
         "an axes mask beyond the mesh is an error", r);

  // Started collectives on the communication thread (PCCRT_MPI_ASYNC=1):
  // several in flight over different groups, beside blocking collectives
  // and transfers the caller makes meanwhile, each complete at its wait.
  setenv("PCCRT_MPI_ASYNC", "1", 1);
  {
    std::unique_ptr<Communicator> async = createMpiCommunicator({2, 2});
    Communicator &a = *async;
    int64_t before = a.collectiveNanoseconds();
    std::vector<float> rows(1000, float(r + 1)), all(4000), mine(250);
    std::vector<float> gathered(4);
    float me = float(r);
    int32_t first = a.startAllReduce(1, rows.data(), 1000, PCCRT_F32,
                                     PCCRT_REDUCE_SUM, nullptr);
    int32_t second =
        a.startAllGather(3, &me, gathered.data(), 1, PCCRT_F32, nullptr);
    std::vector<float> spread(1000, 1.0f);
    int32_t third = a.startReduceScatter(3, spread.data(), mine.data(), 250,
                                         PCCRT_F32, PCCRT_REDUCE_SUM, nullptr);
    float x = 1;
    a.allReduce(2, &x, 1, PCCRT_F32, PCCRT_REDUCE_SUM);
    int next = int((a.groupPosition(2) + 1) % 2);
    float sent = float(r), got = -1;
    int32_t send = a.startSend(2, next, 9, &sent, 1, PCCRT_F32);
    a.recv(2, next, 9, &got, 1, PCCRT_F32);
    a.waitSend(send);
    a.wait(second, nullptr);
    a.wait(first, nullptr);
    a.wait(third, nullptr);
    float column = float(memberRank(a, 1, 0) + 1 + memberRank(a, 1, 1) + 1);
    expect(rows[0] == column && rows[999] == column,
           "a started all_reduce on the thread", r);
    expect(gathered == std::vector<float>{0, 1, 2, 3},
           "a started all_gather on the thread", r);
    expect(mine[0] == 4 && mine[249] == 4,
           "a started reduce_scatter on the thread", r);
    expect(x == 2 && got == float(memberRank(a, 2, next)),
           "blocking calls while collectives are in flight", r);
    // Waiting for everything; an unknown request is an error.
    int32_t more =
        a.startAllReduce(3, &x, 1, PCCRT_F32, PCCRT_REDUCE_SUM, nullptr);
    a.wait(-1, nullptr);
    expect(x == 8, "wait(-1) completes every started collective", r);
    bool refused = false;
    try {
      a.wait(more + 5, nullptr);
    } catch (const Error &) {
      refused = true;
    }
    expect(refused, "a wait for a request never started is an error", r);
    // A failure on the thread is reported by the wait of its collective.
    int32_t bad =
        a.startAllReduce(3, &x, -1, PCCRT_F32, PCCRT_REDUCE_SUM, nullptr);
    std::string error;
    try {
      a.wait(bad, nullptr);
    } catch (const Error &e) {
      error = e.what();
    }
    expect(error.find("-1 elements") != std::string::npos,
           "a started collective's failure comes back at its wait: " + error,
           r);
    expect(a.collectiveNanoseconds() > before,
           "the time spent in collectives is counted", r);
  }
  unsetenv("PCCRT_MPI_ASYNC");

  // The NCCL communicator is loaded at run time: a library that is not
  // there is an Error that names it.
  const char *missing = "/nonexistent/libpccrt_nccl.so";
  setenv("PCC_NCCL_LIBRARY", missing, 1);
  try {
    loadNcclCommunicator(c, r, 0);
    expect(false, "loading a missing NCCL library throws", r);
  } catch (const Error &e) {
    expect(std::string(e.what()).find(missing) != std::string::npos,
           std::string("the error names the missing library: ") + e.what(), r);
  }
#ifdef PCCRT_TEST_NCCL_LIBRARY
  // The library built here loads, its base class resolved against this
  // executable; without a GPU, making the communicator fails and says why.
  setenv("PCC_NCCL_LIBRARY", PCCRT_TEST_NCCL_LIBRARY, 1);
  try {
    std::unique_ptr<Communicator> nccl = loadNcclCommunicator(c, r, 0);
    expect(nccl->rank() == r && nccl->meshShape() == c.meshShape() &&
               nccl->monitor() == c.monitor(),
           "the NCCL communicator has the bootstrap's ranks and mesh", r);
  } catch (const Error &e) {
    std::string what = e.what();
    expect(what.rfind("NCCL communicator: ", 0) == 0 &&
               what.find("GPU") != std::string::npos,
           "without a GPU the NCCL communicator says so: " + what, r);
  }
#endif
  unsetenv("PCC_NCCL_LIBRARY");

  int local = failures, total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (r == 0)
    std::printf(total ? "FAIL communicator: %d failures\n"
                      : "ok communicator: %d failures\n",
                total);
  comm.reset();
  MPI_Finalize();
  return total ? 1 : 0;
}
