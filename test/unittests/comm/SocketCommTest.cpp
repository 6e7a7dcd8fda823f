//===- SocketCommTest.cpp - The TCP socket communicator -------------------===//
//
// Each test forks its ranks, which meet on localhost at a free port as
// torchrun's workers would: every collective over each group of a 2 x 2
// mesh for float32, float64, int64 and bfloat16 (reductions in group order,
// bitwise the same on every member), transfers both ways at once, messages
// over 2 GB, a peer that dies or aborts, and a rendezvous that cannot
// happen (no rank 0, a port taken, ranks that disagree).
//
//===----------------------------------------------------------------------===//

#include "pccrt/Comm.h"
#include "pccrt/Runtime.h"

#include "GroupRanks.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace pccrt;

namespace {

/// A port that nothing listens on now.
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t length = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &length);
  ::close(fd);
  return ntohs(a.sin_port);
}

SocketBootstrap bootstrapFor(int rank, int size, int port,
                             double timeout = 20) {
  SocketBootstrap b;
  b.rank = rank;
  b.worldSize = size;
  b.masterAddr = "127.0.0.1";
  b.masterPort = port;
  b.timeoutSeconds = timeout;
  return b;
}

/// Failures a rank found, reported on stderr; the count is its exit status.
struct Checks {
  int rank;
  int failures = 0;
  void expect(bool ok, const std::string &what) {
    if (!ok) {
      std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
      ++failures;
    }
  }
};

/// Runs \p body(rank) in \p n processes; returns their exit statuses (128 +
/// the signal of one killed), or 255 for one that ran past \p seconds.
std::vector<int> forkRanks(int n, const std::function<int(int)> &body,
                           double seconds = 60) {
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int status = 1;
      try {
        status = body(r);
      } catch (const std::exception &e) {
        std::fprintf(stderr, "rank %d: FAIL uncaught: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      _exit(status > 100 ? 100 : status);
    }
    pids.push_back(pid);
  }
  std::vector<int> statuses(size_t(n), -1);
  auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (int left = n; left > 0;) {
    for (int r = 0; r < n; ++r) {
      int status;
      if (statuses[size_t(r)] != -1 ||
          waitpid(pids[size_t(r)], &status, WNOHANG) <= 0)
        continue;
      statuses[size_t(r)] =
          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      --left;
    }
    if (left && std::chrono::steady_clock::now() > until) {
      for (int r = 0; r < n; ++r)
        if (statuses[size_t(r)] == -1) {
          kill(pids[size_t(r)], SIGKILL);
          waitpid(pids[size_t(r)], nullptr, 0);
          statuses[size_t(r)] = 255;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return statuses;
}

using pcc_test::memberRank;

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/// A float of rank \p r's element \p i, of magnitudes far apart, so that
/// the order of a sum shows in its rounding.
float floatValue(int r, int64_t i) {
  uint64_t h = mix(uint64_t(r) * 1000003 + uint64_t(i));
  float v = std::ldexp(float(h % 1000003) / 1e6f, int(h >> 40) % 30 - 15);
  return (h >> 20) & 1 ? -v : v;
}

uint16_t toBfloat(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b += 0x7fff + ((b >> 16) & 1);
  return uint16_t(b >> 16);
}

float fromBfloat(uint16_t h) {
  uint32_t b = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

/// The elements of one dtype as the test makes and combines them.
template <typename T> struct Elements;
template <> struct Elements<float> {
  static constexpr int32_t dtype = PCCRT_F32;
  static float value(int r, int64_t i) { return floatValue(r, i); }
};
template <> struct Elements<double> {
  static constexpr int32_t dtype = PCCRT_F64;
  static double value(int r, int64_t i) {
    return double(floatValue(r, i)) * (1.0 + 1e-9 * double(i % 7));
  }
};
template <> struct Elements<int64_t> {
  static constexpr int32_t dtype = PCCRT_I64;
  static int64_t value(int r, int64_t i) {
    return int64_t(mix(uint64_t(r) * 7919 + uint64_t(i)) >> 4) -
           (int64_t(1) << 59);
  }
};
/// bfloat16, as its bits.
struct Bf16 {
  uint16_t bits;
};
template <> struct Elements<Bf16> {
  static constexpr int32_t dtype = PCCRT_BF16;
  static Bf16 value(int r, int64_t i) { return {toBfloat(floatValue(r, i))}; }
};

/// What the backend promises for a reduction: the members' values combined
/// in group position order (16-bit floats in float, rounded once).
template <typename T>
T expected(const std::vector<T> &values, int32_t reduction) {
  if constexpr (std::is_same_v<T, Bf16>) {
    std::vector<float> wide;
    for (Bf16 v : values)
      wide.push_back(fromBfloat(v.bits));
    return {toBfloat(expected(wide, reduction))};
  } else {
    T acc = values[0];
    for (size_t p = 1; p < values.size(); ++p) {
      T v = values[p];
      if (reduction == PCCRT_REDUCE_SUM || reduction == PCCRT_REDUCE_MEAN) {
        if constexpr (std::is_integral_v<T>)
          acc = T(uint64_t(acc) + uint64_t(v));
        else
          acc = acc + v;
      } else if (reduction == PCCRT_REDUCE_MAX) {
        acc = v > acc ? v : acc;
      } else {
        acc = v < acc ? v : acc;
      }
    }
    if constexpr (std::is_floating_point_v<T>)
      if (reduction == PCCRT_REDUCE_MEAN)
        acc /= T(values.size());
    return acc;
  }
}

template <typename T> bool same(const T &a, const T &b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// Every collective of \p c over \p axes for elements of T.
template <typename T>
void checkCollectives(Communicator &c, uint32_t axes, Checks &checks) {
  using E = Elements<T>;
  int r = c.rank();
  int64_t n = c.groupSize(axes), me = c.groupPosition(axes);
  std::string on = " (dtype " + std::to_string(E::dtype) + ", axes " +
                   std::to_string(axes) + ")";
  std::vector<int32_t> reductions = {PCCRT_REDUCE_SUM, PCCRT_REDUCE_MAX,
                                     PCCRT_REDUCE_MIN};
  if (!std::is_integral_v<T>)
    reductions.push_back(PCCRT_REDUCE_MEAN);
  // 1001 elements: blocks of unequal sizes; 3: some members own none.
  for (int64_t count : {int64_t(1001), int64_t(3), int64_t(0)}) {
    for (int32_t reduction : reductions) {
      std::vector<T> x(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i)
        x[size_t(i)] = E::value(r, i);
      c.allReduce(axes, x.data(), count, E::dtype, reduction);
      bool ok = true;
      for (int64_t i = 0; i < count; ++i) {
        std::vector<T> values;
        for (int64_t p = 0; p < n; ++p)
          values.push_back(E::value(memberRank(c, axes, p), i));
        ok &= same(x[size_t(i)], expected(values, reduction));
      }
      checks.expect(ok, "all_reduce " + std::to_string(reduction) + " of " +
                            std::to_string(count) + on);
      // Bitwise the same on every member.
      std::vector<T> all(static_cast<size_t>(count * n));
      c.allGather(axes, x.data(), all.data(), count, E::dtype);
      checks.expect(
          std::memcmp(all.data(), all.data() + (n - 1) * count,
                      size_t(count) * sizeof(T)) == 0 &&
              std::memcmp(all.data(), x.data(), size_t(count) * sizeof(T)) == 0,
          "all_reduce results equal on every member" + on);
    }
    // all_gather, in group order.
    std::vector<T> mine(static_cast<size_t>(count)),
        all(static_cast<size_t>(count * n));
    for (int64_t i = 0; i < count; ++i)
      mine[size_t(i)] = E::value(r, i);
    c.allGather(axes, mine.data(), all.data(), count, E::dtype);
    bool ok = true;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t i = 0; i < count; ++i)
        ok &= same(all[size_t(p * count + i)],
                   E::value(memberRank(c, axes, p), i));
    checks.expect(ok, "all_gather of " + std::to_string(count) + on);
    // reduce_scatter: block p of every member's input goes to member p.
    std::vector<T> blocks(static_cast<size_t>(count * n)),
        out(static_cast<size_t>(count));
    for (int64_t i = 0; i < count * n; ++i)
      blocks[size_t(i)] = E::value(r, i);
    c.reduceScatter(axes, blocks.data(), out.data(), count, E::dtype,
                    PCCRT_REDUCE_SUM);
    ok = true;
    for (int64_t i = 0; i < count; ++i) {
      std::vector<T> values;
      for (int64_t p = 0; p < n; ++p)
        values.push_back(E::value(memberRank(c, axes, p), me * count + i));
      ok &= same(out[size_t(i)], expected(values, PCCRT_REDUCE_SUM));
    }
    checks.expect(ok, "reduce_scatter of " + std::to_string(count) + on);
    // all_to_all: block p goes to member p.
    std::vector<T> received(static_cast<size_t>(count * n));
    c.allToAll(axes, blocks.data(), received.data(), count, E::dtype);
    ok = true;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t i = 0; i < count; ++i)
        ok &= same(received[size_t(p * count + i)],
                   E::value(memberRank(c, axes, p), me * count + i));
    checks.expect(ok, "all_to_all of " + std::to_string(count) + on);
  }
}

/// Available memory in bytes (MemAvailable), 0 if unknown.
uint64_t availableMemory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb;
  while (in >> key >> kb) {
    if (key == "MemAvailable:")
      return kb * 1024;
    in.ignore(256, '\n');
  }
  return 0;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST(SocketComm, CollectivesOnATwoByTwoMesh) {
  int port = freePort();
  std::vector<int> statuses = forkRanks(4, [&](int rank) {
    auto comm = createSocketCommunicator({2, 2}, bootstrapFor(rank, 4, port));
    Communicator &c = *comm;
    Checks checks{rank};
    checks.expect(c.rank() == rank && c.numRanks() == 4, "rank and size");
    for (uint32_t axes : {1u, 2u, 3u}) {
      checkCollectives<float>(c, axes, checks);
      checkCollectives<double>(c, axes, checks);
      checkCollectives<int64_t>(c, axes, checks);
      checkCollectives<Bf16>(c, axes, checks);
    }
    // The agreement that pcc run makes over all ranks.
    std::vector<std::string> errors = c.agree(rank == 2 ? "bad input" : "");
    checks.expect(errors.size() == 4 && errors[2] == "bad input" &&
                      errors[0].empty() && errors[3].empty(),
                  "agree");
    // Through the C handle; a bad peer is an error code with a message.
    pccrt_comm *h = c.handle();
    float x = 1;
    checks.expect(h->ops->all_reduce(h, 3, &x, 1, PCCRT_F32,
                                     PCCRT_REDUCE_SUM) == PCCRT_OK &&
                      x == 4,
                  "all_reduce through the C handle");
    checks.expect(h->ops->send(h, 1, 7, 0, &x, 1, PCCRT_F32) ==
                          PCCRT_ERR_COMM &&
                      contains(c.lastError(), "peer 7 is outside a group of 2"),
                  "a bad peer is an error code: " + c.lastError());
    int64_t i = 1;
    checks.expect(h->ops->all_reduce(h, 1, &i, 1, PCCRT_I64,
                                     PCCRT_REDUCE_MEAN) == PCCRT_ERR_COMM &&
                      contains(c.lastError(), "a mean needs float"),
                  "a mean of integers is an error: " + c.lastError());
    return checks.failures;
  });
  EXPECT_EQ(statuses, std::vector<int>(4, 0));
}

TEST(SocketComm, TransfersBothWaysAtOnce) {
  int port = freePort();
  std::vector<int> statuses = forkRanks(2, [&](int rank) {
    auto comm = createSocketCommunicator({2}, bootstrapFor(rank, 2, port));
    Communicator &c = *comm;
    Checks checks{rank};
    int peer = 1 - rank;
    // Both send 64 MB first, far more than the sockets buffer: blocking
    // sends that waited for the peer to receive would deadlock.
    int64_t n = int64_t(16) << 20;
    std::vector<float> out(static_cast<size_t>(n)), in(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      out[size_t(i)] = float(rank * 1000 + i % 1000);
    c.send(1, peer, 3, out.data(), n, PCCRT_F32);
    c.recv(1, peer, 3, in.data(), n, PCCRT_F32);
    bool ok = true;
    for (int64_t i = 0; i < n; ++i)
      ok &= in[size_t(i)] == float(peer * 1000 + i % 1000);
    checks.expect(ok, "send then recv both ways");
    // isend both ways, then receive, then wait.
    c.isend(1, peer, 4, out.data(), n, PCCRT_F32);
    c.recv(1, peer, 4, in.data(), n, PCCRT_F32);
    c.waitAll();
    checks.expect(in[12345] == float(peer * 1000 + 345), "isend both ways");
    // Sends completed one by one (here at once: a request of -1).
    int32_t request = c.startSend(1, peer, 6, out.data(), n, PCCRT_F32);
    c.recv(1, peer, 6, in.data(), n, PCCRT_F32);
    c.waitSend(request);
    checks.expect(request == -1 && in[54321] == float(peer * 1000 + 321),
                  "start_send both ways");
    // Receives match by tag, not by arrival: tag 2 is received first.
    int64_t a = 10 + rank, b = 20 + rank, gotA = 0, gotB = 0;
    c.send(1, peer, 1, &a, 1, PCCRT_I64);
    c.send(1, peer, 2, &b, 1, PCCRT_I64);
    c.recv(1, peer, 2, &gotB, 1, PCCRT_I64);
    c.recv(1, peer, 1, &gotA, 1, PCCRT_I64);
    checks.expect(gotA == 10 + peer && gotB == 20 + peer, "tags");
    // Same tag: in the order sent.
    for (int64_t k = 0; k < 5; ++k)
      c.isend(1, peer, 9, &k, 1, PCCRT_I64);
    c.waitAll();
    ok = true;
    for (int64_t k = 0; k < 5; ++k) {
      int64_t got = -1;
      c.recv(1, peer, 9, &got, 1, PCCRT_I64);
      ok &= got == k;
    }
    checks.expect(ok, "order of one tag");
    // To itself.
    int64_t self = 77, back = 0;
    c.send(1, rank, 5, &self, 1, PCCRT_I64);
    c.recv(1, rank, 5, &back, 1, PCCRT_I64);
    checks.expect(back == 77, "send to itself");
    // A receive larger than the message gets the message, as MPI's does.
    int64_t two[2] = {1, 2}, got[2] = {0, 0};
    c.send(1, peer, 6, two, 1, PCCRT_I64);
    c.recv(1, peer, 6, got, 2, PCCRT_I64);
    checks.expect(got[0] == 1, "a short message");
    // Rank 1 sends and leaves at once; rank 0 receives later: what a rank
    // sent before it closed arrives.
    if (rank == 1) {
      c.send(1, 0, 8, two, 2, PCCRT_I64);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      c.recv(1, 1, 8, got, 2, PCCRT_I64);
      checks.expect(got[1] == 2, "a message of a rank that closed");
    }
    return checks.failures;
  });
  EXPECT_EQ(statuses, std::vector<int>(2, 0));
}

TEST(SocketComm, MessagesOverTwoGigabytes) {
  // 2^31 + 8 bytes: a count beyond int32 on the wire and in every read.
  int64_t n = (int64_t(1) << 31) + 8;
  if (availableMemory() < uint64_t(12) << 30)
    GTEST_SKIP() << "needs 12 GB of available memory";
  int port = freePort();
  std::vector<int> statuses = forkRanks(
      2,
      [&](int rank) {
        auto comm = createSocketCommunicator({2}, bootstrapFor(rank, 2, port));
        Checks checks{rank};
        std::vector<uint8_t> data(static_cast<size_t>(n));
        if (rank == 0) {
          for (int64_t i = 0; i < n; i += 4096)
            data[size_t(i)] = uint8_t(mix(uint64_t(i)));
          data[size_t(n - 1)] = 42;
          comm->send(1, 1, 0, data.data(), n, PCCRT_U8);
        } else {
          comm->recv(1, 0, 0, data.data(), n, PCCRT_U8);
          bool ok = data[size_t(n - 1)] == 42;
          for (int64_t i = 0; i < n; i += 4096)
            ok &= data[size_t(i)] == uint8_t(mix(uint64_t(i)));
          checks.expect(ok, "a message of 2^31 + 8 bytes");
        }
        return checks.failures;
      },
      300);
  EXPECT_EQ(statuses, std::vector<int>(2, 0));
}

TEST(SocketComm, APeerThatDiesFailsTheOthers) {
  int port = freePort();
  std::vector<int> statuses = forkRanks(4, [&](int rank) {
    auto comm = createSocketCommunicator({2, 2}, bootstrapFor(rank, 4, port));
    Checks checks{rank};
    if (rank == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      _exit(3); // no goodbye, as a crash
    }
    auto start = std::chrono::steady_clock::now();
    float x = 1;
    std::string error;
    try {
      if (rank == 2) // waits for rank 3 alone
        comm->recv(2, 1, 0, &x, 1, PCCRT_F32);
      else // waits for all
        comm->allReduce(3, &x, 1, PCCRT_F32, PCCRT_REDUCE_SUM);
    } catch (const Error &e) {
      error = e.what();
    }
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    checks.expect(contains(error, "lost rank 3") &&
                      error.find('\n') == std::string::npos,
                  "the error names the lost rank on one line: " + error);
    checks.expect(waited < 10, "noticed at once");
    try {
      comm->allReduce(1, &x, 1, PCCRT_F32, PCCRT_REDUCE_SUM);
      checks.expect(false, "unusable after a failure");
    } catch (const Error &e) {
      checks.expect(contains(e.what(), "unusable after an earlier failure"),
                    std::string("unusable after a failure: ") + e.what());
    }
    return checks.failures;
  });
  EXPECT_EQ(statuses, (std::vector<int>{0, 0, 0, 3}));
}

TEST(SocketComm, AbortEndsTheOthers) {
  int port = freePort();
  std::vector<int> statuses = forkRanks(3, [&](int rank) {
    auto comm = createSocketCommunicator({3}, bootstrapFor(rank, 3, port));
    Checks checks{rank};
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      comm->abort(7);
    }
    std::vector<float> x(1000);
    try {
      comm->allGather(1, x.data(), std::vector<float>(3000).data(), 1000,
                      PCCRT_F32);
      checks.expect(false, "all_gather fails");
    } catch (const Error &e) {
      checks.expect(contains(e.what(), "all_gather: lost rank 0"),
                    std::string("the error: ") + e.what());
    }
    return checks.failures;
  });
  EXPECT_EQ(statuses, (std::vector<int>{7, 0, 0}));
}

TEST(SocketComm, RankZeroMayStartLast) {
  int port = freePort();
  std::vector<int> statuses = forkRanks(3, [&](int rank) {
    if (rank == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    auto comm = createSocketCommunicator({3}, bootstrapFor(rank, 3, port));
    int64_t x = rank;
    comm->allReduce(1, &x, 1, PCCRT_I64, PCCRT_REDUCE_SUM);
    return x == 3 ? 0 : 1;
  });
  EXPECT_EQ(statuses, std::vector<int>(3, 0));
}

TEST(SocketComm, RendezvousFailures) {
  int port = freePort();
  auto failsWith = [&](int rank, int size, std::vector<int64_t> mesh,
                       double timeout, const std::string &part) {
    try {
      createSocketCommunicator(mesh, bootstrapFor(rank, size, port, timeout));
      std::fprintf(stderr, "rank %d: FAIL no error, expected '%s'\n", rank,
                   part.c_str());
      return 1;
    } catch (const Error &e) {
      std::string what = e.what();
      if (contains(what, part) && what.find('\n') == std::string::npos)
        return 0;
      std::fprintf(stderr, "rank %d: FAIL '%s', expected '%s'\n", rank,
                   e.what(), part.c_str());
      return 1;
    }
  };
  // No rank 0: the others give up after the timeout.
  EXPECT_EQ(forkRanks(1,
                      [&](int) {
                        return failsWith(1, 2, {2}, 1,
                                         "rendezvous: no rank 0 at "
                                         "127.0.0.1:" +
                                             std::to_string(port) +
                                             " (MASTER_ADDR:MASTER_PORT) "
                                             "within 1 s");
                      }),
            std::vector<int>{0});
  // Rank 0 alone: it names who did not come.
  EXPECT_EQ(forkRanks(1,
                      [&](int) {
                        return failsWith(0, 3, {3}, 1,
                                         "rendezvous: ranks 1 and 2 of 3 did "
                                         "not join rank 0 at port " +
                                             std::to_string(port) +
                                             " within 1 s");
                      }),
            std::vector<int>{0});
  // Ranks that disagree on the world size: both say so.
  EXPECT_EQ(forkRanks(2,
                      [&](int rank) {
                        return failsWith(rank, rank ? 3 : 2,
                                         rank ? std::vector<int64_t>{3}
                                              : std::vector<int64_t>{2},
                                         10,
                                         "rank 1 has WORLD_SIZE=3, rank 0 "
                                         "has 2");
                      }),
            std::vector<int>(2, 0));
  // Two processes that say they are rank 1.
  EXPECT_EQ(forkRanks(3,
                      [&](int rank) {
                        return failsWith(rank ? 1 : 0, 3, {3}, 10,
                                         "two processes joined as rank 1");
                      }),
            std::vector<int>(3, 0));
  // Other meshes of as many ranks.
  EXPECT_EQ(forkRanks(2,
                      [&](int rank) {
                        return failsWith(rank, 4,
                                         rank ? std::vector<int64_t>{4}
                                              : std::vector<int64_t>{2, 2},
                                         10,
                                         "rendezvous: rank 1 runs a program "
                                         "of another mesh than rank 0's");
                      }),
            std::vector<int>(2, 0));

  // The port is taken by a process that never answers: rank 0 cannot
  // listen, and a rank that reaches the process gives up.
  port = freePort();
  int taken = ::socket(AF_INET, SOCK_STREAM, 0), one = 1;
  ::setsockopt(taken, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(uint16_t(port));
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  // A long queue: the kernel completes the handshakes of every attempt
  // (none is accepted), so that a rank reaches the process and waits for
  // an answer rather than for a place in a full queue.
  ASSERT_EQ(::listen(taken, 128), 0);
  EXPECT_EQ(forkRanks(1,
                      [&](int) {
                        return failsWith(0, 2, {2}, 1,
                                         "rendezvous: rank 0 cannot listen on "
                                         "port " +
                                             std::to_string(port) +
                                             " (MASTER_PORT): Address "
                                             "already in use");
                      }),
            std::vector<int>{0});
  EXPECT_EQ(forkRanks(1,
                      [&](int) {
                        return failsWith(1, 2, {2}, 1, "rank 0 did not answer");
                      }),
            std::vector<int>{0});
  // A process there that answers, but not as rank 0.
  EXPECT_EQ(forkRanks(
                2,
                [&](int rank) {
                  if (rank == 1)
                    return failsWith(1, 2, {2}, 1.5, "not rank 0 of a pcc run");
                  auto until = std::chrono::steady_clock::now() +
                               std::chrono::seconds(2);
                  while (std::chrono::steady_clock::now() < until) {
                    pollfd p{taken, POLLIN, 0};
                    if (::poll(&p, 1, 100) <= 0)
                      continue;
                    int fd = ::accept(taken, nullptr, nullptr);
                    char junk[64];
                    std::memset(junk, 'x', sizeof junk);
                    ::send(fd, junk, sizeof junk, MSG_NOSIGNAL);
                    ::close(fd);
                  }
                  return 0;
                },
                10),
            std::vector<int>(2, 0));
  ::close(taken);
}

TEST(SocketComm, BootstrapFromTheEnvironment) {
  auto set = [](const char *rank, const char *size, const char *addr,
                const char *port) {
    for (auto [name, value] : {std::pair{"RANK", rank},
                               {"WORLD_SIZE", size},
                               {"MASTER_ADDR", addr},
                               {"MASTER_PORT", port}})
      if (value)
        setenv(name, value, 1);
      else
        unsetenv(name);
    unsetenv("LOCAL_RANK");
    unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  };
  auto error = [] {
    try {
      SocketBootstrap::fromEnvironment();
      return std::string("no error");
    } catch (const Error &e) {
      return std::string(e.what());
    }
  };
  set(nullptr, nullptr, nullptr, nullptr);
  EXPECT_FALSE(SocketBootstrap::inEnvironment());
  set("1", "4", "node0", "29500");
  EXPECT_TRUE(SocketBootstrap::inEnvironment());
  setenv("LOCAL_RANK", "1", 1);
  SocketBootstrap b = SocketBootstrap::fromEnvironment();
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.worldSize, 4);
  EXPECT_EQ(b.masterAddr, "node0");
  EXPECT_EQ(b.masterPort, 29500);
  EXPECT_EQ(b.localRank, 1);
  EXPECT_EQ(b.portSource, "MASTER_PORT");
  // torchrun's agent holds MASTER_PORT: rank 0 listens beside it.
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  b = SocketBootstrap::fromEnvironment();
  EXPECT_EQ(b.masterPort, 29501);
  EXPECT_EQ(b.portSource, "MASTER_PORT + 1");
  setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
  EXPECT_EQ(SocketBootstrap::fromEnvironment().masterPort, 29500);
  set("1", "4", "node0", "65535");
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  EXPECT_TRUE(contains(error(), "leaves no port for rank 0")) << error();

  set("1", "4", "node0", nullptr);
  EXPECT_TRUE(contains(error(), "MASTER_PORT is not set")) << error();
  set("1", "4", nullptr, "29500");
  EXPECT_TRUE(contains(error(), "MASTER_ADDR is not set")) << error();
  set("1", nullptr, "node0", "29500");
  EXPECT_TRUE(contains(error(), "WORLD_SIZE is not set")) << error();
  set("x", "4", "node0", "29500");
  EXPECT_EQ(error(), "RANK='x' is not a rank of WORLD_SIZE=4 (0 to 3)");
  set("4", "4", "node0", "29500");
  EXPECT_EQ(error(), "RANK='4' is not a rank of WORLD_SIZE=4 (0 to 3)");
  set("0", "-2", "node0", "29500");
  EXPECT_EQ(error(),
            "WORLD_SIZE='-2' is not a number of ranks (an integer from 1)");
  set("0", "4", "node0", "70000");
  EXPECT_EQ(error(), "MASTER_PORT='70000' is not a port (1 to 65535)");
  set("0", "4", "node0", "29500 ");
  EXPECT_EQ(error(), "MASTER_PORT='29500 ' is not a port (1 to 65535)");
  set("0", "4", "", "29500");
  EXPECT_TRUE(contains(error(), "MASTER_ADDR is empty")) << error();
  set("0", "4", "node0", "29500");
  setenv("LOCAL_RANK", "one", 1);
  EXPECT_EQ(error(),
            "LOCAL_RANK='one' is not a local rank (an integer from 0)");
  set(nullptr, nullptr, nullptr, nullptr);
}
