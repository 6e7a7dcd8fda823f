//===- Comm.h - Communicators of multi-rank programs ------------*- C++ -*-===//
//
// A backend-neutral communicator: the ranks of a program arranged on a mesh,
// with the collectives and transfers that generated code calls through the
// pccrt_comm handle of its run context (pccrt.h). Backends: MPI (Debian's
// Open MPI) for the CPU target; NCCL comes with the CUDA target behind the
// same interface.
//
//===----------------------------------------------------------------------===//

#ifndef PCCRT_COMM_H
#define PCCRT_COMM_H

#include "pccrt/pccrt.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pccrt {

struct CommTrampolines;

class Communicator {
public:
  virtual ~Communicator() = default;

  int rank() const { return rankIndex; }
  int numRanks() const { return worldSize; }
  const std::vector<int64_t> &meshShape() const { return mesh; }
  /// This rank's coordinate along mesh axis `axis`.
  int64_t coordinate(size_t axis) const;
  /// The size and this rank's position in the group of `axes` (a mask).
  int64_t groupSize(uint32_t axes) const;
  int64_t groupPosition(uint32_t axes) const;
  /// The C handle for a run context.
  pccrt_comm *handle() { return &cHandle; }

  // The operations, as in pccrt_comm_ops; they throw pccrt::Error.
  virtual void allReduce(uint32_t axes, void *data, int64_t count,
                         int32_t dtype, int32_t reduction) = 0;
  virtual void allGather(uint32_t axes, const void *in, void *out,
                         int64_t count, int32_t dtype) = 0;
  virtual void reduceScatter(uint32_t axes, const void *in, void *out,
                             int64_t count, int32_t dtype,
                             int32_t reduction) = 0;
  virtual void allToAll(uint32_t axes, const void *in, void *out, int64_t count,
                        int32_t dtype) = 0;
  virtual void send(uint32_t axes, int32_t peer, int32_t tag, const void *data,
                    int64_t count, int32_t dtype) = 0;
  virtual void recv(uint32_t axes, int32_t peer, int32_t tag, void *data,
                    int64_t count, int32_t dtype) = 0;

  /// The last failure of an operation called through handle().
  const std::string &lastError() const { return error; }

protected:
  Communicator(int rank, int size, std::vector<int64_t> meshShape);
  /// Checks an axes mask against the mesh; throws otherwise.
  void checkAxes(uint32_t axes) const;

private:
  struct CHandle : pccrt_comm {
    Communicator *self;
  };
  static const pccrt_comm_ops cOps;
  friend struct CommTrampolines;
  int rankIndex, worldSize;
  std::vector<int64_t> mesh;
  CHandle cHandle;
  std::string error;
};

/// True when libpccrt was built with MPI.
bool haveMpi();
/// Initializes MPI once (no-op if already initialized) and returns this
/// process's rank and the world size.
void initMpi(int *rank, int *size);
/// An MPI communicator over MPI_COMM_WORLD arranged on `meshShape`, whose
/// product must equal the world size.
std::unique_ptr<Communicator>
createMpiCommunicator(std::vector<int64_t> meshShape);

} // namespace pccrt

#endif // PCCRT_COMM_H
