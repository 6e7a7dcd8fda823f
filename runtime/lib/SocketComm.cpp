//===- SocketComm.cpp - The TCP socket backend of communicators -----------===//
//
// Ranks that no MPI launcher started meet as torchrun's workers do. Rank 0
// listens at MASTER_PORT; every other rank connects to MASTER_ADDR, sends its
// rank and the port it listens on, and receives every rank's address (as
// rank 0 saw it) and a token of the run. Each rank then connects to the
// listeners of the ranks above it, so that every pair of ranks shares one
// connection, all made before the communicator exists: no operation waits
// for a connection, and no order of first uses can deadlock.
//
// A thread reads every connection as data arrives. A message lands in the
// buffer of a receive posted for it, or is kept until one is; so a send,
// a blocking write, always completes (the peer's side is always drained),
// two pipeline stages that both send first cannot deadlock, and isend is
// send. Messages carry their group (the axes mask), a tag, and their size,
// and match receives in order per group and tag, as MPI's do. Collectives
// are such messages tagged with a count of the group's collectives, which
// its members run in the same order.
//
// Reductions are bitwise the same on every member: each member owns a
// block of the result and combines the group's contributions to it in
// group position order (16-bit floats in float, as the MPI backend does),
// then the owners send their blocks to everyone.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"
#include "pccrt/Comm.h"
#include "pccrt/Runtime.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>

using namespace pccrt;

//===----------------------------------------------------------------------===//
// The environment
//===----------------------------------------------------------------------===//

namespace {
/// A decimal integer in [lo, hi], with nothing before or after it.
bool parseInteger(const char *text, int64_t lo, int64_t hi, int64_t &value) {
  if (!text || !*text)
    return false;
  int64_t v = 0;
  for (const char *p = text; *p; ++p) {
    if (*p < '0' || *p > '9')
      return false;
    v = v * 10 + (*p - '0');
    if (v > hi)
      return false;
  }
  if (v < lo)
    return false;
  value = v;
  return true;
}

/// $name, or throws naming it.
const char *required(const char *name) {
  const char *value = std::getenv(name);
  if (!value)
    throw Error(std::string(name) +
                " is not set: a run without MPI takes RANK, WORLD_SIZE, "
                "MASTER_ADDR and MASTER_PORT from the environment, as "
                "torchrun sets them");
  return value;
}

std::string quoted(const char *name, const char *value) {
  return std::string(name) + "='" + value + "'";
}
} // namespace

bool SocketBootstrap::inEnvironment() {
  return std::getenv("RANK") || std::getenv("WORLD_SIZE");
}

SocketBootstrap SocketBootstrap::fromEnvironment() {
  SocketBootstrap b;
  int64_t value = 0;
  const char *size = required("WORLD_SIZE");
  if (!parseInteger(size, 1, INT_MAX, value))
    throw Error(quoted("WORLD_SIZE", size) +
                " is not a number of ranks (an integer from 1)");
  b.worldSize = int(value);
  const char *rank = required("RANK");
  if (!parseInteger(rank, 0, b.worldSize - 1, value))
    throw Error(quoted("RANK", rank) +
                " is not a rank of WORLD_SIZE=" + std::to_string(b.worldSize) +
                " (0 to " + std::to_string(b.worldSize - 1) + ")");
  b.rank = int(value);
  b.masterAddr = required("MASTER_ADDR");
  if (b.masterAddr.empty())
    throw Error("MASTER_ADDR is empty: it names the host of rank 0");
  const char *port = required("MASTER_PORT");
  if (!parseInteger(port, 1, 65535, value))
    throw Error(quoted("MASTER_PORT", port) + " is not a port (1 to 65535)");
  b.masterPort = int(value);
  // torchrun's agent on the first node serves its own store at MASTER_PORT
  // when it says so (its c10d and static rendezvous do by default).
  const char *agentStore = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (agentStore && std::strcmp(agentStore, "True") == 0) {
    if (b.masterPort == 65535)
      throw Error("MASTER_PORT='65535' leaves no port for rank 0 beside "
                  "torchrun's store (TORCHELASTIC_USE_AGENT_STORE=True)");
    b.masterPort += 1;
    b.portSource = "MASTER_PORT + 1";
  }
  if (const char *local = std::getenv("LOCAL_RANK")) {
    if (!parseInteger(local, 0, INT_MAX, value))
      throw Error(quoted("LOCAL_RANK", local) +
                  " is not a local rank (an integer from 0)");
    b.localRank = int(value);
  }
  return b;
}

//===----------------------------------------------------------------------===//
// Sockets
//===----------------------------------------------------------------------===//

namespace {
using Clock = std::chrono::steady_clock;

/// When to give up: never, for a timeout that is not positive.
class Deadline {
public:
  explicit Deadline(double seconds) : seconds(seconds) {
    if (seconds > 0)
      at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(seconds));
  }
  bool passed() const { return seconds > 0 && Clock::now() >= at; }
  /// The time left for poll(), in ms, at most \p cap; -1 (no limit) if
  /// neither bounds it.
  int pollMs(int cap = -1) const {
    if (seconds <= 0)
      return cap;
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now())
            .count();
    left = std::max<decltype(left)>(left, 0);
    return int(cap < 0 ? std::min<decltype(left)>(left, INT_MAX)
                       : std::min<decltype(left)>(left, cap));
  }
  std::string describe() const {
    char text[32];
    std::snprintf(text, sizeof text, "%g s", seconds);
    return text;
  }

private:
  double seconds;
  Clock::time_point at;
};

/// A file descriptor, closed with its owner.
class Fd {
public:
  Fd() = default;
  explicit Fd(int fd) : fd(fd) {}
  Fd(Fd &&other) noexcept : fd(std::exchange(other.fd, -1)) {}
  Fd &operator=(Fd &&other) noexcept {
    if (this != &other) {
      reset();
      fd = std::exchange(other.fd, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0)
      ::close(fd);
    fd = -1;
  }
  int get() const { return fd; }
  explicit operator bool() const { return fd >= 0; }

private:
  int fd = -1;
};

int pollRetrying(pollfd *fds, nfds_t count, int ms) {
  for (;;) {
    int n = ::poll(fds, count, ms);
    if (n >= 0 || errno != EINTR)
      return n;
  }
}

/// Writes every byte of \p iov (a blocking socket): 0 or an errno value.
int writeFully(int fd, iovec *iov, int count) {
  while (count > 0) {
    if (iov->iov_len == 0) {
      ++iov, --count;
      continue;
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = size_t(count);
    ssize_t n = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd p{fd, POLLOUT, 0};
        pollRetrying(&p, 1, -1);
        continue;
      }
      return errno;
    }
    for (size_t left = size_t(n); left > 0;) {
      size_t taken = std::min(left, iov->iov_len);
      iov->iov_base = static_cast<char *>(iov->iov_base) + taken;
      iov->iov_len -= taken;
      left -= taken;
      if (iov->iov_len == 0)
        ++iov, --count;
    }
  }
  return 0;
}

int writeFully(int fd, const void *data, size_t size) {
  iovec iov{const_cast<void *>(data), size};
  return writeFully(fd, &iov, 1);
}

/// Reads exactly \p size bytes before \p deadline: 0, an errno value
/// (ETIMEDOUT when the deadline passed), or -1 at the end of the stream.
int readFully(int fd, void *data, size_t size, const Deadline &deadline) {
  char *to = static_cast<char *>(data);
  while (size > 0) {
    pollfd p{fd, POLLIN, 0};
    int ready = pollRetrying(&p, 1, deadline.pollMs());
    if (ready < 0)
      return errno;
    if (ready == 0)
      return ETIMEDOUT;
    ssize_t n = ::recv(fd, to, size, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      return errno;
    }
    if (n == 0)
      return -1;
    to += n;
    size -= size_t(n);
  }
  return 0;
}

std::string readError(int error) {
  return error < 0 ? "the connection closed" : std::strerror(error);
}

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void setBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

/// A connection to \p address made before \p deadline, or none with the
/// errno value in \p error. The socket blocks.
Fd connectTo(const sockaddr *address, socklen_t length,
             const Deadline &deadline, int &error) {
  Fd fd(::socket(address->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                 0));
  if (!fd) {
    error = errno;
    return Fd();
  }
  if (::connect(fd.get(), address, length) < 0) {
    if (errno != EINPROGRESS) {
      error = errno;
      return Fd();
    }
    pollfd p{fd.get(), POLLOUT, 0};
    int ready = pollRetrying(&p, 1, deadline.pollMs());
    if (ready <= 0) {
      error = ready == 0 ? ETIMEDOUT : errno;
      return Fd();
    }
    int status = 0;
    socklen_t size = sizeof status;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &status, &size);
    if (status) {
      error = status;
      return Fd();
    }
  }
  setBlocking(fd.get());
  return fd;
}

/// A socket listening on \p port (0: one the system picks) of every address
/// of \p family (IPv6 also takes IPv4), or none with the errno value in
/// \p error.
Fd listenOn(int family, int port, int backlog, int &error) {
  Fd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    error = errno;
    return Fd();
  }
  // A port of a run that just ended (its connections in TIME_WAIT) is free
  // again; one that a process listens on is not.
  int one = 1, zero = 0;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage address{};
  socklen_t length;
  if (family == AF_INET6) {
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    auto *a = reinterpret_cast<sockaddr_in6 *>(&address);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    a->sin6_port = htons(uint16_t(port));
    length = sizeof *a;
  } else {
    auto *a = reinterpret_cast<sockaddr_in *>(&address);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    a->sin_port = htons(uint16_t(port));
    length = sizeof *a;
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr *>(&address), length) < 0 ||
      ::listen(fd.get(), backlog) < 0) {
    error = errno;
    return Fd();
  }
  return fd;
}

int localPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length);
  if (address.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6 *>(&address)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in *>(&address)->sin_port);
}

/// Accepts one connection on \p listener before \p deadline: none if the
/// deadline passed (\p timedOut) or the connection failed.
Fd acceptBefore(int listener, const Deadline &deadline, bool &timedOut,
                sockaddr_storage *from = nullptr) {
  pollfd p{listener, POLLIN, 0};
  int ready = pollRetrying(&p, 1, deadline.pollMs());
  timedOut = ready == 0;
  if (ready <= 0)
    return Fd();
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  Fd fd(::accept4(listener, reinterpret_cast<sockaddr *>(&address), &length,
                  SOCK_CLOEXEC));
  if (fd && from)
    *from = address;
  return fd;
}

void sleepBriefly(const Deadline &deadline) {
  int ms = deadline.pollMs(100);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms < 0 ? 100 : ms));
}

/// "host:port", "[v6]:port".
std::string hostPort(const std::string &host, int port) {
  if (host.find(':') != std::string::npos)
    return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

//===----------------------------------------------------------------------===//
// The rendezvous
//===----------------------------------------------------------------------===//

// The byte layouts on the wire: host order, which pccrt requires to be
// little-endian on every rank.
constexpr uint64_t kMagic = 0x31766e6474636370ull; // "pcctdnv1"

/// A rank's request to join, sent to rank 0.
struct JoinRequest {
  uint64_t magic;
  int32_t rank;
  int32_t worldSize;
  uint64_t meshHash;
  uint32_t port; ///< where this rank listens for the ranks below it
  uint32_t reserved;
};

/// Where a rank listens, as rank 0 saw its address.
struct Endpoint {
  uint32_t family; ///< AF_INET or AF_INET6
  uint32_t port;
  uint8_t address[16];
  uint32_t scope;
  uint32_t reserved;
};

/// Rank 0's answer: `worldSize` endpoints follow, or, if `status` is not 0,
/// `length` bytes of the error that ends the run.
struct JoinReply {
  uint64_t magic;
  uint64_t token;
  uint32_t status;
  uint32_t length;
};

/// What a rank says on connecting to a rank above it.
struct Greeting {
  uint64_t magic;
  uint64_t token;
  int32_t rank;
  uint32_t reserved;
};

Endpoint endpointOf(const sockaddr_storage &address, uint32_t port) {
  Endpoint e{};
  e.port = port;
  if (address.ss_family == AF_INET6) {
    auto *a = reinterpret_cast<const sockaddr_in6 *>(&address);
    // An IPv4 peer of a dual-stack listener: its plain IPv4 address.
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
      e.family = AF_INET;
      std::memcpy(e.address, a->sin6_addr.s6_addr + 12, 4);
      return e;
    }
    e.family = AF_INET6;
    std::memcpy(e.address, a->sin6_addr.s6_addr, 16);
    e.scope = a->sin6_scope_id;
    return e;
  }
  e.family = AF_INET;
  std::memcpy(e.address,
              &reinterpret_cast<const sockaddr_in *>(&address)->sin_addr, 4);
  return e;
}

socklen_t sockaddrOf(const Endpoint &e, sockaddr_storage &address) {
  address = sockaddr_storage{};
  if (e.family == AF_INET6) {
    auto *a = reinterpret_cast<sockaddr_in6 *>(&address);
    a->sin6_family = AF_INET6;
    std::memcpy(a->sin6_addr.s6_addr, e.address, 16);
    a->sin6_port = htons(uint16_t(e.port));
    a->sin6_scope_id = e.scope;
    return sizeof *a;
  }
  auto *a = reinterpret_cast<sockaddr_in *>(&address);
  a->sin_family = AF_INET;
  std::memcpy(&a->sin_addr, e.address, 4);
  a->sin_port = htons(uint16_t(e.port));
  return sizeof *a;
}

std::string describe(const Endpoint &e) {
  char host[INET6_ADDRSTRLEN] = "?";
  ::inet_ntop(e.family == AF_INET6 ? AF_INET6 : AF_INET, e.address, host,
              sizeof host);
  return hostPort(host, int(e.port));
}

uint64_t meshHash(const std::vector<int64_t> &mesh) {
  // FNV-1a over the extents.
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t d : mesh)
    for (int i = 0; i < 8; ++i) {
      h ^= uint64_t(d >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  return h;
}

/// "rank 3", "ranks 2 and 3", "ranks 1, 2 and 3".
std::string rankList(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i == 0                  ? ""
             : i + 1 == ranks.size() ? " and "
                                     : ", ") +
            std::to_string(ranks[i]);
  return text;
}

/// Rank 0: takes every other rank's join request at the master port, then
/// tells each one every rank's address and the run's token. The join
/// connections stay, as rank 0's connections to the others (by rank).
std::vector<Fd> gatherRanks(const SocketBootstrap &b, uint64_t mesh,
                            const Deadline &deadline, uint64_t &token) {
  int n = b.worldSize, error = 0;
  Fd listener = listenOn(AF_INET6, b.masterPort, n, error);
  if (!listener && error != EADDRINUSE && error != EACCES)
    listener = listenOn(AF_INET, b.masterPort, n, error);
  if (!listener)
    throw Error("rendezvous: rank 0 cannot listen on port " +
                std::to_string(b.masterPort) + " (" + b.portSource +
                "): " + std::strerror(error));

  std::vector<Fd> peers(static_cast<size_t>(n));
  std::vector<Endpoint> table(static_cast<size_t>(n));
  // An error ends the run on every rank that joined: each is told why.
  auto fail = [&](const std::string &message, Fd *also = nullptr) {
    JoinReply reply{kMagic, 0, 1, uint32_t(message.size())};
    auto tell = [&](Fd &fd) {
      iovec iov[2] = {{&reply, sizeof reply},
                      {const_cast<char *>(message.data()), message.size()}};
      writeFully(fd.get(), iov, 2);
    };
    for (Fd &fd : peers)
      if (fd)
        tell(fd);
    if (also && *also)
      tell(*also);
    throw Error(message);
  };
  int joined = 1;
  while (joined < n) {
    bool timedOut = false;
    sockaddr_storage from{};
    Fd conn = acceptBefore(listener.get(), deadline, timedOut, &from);
    if (timedOut) {
      std::vector<int> missing;
      for (int r = 1; r < n; ++r)
        if (!peers[size_t(r)])
          missing.push_back(r);
      fail("rendezvous: " + rankList(missing) + " of " + std::to_string(n) +
           " did not join rank 0 at port " + std::to_string(b.masterPort) +
           " within " + deadline.describe());
    }
    if (!conn)
      continue;
    // A process that is no rank of this run (a port scan, a stale rank of
    // another run) is dropped; it may not hold up the others for long.
    JoinRequest request{};
    if (readFully(conn.get(), &request, sizeof request, Deadline(10)) != 0 ||
        request.magic != kMagic)
      continue;
    if (request.worldSize != n)
      fail("rendezvous: rank " + std::to_string(request.rank) +
               " has WORLD_SIZE=" + std::to_string(request.worldSize) +
               ", rank 0 has " + std::to_string(n),
           &conn);
    if (request.rank < 1 || request.rank >= n)
      fail("rendezvous: a process joined as rank " +
               std::to_string(request.rank) +
               " of WORLD_SIZE=" + std::to_string(n),
           &conn);
    if (peers[size_t(request.rank)])
      fail("rendezvous: two processes joined as rank " +
               std::to_string(request.rank),
           &conn);
    if (request.meshHash != mesh)
      fail("rendezvous: rank " + std::to_string(request.rank) +
               " runs a program of another mesh than rank 0's",
           &conn);
    table[size_t(request.rank)] = endpointOf(from, request.port);
    peers[size_t(request.rank)] = std::move(conn);
    ++joined;
  }

  std::random_device device;
  token = (uint64_t(device()) << 32) ^ device();
  JoinReply reply{kMagic, token, 0, 0};
  for (int r = 1; r < n; ++r) {
    iovec iov[2] = {{&reply, sizeof reply},
                    {table.data(), table.size() * sizeof(Endpoint)}};
    if (int error = writeFully(peers[size_t(r)].get(), iov, 2))
      throw Error("rendezvous: rank " + std::to_string(r) +
                  " left before it was told the others' addresses: " +
                  std::strerror(error));
  }
  return peers;
}

/// Ranks from 1: joins rank 0, then connects to the ranks above and
/// accepts the ranks below. Returns the connections, by rank.
std::vector<Fd> joinRanks(const SocketBootstrap &b, uint64_t mesh,
                          const Deadline &deadline, uint64_t &token) {
  int n = b.worldSize;
  std::string master = hostPort(b.masterAddr, b.masterPort);
  std::string port = std::to_string(b.masterPort);
  // Why the last attempt failed; what answered instead of rank 0, or a
  // connection that rank 0's address took but never answered, if either
  // happened, says more than a later attempt that timed out.
  std::string last = "no answer", stranger, silent;
  Fd toRoot, listener;
  std::vector<Endpoint> table(static_cast<size_t>(n));
  for (bool first = true;; first = false) {
    if (!first) {
      if (deadline.passed())
        throw Error("rendezvous: no rank 0 at " + master + " (MASTER_ADDR:" +
                    b.portSource + ") within " + deadline.describe() + ": " +
                    (!stranger.empty() ? stranger
                     : !silent.empty() ? silent
                                       : last));
      sleepBriefly(deadline);
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    if (int error =
            ::getaddrinfo(b.masterAddr.c_str(), port.c_str(), &hints, &found)) {
      last = std::string("cannot resolve MASTER_ADDR '") + b.masterAddr +
             "': " + ::gai_strerror(error);
      continue;
    }
    Fd conn;
    for (addrinfo *a = found; a && !conn; a = a->ai_next) {
      int error = 0;
      conn = connectTo(a->ai_addr, a->ai_addrlen, deadline, error);
      if (!conn)
        last = std::strerror(error);
    }
    ::freeaddrinfo(found);
    if (!conn)
      continue;
    // The ranks above connect to this rank's listener, on the address
    // rank 0 sees it from: of the family that reached rank 0.
    sockaddr_storage self{};
    socklen_t length = sizeof self;
    ::getsockname(conn.get(), reinterpret_cast<sockaddr *>(&self), &length);
    if (!listener) {
      int error = 0;
      listener = listenOn(self.ss_family, 0, n, error);
      if (!listener)
        throw Error(std::string("rendezvous: cannot listen for the other "
                                "ranks: ") +
                    std::strerror(error));
    }
    JoinRequest request{
        kMagic, b.rank, n, mesh, uint32_t(localPort(listener.get())), 0};
    if (int error = writeFully(conn.get(), &request, sizeof request)) {
      last = std::strerror(error);
      continue;
    }
    JoinReply reply{};
    int error = readFully(conn.get(), &reply, sizeof reply, deadline);
    if (error) {
      last = error == ETIMEDOUT
                 ? "joined, but rank 0 did not answer"
                 : "rank 0 answered nothing (" + readError(error) + ")";
      if (error == ETIMEDOUT)
        silent = last;
      continue;
    }
    if (reply.magic != kMagic) {
      stranger = "what listens there is not rank 0 of a pcc run";
      continue;
    }
    if (reply.status != 0) {
      std::string message(std::min<uint32_t>(reply.length, 4096), '\0');
      readFully(conn.get(), message.data(), message.size(), Deadline(10));
      throw Error(message);
    }
    error = readFully(conn.get(), table.data(), table.size() * sizeof(Endpoint),
                      deadline);
    if (error)
      throw Error("rendezvous: rank 0 did not send the ranks' addresses: " +
                  readError(error));
    token = reply.token;
    toRoot = std::move(conn);
    break;
  }

  std::vector<Fd> peers(static_cast<size_t>(n));
  peers[0] = std::move(toRoot);
  // Connecting needs no accept on the other side (the listeners' backlog
  // holds every rank), so the ranks cannot wait on one another here.
  for (int r = b.rank + 1; r < n; ++r) {
    sockaddr_storage address;
    socklen_t length = sockaddrOf(table[size_t(r)], address);
    Fd conn;
    int error = 0;
    while (!(conn = connectTo(reinterpret_cast<sockaddr *>(&address), length,
                              deadline, error))) {
      if (deadline.passed() || (error != ECONNREFUSED && error != EINTR))
        throw Error("rendezvous: cannot connect to rank " + std::to_string(r) +
                    " at " + describe(table[size_t(r)]) + ": " +
                    std::strerror(error));
      sleepBriefly(deadline);
    }
    Greeting greeting{kMagic, token, b.rank, 0};
    if (int error = writeFully(conn.get(), &greeting, sizeof greeting))
      throw Error("rendezvous: cannot greet rank " + std::to_string(r) + ": " +
                  std::strerror(error));
    peers[size_t(r)] = std::move(conn);
  }
  for (int joined = 1; joined < b.rank;) {
    bool timedOut = false;
    Fd conn = acceptBefore(listener.get(), deadline, timedOut);
    if (timedOut) {
      std::vector<int> missing;
      for (int r = 1; r < b.rank; ++r)
        if (!peers[size_t(r)])
          missing.push_back(r);
      throw Error("rendezvous: " + rankList(missing) +
                  " did not connect to "
                  "rank " +
                  std::to_string(b.rank) + " within " + deadline.describe());
    }
    if (!conn)
      continue;
    Greeting greeting{};
    if (readFully(conn.get(), &greeting, sizeof greeting, Deadline(10)) != 0 ||
        greeting.magic != kMagic || greeting.token != token ||
        greeting.rank < 1 || greeting.rank >= b.rank ||
        peers[size_t(greeting.rank)])
      continue;
    peers[size_t(greeting.rank)] = std::move(conn);
    ++joined;
  }
  return peers;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

bool isHalfFloat(int32_t dtype) {
  return dtype == PCCRT_F16 || dtype == PCCRT_BF16;
}

float widen(uint16_t v, int32_t dtype) {
  return dtype == PCCRT_F16 ? detail::halfToFloat(v) : detail::bfloatToFloat(v);
}

uint16_t narrow(float v, int32_t dtype) {
  return dtype == PCCRT_F16 ? detail::floatToHalf(v) : detail::floatToBfloat(v);
}

/// a = a (reduction) b, elementwise; integers wrap as the hardware does.
template <typename T>
void combine(T *a, const T *b, int64_t count, int32_t reduction) {
  switch (reduction) {
  case PCCRT_REDUCE_SUM:
  case PCCRT_REDUCE_MEAN:
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      for (int64_t i = 0; i < count; ++i)
        a[i] = T(U(a[i]) + U(b[i]));
    } else {
      for (int64_t i = 0; i < count; ++i)
        a[i] += b[i];
    }
    return;
  case PCCRT_REDUCE_MAX:
    for (int64_t i = 0; i < count; ++i)
      a[i] = b[i] > a[i] ? b[i] : a[i];
    return;
  case PCCRT_REDUCE_MIN:
    for (int64_t i = 0; i < count; ++i)
      a[i] = b[i] < a[i] ? b[i] : a[i];
    return;
  }
}

template <typename T>
void reduceAll(const std::vector<const void *> &parts, void *out, int64_t count,
               int32_t reduction) {
  T *acc = static_cast<T *>(out);
  std::memcpy(acc, parts[0], size_t(count) * sizeof(T));
  for (size_t p = 1; p < parts.size(); ++p)
    combine(acc, static_cast<const T *>(parts[p]), count, reduction);
  if (reduction == PCCRT_REDUCE_MEAN) {
    if constexpr (std::is_floating_point_v<T>)
      for (int64_t i = 0; i < count; ++i)
        acc[i] /= T(parts.size());
  }
}

/// Combines the group's contributions \p parts (by group position) into
/// \p out, which overlaps none of them.
void reduceInOrder(const std::vector<const void *> &parts, void *out,
                   int64_t count, int32_t dtype, int32_t reduction) {
  if (isHalfFloat(dtype)) {
    // Summed in float and rounded once, as the MPI backend does.
    std::vector<float> acc(static_cast<size_t>(count));
    std::vector<const void *> wide;
    std::vector<std::vector<float>> widened(parts.size());
    for (size_t p = 0; p < parts.size(); ++p) {
      const uint16_t *h = static_cast<const uint16_t *>(parts[p]);
      widened[p].resize(size_t(count));
      for (int64_t i = 0; i < count; ++i)
        widened[p][size_t(i)] = widen(h[i], dtype);
      wide.push_back(widened[p].data());
    }
    reduceAll<float>(wide, acc.data(), count, reduction);
    uint16_t *o = static_cast<uint16_t *>(out);
    for (int64_t i = 0; i < count; ++i)
      o[i] = narrow(acc[size_t(i)], dtype);
    return;
  }
  switch (dtype) {
  case PCCRT_F32:
    return reduceAll<float>(parts, out, count, reduction);
  case PCCRT_F64:
    return reduceAll<double>(parts, out, count, reduction);
  case PCCRT_I64:
    return reduceAll<int64_t>(parts, out, count, reduction);
  case PCCRT_I32:
    return reduceAll<int32_t>(parts, out, count, reduction);
  case PCCRT_I16:
    return reduceAll<int16_t>(parts, out, count, reduction);
  case PCCRT_I8:
    return reduceAll<int8_t>(parts, out, count, reduction);
  case PCCRT_U64:
    return reduceAll<uint64_t>(parts, out, count, reduction);
  case PCCRT_U32:
    return reduceAll<uint32_t>(parts, out, count, reduction);
  case PCCRT_U16:
    return reduceAll<uint16_t>(parts, out, count, reduction);
  case PCCRT_U8:
  case PCCRT_BOOL:
    return reduceAll<uint8_t>(parts, out, count, reduction);
  }
}

/// Throws unless \p dtype and \p reduction can be reduced, before any rank
/// sends anything.
void checkReduction(int32_t dtype, int32_t reduction) {
  if (reduction < PCCRT_REDUCE_SUM || reduction > PCCRT_REDUCE_MEAN)
    throw Error("communicator: unknown reduction " + std::to_string(reduction));
  if (reduction == PCCRT_REDUCE_MEAN && dtype != PCCRT_F32 &&
      dtype != PCCRT_F64 && !isHalfFloat(dtype))
    throw Error("communicator: a mean needs float32 or float64 data");
}

//===----------------------------------------------------------------------===//
// The communicator
//===----------------------------------------------------------------------===//

class SocketCommunicator final : public Communicator {
public:
  SocketCommunicator(int rank, int size, std::vector<int64_t> mesh,
                     std::vector<Fd> sockets, double closeSeconds)
      : Communicator(rank, size, std::move(mesh)), closeSeconds(closeSeconds) {
    for (int r = 0; r < size; ++r) {
      peers.push_back(std::make_unique<Peer>());
      peers.back()->rank = r;
      if (r != rank) {
        peers.back()->fd = std::move(sockets[size_t(r)]);
        setNoDelay(peers.back()->fd.get());
      }
    }
    int pipeEnds[2];
    if (::pipe2(pipeEnds, O_CLOEXEC | O_NONBLOCK) < 0)
      throw Error(std::string("communicator: cannot make a pipe: ") +
                  std::strerror(errno));
    wakeRead = Fd(pipeEnds[0]);
    wakeWrite = Fd(pipeEnds[1]);
    reader = std::thread([this] { readLoop(); });
  }

  ~SocketCommunicator() override {
    bool usable;
    {
      std::lock_guard<std::mutex> lock(mutex);
      usable = failure.empty();
    }
    if (usable) {
      // As MPI_Finalize: each rank says it is done and closes its sending
      // side, then waits for every other to do so. A rank that closed while
      // a peer's data was still unread would reset the connection, and the
      // peer could lose what this rank sent last.
      Header bye{kBye, 0, 0, 0};
      for (auto &p : peers)
        if (p->fd) {
          std::lock_guard<std::mutex> lock(p->sendMutex);
          writeFully(p->fd.get(), &bye, sizeof bye);
          ::shutdown(p->fd.get(), SHUT_WR);
        }
      std::unique_lock<std::mutex> lock(mutex);
      auto allClosed = [&] {
        for (auto &p : peers)
          if (p->fd && p->state == Peer::Open)
            return false;
        return true;
      };
      if (closeSeconds > 0)
        changed.wait_for(lock, std::chrono::duration<double>(closeSeconds),
                         allClosed);
      else
        changed.wait(lock, allClosed);
    }
    stopReader();
  }

  [[noreturn]] void abort(int code) override {
    // From any thread: the other ranks see their connections close and
    // fail their operations, and so end too.
    for (auto &p : peers)
      if (p->fd)
        ::shutdown(p->fd.get(), SHUT_RDWR);
    _exit(code);
  }

protected:
  void doAllReduce(uint32_t axes, void *data, int64_t count, int32_t dtype,
                   int32_t reduction) override {
    checkUsable();
    checkReduction(dtype, reduction);
    size_t element = elementSize(dtype);
    checkedBytes(count, element);
    int64_t n = groupSize(axes), me = groupPosition(axes);
    Key reduce = nextCollective(axes), share = nextCollective(axes);
    if (n == 1)
      return;
    // Block p of the result is reduced by position p, then sent to all.
    auto begin = [&](int64_t p) {
      return p * (count / n) + std::min<int64_t>(p, count % n);
    };
    auto length = [&](int64_t p) { return begin(p + 1) - begin(p); };
    char *bytes = static_cast<char *>(data);
    uint64_t mine = uint64_t(length(me)) * element;
    std::vector<std::vector<char>> parts(static_cast<size_t>(n));
    std::vector<Receive> reductions, shares;
    if (mine)
      for (int64_t q = 0; q < n; ++q)
        if (q != me) {
          parts[size_t(q)].resize(mine);
          reductions.push_back(
              post(memberRank(axes, q), reduce, parts[size_t(q)].data(), mine));
        }
    for (int64_t k = 1; k < n; ++k) {
      int64_t q = (me + k) % n;
      if (length(q))
        sendTo(memberRank(axes, q), reduce,
               bytes + uint64_t(begin(q)) * element,
               uint64_t(length(q)) * element, "all_reduce");
    }
    // The blocks just sent are free to receive the others' results.
    for (int64_t q = 0; q < n; ++q)
      if (q != me && length(q))
        shares.push_back(post(memberRank(axes, q), share,
                              bytes + uint64_t(begin(q)) * element,
                              uint64_t(length(q)) * element));
    if (mine) {
      for (Receive &r : reductions)
        complete(r, "all_reduce");
      std::vector<const void *> in(static_cast<size_t>(n));
      for (int64_t q = 0; q < n; ++q)
        in[size_t(q)] = q == me ? bytes + uint64_t(begin(me)) * element
                                : parts[size_t(q)].data();
      std::vector<char> result(mine);
      reduceInOrder(in, result.data(), length(me), dtype, reduction);
      std::memcpy(bytes + uint64_t(begin(me)) * element, result.data(), mine);
      for (int64_t k = 1; k < n; ++k)
        sendTo(memberRank(axes, (me + k) % n), share, result.data(), mine,
               "all_reduce");
    }
    for (Receive &r : shares)
      complete(r, "all_reduce");
  }

  void doAllGather(uint32_t axes, const void *in, void *out, int64_t count,
                   int32_t dtype) override {
    checkUsable();
    uint64_t bytes = checkedBytes(count, elementSize(dtype));
    int64_t n = groupSize(axes), me = groupPosition(axes);
    Key key = nextCollective(axes);
    char *blocks = static_cast<char *>(out);
    std::vector<Receive> receives;
    if (bytes)
      for (int64_t q = 0; q < n; ++q)
        if (q != me)
          receives.push_back(post(memberRank(axes, q), key,
                                  blocks + uint64_t(q) * bytes, bytes));
    for (int64_t k = 1; bytes && k < n; ++k)
      sendTo(memberRank(axes, (me + k) % n), key, in, bytes, "all_gather");
    std::memmove(blocks + uint64_t(me) * bytes, in, bytes);
    for (Receive &r : receives)
      complete(r, "all_gather");
  }

  void doReduceScatter(uint32_t axes, const void *in, void *out, int64_t count,
                       int32_t dtype, int32_t reduction) override {
    checkUsable();
    checkReduction(dtype, reduction);
    size_t element = elementSize(dtype);
    uint64_t bytes = checkedBytes(count, element);
    int64_t n = groupSize(axes), me = groupPosition(axes);
    checkedBytes(count, element * size_t(n));
    Key key = nextCollective(axes);
    if (!bytes)
      return;
    const char *blocks = static_cast<const char *>(in);
    std::vector<std::vector<char>> parts(static_cast<size_t>(n));
    std::vector<Receive> receives;
    for (int64_t q = 0; q < n; ++q)
      if (q != me) {
        parts[size_t(q)].resize(bytes);
        receives.push_back(
            post(memberRank(axes, q), key, parts[size_t(q)].data(), bytes));
      }
    for (int64_t k = 1; k < n; ++k) {
      int64_t q = (me + k) % n;
      sendTo(memberRank(axes, q), key, blocks + uint64_t(q) * bytes, bytes,
             "reduce_scatter");
    }
    for (Receive &r : receives)
      complete(r, "reduce_scatter");
    std::vector<const void *> contributions(static_cast<size_t>(n));
    for (int64_t q = 0; q < n; ++q)
      contributions[size_t(q)] =
          q == me ? blocks + uint64_t(me) * bytes : parts[size_t(q)].data();
    // `out` may be this rank's block of `in`.
    std::vector<char> result(bytes);
    reduceInOrder(contributions, result.data(), count, dtype, reduction);
    std::memcpy(out, result.data(), bytes);
  }

  void doAllToAll(uint32_t axes, const void *in, void *out, int64_t count,
                  int32_t dtype) override {
    checkUsable();
    uint64_t bytes = checkedBytes(count, elementSize(dtype));
    int64_t n = groupSize(axes), me = groupPosition(axes);
    Key key = nextCollective(axes);
    if (!bytes)
      return;
    const char *from = static_cast<const char *>(in);
    char *to = static_cast<char *>(out);
    std::vector<Receive> receives;
    for (int64_t q = 0; q < n; ++q)
      if (q != me)
        receives.push_back(
            post(memberRank(axes, q), key, to + uint64_t(q) * bytes, bytes));
    for (int64_t k = 1; k < n; ++k) {
      int64_t q = (me + k) % n;
      sendTo(memberRank(axes, q), key, from + uint64_t(q) * bytes, bytes,
             "all_to_all");
    }
    std::memmove(to + uint64_t(me) * bytes, from + uint64_t(me) * bytes, bytes);
    for (Receive &r : receives)
      complete(r, "all_to_all");
  }

  void doSend(uint32_t axes, int32_t peer, int32_t tag, const void *data,
              int64_t count, int32_t dtype) override {
    checkUsable();
    checkPeer(axes, peer);
    uint64_t bytes = checkedBytes(count, elementSize(dtype));
    sendTo(memberRank(axes, peer), Key{kData, axes, tag}, data, bytes, "send");
  }

  void doRecv(uint32_t axes, int32_t peer, int32_t tag, void *data,
              int64_t count, int32_t dtype) override {
    checkUsable();
    checkPeer(axes, peer);
    uint64_t bytes = checkedBytes(count, elementSize(dtype));
    Receive r =
        post(memberRank(axes, peer), Key{kData, axes, tag}, data, bytes);
    complete(r, "recv");
  }

private:
  /// Messages: sends, collectives' parts, the goodbye of a communicator
  /// being destroyed, and the notice of one that failed (its payload: why).
  enum Kind : uint32_t { kData = 1, kCollective = 2, kBye = 3, kGone = 4 };

  /// What precedes every message on a connection.
  struct Header {
    uint32_t kind;
    uint32_t axes;
    int64_t id; ///< the tag of a send, the number of a collective
    uint64_t bytes;
  };

  /// Messages match receives of the same key, in the order both were made.
  struct Key {
    uint32_t kind, axes;
    int64_t id;
    bool operator<(const Key &other) const {
      return std::tie(kind, axes, id) <
             std::tie(other.kind, other.axes, other.id);
    }
  };

  /// A message on its way into a posted receive's buffer or into `kept`;
  /// the reader sets `done` (under the mutex) when all of it is there.
  struct Message {
    char *buffer = nullptr;
    uint64_t capacity = 0;
    std::vector<char> kept;
    uint64_t size = 0;
    bool done = false;
    std::string error;
  };

  struct Peer {
    int rank = 0;
    Fd fd;
    /// One message at a time on the connection.
    std::mutex sendMutex;

    // Under the communicator's mutex.
    enum State { Open, Closed, Lost } state = Open;
    /// Why it is lost: "lost rank R: ...", naming the rank at fault.
    std::string lostText;
    bool saidBye = false;
    /// Messages that came before their receive, and receives waiting for
    /// their message.
    std::map<Key, std::deque<std::shared_ptr<Message>>> arrived, posted;

    // The reader's own.
    bool reading = true;
    Header header{};
    size_t headerBytes = 0;
    bool inPayload = false;
    /// The payload is a kGone notice.
    bool notice = false;
    char *target = nullptr; ///< null: the payload is discarded
    uint64_t left = 0;
    std::shared_ptr<Message> current;
  };

  /// A receive that an operation waits for.
  struct Receive {
    Peer *peer;
    std::shared_ptr<Message> message;
    void *buffer;
    uint64_t capacity;
  };

  static size_t elementSize(int32_t dtype) {
    size_t size = dtypeSize(dtype);
    if (!size)
      throw Error("communicator: unknown dtype " + std::to_string(dtype));
    return size;
  }

  static uint64_t checkedBytes(int64_t count, size_t element) {
    if (count < 0 || uint64_t(count) > (uint64_t(1) << 62) / element)
      throw Error("communicator: " + std::to_string(count) +
                  " elements in one call");
    return uint64_t(count) * element;
  }

  void checkPeer(uint32_t axes, int32_t peer) const {
    if (peer < 0 || peer >= groupSize(axes))
      throw Error("communicator: peer " + std::to_string(peer) +
                  " is outside a group of " + std::to_string(groupSize(axes)));
  }

  /// The world rank at \p position of this rank's group of \p axes.
  int memberRank(uint32_t axes, int64_t position) const {
    const std::vector<int64_t> &mesh = meshShape();
    std::vector<int64_t> coords(mesh.size());
    for (size_t a = 0; a < mesh.size(); ++a)
      coords[a] = coordinate(a);
    for (size_t a = mesh.size(); a-- > 0;)
      if (axes & (1u << a)) {
        coords[a] = position % mesh[a];
        position /= mesh[a];
      }
    int64_t rank = 0;
    for (size_t a = 0; a < mesh.size(); ++a)
      rank = rank * mesh[a] + coords[a];
    return int(rank);
  }

  Key nextCollective(uint32_t axes) {
    checkAxes(axes);
    return Key{kCollective, axes, collectives[axes]++};
  }

  void checkUsable() {
    std::lock_guard<std::mutex> lock(mutex);
    if (!failure.empty())
      throw Error("communicator: unusable after an earlier failure: " +
                  failure);
  }

  /// Ends every operation: the reader stops, so that it writes into no
  /// buffer of an operation that is given up, and every later operation
  /// fails. Throws \p message.
  /// Tells the peers why this rank stops (\p cause: a lost peer's text, by
  /// default this failure), so that each names the rank at fault rather
  /// than this one, which fails only because of it.
  [[noreturn]] void fail(const std::string &message, std::string cause = "") {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (failure.empty())
        failure = message;
    }
    stopReader();
    if (cause.empty())
      cause = "rank " + std::to_string(rank()) + " failed: " + message;
    tellPeers(cause.substr(0, 1000));
    throw Error("communicator: " + message);
  }

  /// Best effort, and waiting for no peer: a notice that does not fit in a
  /// connection's buffer at once is cut, which the peer sees as a
  /// connection lost in a message.
  void tellPeers(const std::string &cause) {
    Header header{kGone, 0, 0, cause.size()};
    for (auto &p : peers) {
      if (!p->fd)
        continue;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (p->state != Peer::Open)
          continue;
      }
      std::unique_lock<std::mutex> sending(p->sendMutex, std::try_to_lock);
      if (!sending)
        continue;
      iovec iov[2] = {{&header, sizeof header},
                      {const_cast<char *>(cause.data()), cause.size()}};
      msghdr message{};
      message.msg_iov = iov;
      message.msg_iovlen = 2;
      ::sendmsg(p->fd.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  }

  void sendTo(int rank, Key key, const void *data, uint64_t bytes,
              const char *op) {
    Peer &p = *peers[size_t(rank)];
    if (!p.fd)
      return deliverLocally(key, data, bytes);
    Header header{key.kind, key.axes, key.id, bytes};
    int error;
    {
      std::lock_guard<std::mutex> lock(p.sendMutex);
      iovec iov[2] = {{&header, sizeof header},
                      {const_cast<void *>(data), size_t(bytes)}};
      error = writeFully(p.fd.get(), iov, 2);
    }
    if (error) {
      std::string cause;
      {
        std::lock_guard<std::mutex> lock(mutex);
        cause = p.state == Peer::Lost
                    ? p.lostText
                    : "lost rank " + std::to_string(rank) + ": " +
                          (error == EPIPE || error == ECONNRESET
                               ? "its connection closed (it exited or failed)"
                               : std::strerror(error));
      }
      fail(std::string(op) + ": " + cause, cause);
    }
  }

  /// A message of this rank to itself.
  void deliverLocally(Key key, const void *data, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    Peer &self = *peers[size_t(rank())];
    std::shared_ptr<Message> m;
    auto posted = self.posted.find(key);
    if (posted != self.posted.end()) {
      m = posted->second.front();
      posted->second.pop_front();
      if (posted->second.empty())
        self.posted.erase(posted);
    } else {
      m = std::make_shared<Message>();
      m->kept.resize(bytes);
      m->buffer = m->kept.data();
      m->capacity = bytes;
      self.arrived[key].push_back(m);
    }
    if (bytes > m->capacity)
      m->error = tooLong(bytes, m->capacity);
    else
      std::memcpy(m->buffer, data, bytes);
    m->size = bytes;
    m->done = true;
    changed.notify_all();
  }

  static std::string tooLong(uint64_t bytes, uint64_t capacity) {
    return "a message of " + std::to_string(bytes) +
           " bytes for a receive of " + std::to_string(capacity);
  }

  /// Takes the message from rank \p rank with \p key that came first and
  /// was not yet received, or posts a receive into \p buffer for it.
  Receive post(int rank, Key key, void *buffer, uint64_t capacity) {
    std::lock_guard<std::mutex> lock(mutex);
    Peer &p = *peers[size_t(rank)];
    auto arrived = p.arrived.find(key);
    if (arrived != p.arrived.end()) {
      std::shared_ptr<Message> m = arrived->second.front();
      arrived->second.pop_front();
      if (arrived->second.empty())
        p.arrived.erase(arrived);
      return Receive{&p, m, buffer, capacity};
    }
    auto m = std::make_shared<Message>();
    m->buffer = static_cast<char *>(buffer);
    m->capacity = capacity;
    p.posted[key].push_back(m);
    return Receive{&p, m, buffer, capacity};
  }

  /// Waits until \p r has its message; fails if a peer was lost first, or
  /// if its own peer closed its communicator.
  void complete(Receive &r, const char *op) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] {
      return r.message->done || lost || r.peer->state != Peer::Open;
    });
    Message &m = *r.message;
    if (!m.done) {
      // The peer it waits for if that one is gone, else the first lost.
      std::string why = r.peer->state == Peer::Lost ? r.peer->lostText
                        : lost                      ? lost->lostText
                               : "rank " + std::to_string(r.peer->rank) +
                                     " closed its communicator";
      lock.unlock();
      fail(std::string(op) + ": " + why, why);
    }
    std::string error = m.error;
    if (error.empty() && m.buffer != r.buffer) {
      if (m.size > r.capacity)
        error = tooLong(m.size, r.capacity);
      else
        std::memcpy(r.buffer, m.kept.data(), m.size);
    }
    if (!error.empty()) {
      lock.unlock();
      fail(std::string(op) + " from rank " + std::to_string(r.peer->rank) +
           ": " + error);
    }
  }

  //===--------------------------------------------------------------------===//
  // The reader
  //===--------------------------------------------------------------------===//

  void readLoop() {
    std::vector<pollfd> fds;
    std::vector<Peer *> who;
    while (!stopping) {
      fds.assign(1, pollfd{wakeRead.get(), POLLIN, 0});
      who.clear();
      for (auto &p : peers)
        if (p->fd && p->reading) {
          fds.push_back(pollfd{p->fd.get(), POLLIN, 0});
          who.push_back(p.get());
        }
      if (pollRetrying(fds.data(), fds.size(), -1) < 0) {
        std::string why = std::strerror(errno);
        for (Peer *p : who)
          lose(*p, "cannot wait for data: " + why);
        return;
      }
      if (stopping)
        return;
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents)
          drain(*who[i - 1]);
    }
  }

  /// Reads what \p p sent until no more is there.
  void drain(Peer &p) {
    char scratch[65536];
    // Until the peer is gone (or has nothing more now).
    while (p.reading) {
      char *to;
      size_t want;
      if (!p.inPayload) {
        to = reinterpret_cast<char *>(&p.header) + p.headerBytes;
        want = sizeof(Header) - p.headerBytes;
      } else if (p.target) {
        to = p.target;
        want = size_t(std::min<uint64_t>(p.left, uint64_t(1) << 30));
      } else {
        to = scratch;
        want = size_t(std::min<uint64_t>(p.left, sizeof scratch));
      }
      ssize_t n = ::recv(p.fd.get(), to, want, MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR)
          continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
          return;
        return lose(p, errno == ECONNRESET
                           ? "its connection closed (it exited or failed)"
                           : std::strerror(errno));
      }
      if (n == 0)
        return endOfStream(p);
      if (!p.inPayload) {
        p.headerBytes += size_t(n);
        if (p.headerBytes == sizeof(Header)) {
          p.headerBytes = 0;
          if (!startMessage(p))
            return;
        }
        continue;
      }
      if (p.target)
        p.target += n;
      p.left -= uint64_t(n);
      if (p.left == 0)
        finishMessage(p);
    }
  }

  /// A header came: where its payload goes. False if the peer is lost.
  bool startMessage(Peer &p) {
    std::lock_guard<std::mutex> lock(mutex);
    const Header &h = p.header;
    if (h.kind == kBye) {
      p.saidBye = true;
      return true;
    }
    if (h.kind == kGone && h.bytes <= 4096) {
      auto m = std::make_shared<Message>();
      m->kept.resize(size_t(h.bytes));
      m->buffer = m->kept.data();
      m->size = h.bytes;
      p.notice = true;
      p.inPayload = true;
      p.left = h.bytes;
      p.target = m->buffer;
      p.current = std::move(m);
      if (p.left == 0)
        finishLocked(p);
      return p.reading;
    }
    if (h.kind != kData && h.kind != kCollective) {
      loseLocked(p, "it sent a message this rank cannot read");
      return false;
    }
    Key key{h.kind, h.axes, h.id};
    std::shared_ptr<Message> m;
    auto posted = p.posted.find(key);
    if (posted != p.posted.end()) {
      m = posted->second.front();
      posted->second.pop_front();
      if (posted->second.empty())
        p.posted.erase(posted);
      if (h.bytes > m->capacity) {
        m->error = tooLong(h.bytes, m->capacity);
        m->size = h.bytes;
        m->done = true;
        changed.notify_all();
        m = nullptr;
      }
    } else {
      m = std::make_shared<Message>();
      try {
        m->kept.resize(size_t(h.bytes));
      } catch (const std::bad_alloc &) {
        loseLocked(p, "no memory for its message of " +
                          std::to_string(h.bytes) + " bytes");
        return false;
      }
      m->buffer = m->kept.data();
      m->capacity = h.bytes;
      p.arrived[key].push_back(m);
    }
    p.inPayload = true;
    p.left = h.bytes;
    p.target = m ? m->buffer : nullptr;
    if (m)
      m->size = h.bytes;
    p.current = std::move(m);
    if (p.left == 0)
      finishLocked(p);
    return true;
  }

  void finishMessage(Peer &p) {
    std::lock_guard<std::mutex> lock(mutex);
    finishLocked(p);
  }

  void finishLocked(Peer &p) {
    if (p.notice) {
      // What the peer said before it went: the rank at fault.
      p.notice = false;
      goneLocked(p,
                 std::string(p.current->kept.begin(), p.current->kept.end()));
    }
    if (p.current)
      p.current->done = true;
    p.current = nullptr;
    p.inPayload = false;
    p.target = nullptr;
    changed.notify_all();
  }

  void endOfStream(Peer &p) {
    std::lock_guard<std::mutex> lock(mutex);
    p.reading = false;
    if (p.inPayload || p.headerBytes)
      return loseLocked(p, "its connection closed in the middle of a message "
                           "(it exited or failed)");
    if (!p.saidBye)
      return loseLocked(p, "its connection closed (it exited or failed)");
    p.state = Peer::Closed;
    changed.notify_all();
  }

  void lose(Peer &p, const std::string &why) {
    std::lock_guard<std::mutex> lock(mutex);
    loseLocked(p, why);
  }

  void loseLocked(Peer &p, const std::string &why) {
    goneLocked(p, "lost rank " + std::to_string(p.rank) + ": " + why);
  }

  void goneLocked(Peer &p, const std::string &text) {
    p.reading = false;
    if (p.state != Peer::Lost) {
      p.state = Peer::Lost;
      p.lostText = text;
    }
    if (!lost)
      lost = &p;
    changed.notify_all();
  }

  void stopReader() {
    if (!reader.joinable())
      return;
    stopping = true;
    char byte = 0;
    while (::write(wakeWrite.get(), &byte, 1) < 0 && errno == EINTR) {
    }
    reader.join();
  }

  double closeSeconds;
  std::vector<std::unique_ptr<Peer>> peers; ///< by world rank
  /// Guards the peers' shared state, `lost` and `failure`.
  std::mutex mutex;
  std::condition_variable changed;
  /// The first peer lost.
  Peer *lost = nullptr;
  /// The first failure of an operation: the communicator is unusable after.
  std::string failure;
  /// Collectives run so far, by axes mask.
  std::map<uint32_t, int64_t> collectives;
  std::thread reader;
  std::atomic<bool> stopping{false};
  Fd wakeRead, wakeWrite;
};
} // namespace

std::unique_ptr<Communicator>
pccrt::createSocketCommunicator(std::vector<int64_t> meshShape,
                                const SocketBootstrap &bootstrap) {
  int64_t product = 1;
  for (int64_t d : meshShape) {
    if (d < 1)
      throw Error("mesh axes must have a positive size");
    product *= d;
  }
  if (product != bootstrap.worldSize)
    throw Error("a mesh of " + std::to_string(product) +
                " ranks cannot run on WORLD_SIZE=" +
                std::to_string(bootstrap.worldSize));
  if (bootstrap.rank < 0 || bootstrap.rank >= bootstrap.worldSize)
    throw Error(
        "rank " + std::to_string(bootstrap.rank) +
        " is not a rank of WORLD_SIZE=" + std::to_string(bootstrap.worldSize));
  if (bootstrap.masterPort < 1 || bootstrap.masterPort > 65535)
    throw Error("port " + std::to_string(bootstrap.masterPort) +
                " is not a port (1 to 65535)");
  std::vector<Fd> sockets(size_t(bootstrap.worldSize));
  if (bootstrap.worldSize > 1) {
    Deadline deadline(bootstrap.timeoutSeconds);
    uint64_t token = 0, mesh = meshHash(meshShape);
    sockets = bootstrap.rank == 0
                  ? gatherRanks(bootstrap, mesh, deadline, token)
                  : joinRanks(bootstrap, mesh, deadline, token);
  }
  return std::make_unique<SocketCommunicator>(
      bootstrap.rank, bootstrap.worldSize, std::move(meshShape),
      std::move(sockets), bootstrap.timeoutSeconds);
}
