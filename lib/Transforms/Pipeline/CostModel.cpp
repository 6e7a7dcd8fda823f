//===- CostModel.cpp - Time of ops and transfers for a target -------------===//

#include "pcc/Transforms/Pipeline/CostModel.h"

#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

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
    // An H100's dense bf16 tensor cores, HBM3 and NVLink, derated.
    m.flopsPerSecond = 4e14;
    m.bytesPerSecond = 2.5e12;
    m.p2pBytesPerSecond = 2e11;
    m.opOverheadSeconds = 5e-6;
  } else {
    // Two cores of a current x86 server with OpenBLAS; MPI over shared
    // memory.
    m.flopsPerSecond = 3e10;
    m.bytesPerSecond = 8e9;
    m.p2pBytesPerSecond = 4e9;
    m.opOverheadSeconds = 2e-7;
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
        {"op_overhead_seconds", &m.opOverheadSeconds}})
    if (llvm::Error e = number(*root, key, *into))
      return std::move(e);
  for (const auto &[key, value] : *root)
    if (!llvm::is_contained({"flops_per_second", "bytes_per_second",
                             "p2p_bytes_per_second", "op_overhead_seconds",
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

double CostModel::transferTime(int64_t bytes) const {
  return bytes / p2pBytesPerSecond;
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
