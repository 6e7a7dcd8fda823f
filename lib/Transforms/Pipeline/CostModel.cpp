//===- CostModel.cpp - Time of ops and transfers for a target -------------===//

#include "pcc/Transforms/Pipeline/CostModel.h"

#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace mlir;
using namespace pcc;

int64_t pcc::tensorBytes(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return 0;
  int64_t bits = t.getElementType().getIntOrFloatBitWidth();
  return t.getNumElements() * std::max<int64_t>(1, bits / 8);
}

CostModel CostModel::forTarget(StringRef target) {
  CostModel m;
  if (target == "cuda") {
    // An H100's dense bf16 tensor cores, HBM3 and NVLink, derated; eight
    // to a node, nodes joined by 400 Gb/s InfiniBand (NDR) per GPU.
    m.flopsPerSecond = 4e14;
    m.bytesPerSecond = 2.5e12;
    m.p2pBytesPerSecond = 2e11;
    m.opOverheadSeconds = 5e-6;
    m.p2pLatencySeconds = 1e-5;
    m.interNodeBytesPerSecond = 4e10;
    m.devicesPerNode = 8;
  } else {
    // Two cores of a current x86 server with OpenBLAS; MPI over shared
    // memory.
    m.flopsPerSecond = 3e10;
    m.bytesPerSecond = 8e9;
    m.p2pBytesPerSecond = 4e9;
    m.opOverheadSeconds = 2e-7;
    m.p2pLatencySeconds = 2e-6;
    m.interNodeBytesPerSecond = m.p2pBytesPerSecond;
  }
  return m;
}

llvm::Expected<CostModel> CostModel::load(StringRef path, StringRef target) {
  CostModel m = forTarget(target);
  auto fail = [&](const Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + msg);
  };
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail("cannot read the cost table: " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return fail("not a JSON cost table: " + llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root)
    return fail("the cost table must be a JSON object");
  auto number = [&](const llvm::json::Object &o, StringRef key,
                    double &into) -> llvm::Error {
    const llvm::json::Value *v = o.get(key);
    if (!v)
      return llvm::Error::success();
    std::optional<double> d = v->getAsNumber();
    if (!d || *d <= 0)
      return fail("'" + key + "' must be a positive number");
    into = *d;
    return llvm::Error::success();
  };
  for (auto [key, into] :
       {std::pair<StringRef, double *>{"flops_per_second", &m.flopsPerSecond},
        {"bytes_per_second", &m.bytesPerSecond},
        {"p2p_bytes_per_second", &m.p2pBytesPerSecond},
        {"op_overhead_seconds", &m.opOverheadSeconds},
        {"p2p_latency_seconds", &m.p2pLatencySeconds},
        {"inter_node_bytes_per_second", &m.interNodeBytesPerSecond}})
    if (llvm::Error e = number(*root, key, *into))
      return std::move(e);
  double devices = double(m.devicesPerNode);
  if (llvm::Error e = number(*root, "devices_per_node", devices))
    return std::move(e);
  if (devices != std::floor(devices))
    return fail("'devices_per_node' must be a whole number");
  m.devicesPerNode = int64_t(devices);
  for (const auto &[key, value] : *root)
    if (!llvm::is_contained({"flops_per_second", "bytes_per_second",
                             "p2p_bytes_per_second", "op_overhead_seconds",
                             "p2p_latency_seconds",
                             "inter_node_bytes_per_second", "devices_per_node",
                             "ops", "target", "machine", "comment"},
                            key.str()))
      return fail("unknown key '" + key.str() + "'");
  if (const llvm::json::Value *ops = root->get("ops")) {
    const llvm::json::Object *o = ops->getAsObject();
    if (!o)
      return fail("'ops' must map op names to throughputs");
    for (const auto &[name, entry] : *o) {
      const llvm::json::Object *e = entry.getAsObject();
      if (!e)
        return fail("'ops." + name.str() + "' must be an object");
      OpThroughput t;
      if (llvm::Error err = number(*e, "flops_per_second", t.flopsPerSecond))
        return std::move(err);
      if (llvm::Error err = number(*e, "bytes_per_second", t.bytesPerSecond))
        return std::move(err);
      m.ops[name.str()] = t;
    }
  }
  return m;
}

double CostModel::transferTime(int64_t bytes, bool betweenNodes) const {
  if (bytes <= 0)
    return 0;
  double bandwidth = betweenNodes && interNodeBytesPerSecond > 0
                         ? interNodeBytesPerSecond
                         : p2pBytesPerSecond;
  return p2pLatencySeconds + bytes / bandwidth;
}

double CostModel::time(Operation *op) const {
  if (op->getDialect() && op->getDialect()->getNamespace() == "dist") {
    int64_t bytes = 0;
    for (Value r : op->getResults())
      bytes += tensorBytes(r.getType());
    return bytes ? opOverheadSeconds + transferTime(bytes) : 0;
  }
  auto cost = dyn_cast<graph::CostOpInterface>(op);
  if (!cost)
    return 0;
  double flops = flopsPerSecond, bytes = bytesPerSecond;
  auto it = ops.find(op->getName().getStringRef());
  if (it != ops.end()) {
    if (it->second.flopsPerSecond > 0)
      flops = it->second.flopsPerSecond;
    if (it->second.bytesPerSecond > 0)
      bytes = it->second.bytesPerSecond;
  }
  return opOverheadSeconds +
         std::max(cost.getFlops() / flops, cost.getBytesAccessed() / bytes);
}
