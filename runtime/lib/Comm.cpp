//===- Comm.cpp - The backend-neutral part of communicators ---------------===//

#include "pccrt/Comm.h"

#include "Internal.h"

using namespace pccrt;

Communicator::Communicator(int rank, int size, std::vector<int64_t> meshShape)
    : rankIndex(rank), worldSize(size), mesh(std::move(meshShape)) {
  int64_t product = 1;
  for (int64_t d : mesh) {
    if (d < 1)
      throw Error("mesh axes must have a positive size");
    product *= d;
  }
  if (product != size)
    throw Error("a mesh of " + std::to_string(product) +
                " ranks cannot run on " + std::to_string(size) + " processes");
  if (mesh.size() > 31)
    throw Error("a mesh has at most 31 axes");
  cHandle.ops = &cOps;
  cHandle.self = this;
}

int64_t Communicator::coordinate(size_t axis) const {
  // Row-major: the last axis varies fastest.
  int64_t stride = 1;
  for (size_t a = mesh.size(); a-- > axis + 1;)
    stride *= mesh[a];
  return (rankIndex / stride) % mesh[axis];
}

void Communicator::checkAxes(uint32_t axes) const {
  if (axes == 0 || (axes >> mesh.size()) != 0)
    throw Error("communicator: axes mask " + std::to_string(axes) +
                " does not name axes of a mesh of " +
                std::to_string(mesh.size()));
}

int64_t Communicator::groupSize(uint32_t axes) const {
  checkAxes(axes);
  int64_t n = 1;
  for (size_t a = 0; a < mesh.size(); ++a)
    if (axes & (1u << a))
      n *= mesh[a];
  return n;
}

int64_t Communicator::groupPosition(uint32_t axes) const {
  checkAxes(axes);
  int64_t position = 0;
  for (size_t a = 0; a < mesh.size(); ++a)
    if (axes & (1u << a))
      position = position * mesh[a] + coordinate(a);
  return position;
}

/// The C entry points: each forwards to the C++ object and turns an Error
/// into PCCRT_ERR_COMM, keeping the message for the runtime to report.
struct pccrt::CommTrampolines {
  template <typename F> static int guard(pccrt_comm *comm, F &&f) {
    auto *self = static_cast<Communicator::CHandle *>(comm)->self;
    try {
      f(*self);
      return PCCRT_OK;
    } catch (const Error &e) {
      self->error = e.what();
      return PCCRT_ERR_COMM;
    }
  }
  static int allReduce(pccrt_comm *c, uint32_t axes, void *data, int64_t count,
                       int32_t dtype, int32_t reduction) {
    return guard(c, [&](Communicator &m) {
      m.allReduce(axes, data, count, dtype, reduction);
    });
  }
  static int allGather(pccrt_comm *c, uint32_t axes, const void *in, void *out,
                       int64_t count, int32_t dtype) {
    return guard(
        c, [&](Communicator &m) { m.allGather(axes, in, out, count, dtype); });
  }
  static int reduceScatter(pccrt_comm *c, uint32_t axes, const void *in,
                           void *out, int64_t count, int32_t dtype,
                           int32_t reduction) {
    return guard(c, [&](Communicator &m) {
      m.reduceScatter(axes, in, out, count, dtype, reduction);
    });
  }
  static int allToAll(pccrt_comm *c, uint32_t axes, const void *in, void *out,
                      int64_t count, int32_t dtype) {
    return guard(
        c, [&](Communicator &m) { m.allToAll(axes, in, out, count, dtype); });
  }
  static int send(pccrt_comm *c, uint32_t axes, int32_t peer, int32_t tag,
                  const void *data, int64_t count, int32_t dtype) {
    return guard(c, [&](Communicator &m) {
      m.send(axes, peer, tag, data, count, dtype);
    });
  }
  static int recv(pccrt_comm *c, uint32_t axes, int32_t peer, int32_t tag,
                  void *data, int64_t count, int32_t dtype) {
    return guard(c, [&](Communicator &m) {
      m.recv(axes, peer, tag, data, count, dtype);
    });
  }
};

const pccrt_comm_ops Communicator::cOps = {
    CommTrampolines::allReduce,     CommTrampolines::allGather,
    CommTrampolines::reduceScatter, CommTrampolines::allToAll,
    CommTrampolines::send,          CommTrampolines::recv};
