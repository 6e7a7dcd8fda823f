//===- CostModel.cpp - Time of ops and transfers for a target -------------===//

#include "pcc/Analysis/CostModel.h"

#include "pcc/Analysis/BufferPlan.h"

#include "pcc/Dialect/Dist/IR/DistNames.h"
#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GemmOperands.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Dialect/Graph/IR/GraphTraining.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace mlir;
using namespace pcc;

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

/// The "ops" of a cost table or machine description, if any: each op kind's
/// costs, {"flops_per_second": F, "bytes_per_second": B,
/// "overhead_seconds": O, "serial_bytes_per_second": S}, each optional, in
/// place of the general ones.
static llvm::Error readOpThroughputs(const llvm::json::Object &root,
                                     CostModel &m, StringRef where) {
  auto fail = [&](const Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   where + ": " + msg);
  };
  const llvm::json::Value *ops = root.get("ops");
  if (!ops)
    return llvm::Error::success();
  const llvm::json::Object *o = ops->getAsObject();
  if (!o)
    return fail("'ops' must map op names to throughputs");
  for (const auto &[name, entry] : *o) {
    const llvm::json::Object *e = entry.getAsObject();
    if (!e)
      return fail("'ops." + name.str() + "' must be an object");
    OpThroughput t;
    for (auto [key, into] : {std::pair<StringRef, double *>{
                                 "flops_per_second", &t.flopsPerSecond},
                             {"bytes_per_second", &t.bytesPerSecond},
                             {"serial_bytes_per_second",
                              &t.serialBytesPerSecond}}) {
      const llvm::json::Value *v = e->get(key);
      if (!v)
        continue;
      std::optional<double> d = v->getAsNumber();
      if (!d || *d <= 0)
        return fail("'ops." + name.str() + "." + key +
                    "' must be a positive number");
      *into = *d;
    }
    if (const llvm::json::Value *v = e->get("overhead_seconds")) {
      std::optional<double> d = v->getAsNumber();
      if (!d || *d < 0)
        return fail("'ops." + name.str() +
                    ".overhead_seconds' must be a number of at least 0");
      t.overheadSeconds = *d;
    }
    m.ops[name.str()] = t;
  }
  return llvm::Error::success();
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
        {"vector_flops_per_second", &m.vectorFlopsPerSecond},
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
                             "vector_flops_per_second",
                             "p2p_bytes_per_second", "op_overhead_seconds",
                             "p2p_latency_seconds",
                             "inter_node_bytes_per_second", "devices_per_node",
                             "ops", "target", "machine", "comment"},
                            key.str()))
      return fail("unknown key '" + key.str() + "'");
  if (llvm::Error e = readOpThroughputs(*root, m, path))
    return std::move(e);
  return m;
}

namespace {
/// The machine descriptions in machines/, embedded at build time.
constexpr llvm::StringLiteral kA100 =
#include "MachineA100.inc"
    ;
constexpr llvm::StringLiteral kH100 =
#include "MachineH100.inc"
    ;
constexpr llvm::StringLiteral kCpu =
#include "MachineCpu.inc"
    ;
} // namespace

/// Whether `op` is the graph.add that a scatter adds its rows into
/// (accumulatesRows): it runs as no code of its own.
static bool isSumOfRows(Operation *op) {
  return isa<graph::AddOp>(op) && llvm::any_of(op->getOperands(), [](Value v) {
           Operation *def = v.getDefiningOp();
           return def && accumulatesRows(def);
         });
}

llvm::Expected<CostModel> CostModel::get(StringRef target, StringRef costTable,
                                         StringRef machine, StringRef dtype) {
  if (!machine.empty())
    return forMachine(machine, dtype);
  if (!costTable.empty())
    return load(costTable, target);
  return forTarget(target);
}

ArrayRef<StringRef> CostModel::getMachineNames() {
  static const StringRef names[] = {"a100-80gb", "h100-80gb", "cpu"};
  return names;
}

llvm::Expected<CostModel> CostModel::forMachine(StringRef nameOrPath,
                                                StringRef dtype) {
  std::string text, where = nameOrPath.str();
  if (nameOrPath == "a100-80gb") {
    text = kA100.str();
  } else if (nameOrPath == "h100-80gb") {
    text = kH100.str();
  } else if (nameOrPath == "cpu") {
    text = kCpu.str();
  } else {
    auto buffer = llvm::MemoryBuffer::getFile(nameOrPath);
    if (!buffer)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--machine " + nameOrPath + ": neither " +
                                         llvm::join(getMachineNames(), ", ") +
                                         " nor a readable file (" +
                                         buffer.getError().message() + ")");
    text = (*buffer)->getBuffer().str();
  }
  auto fail = [&](const Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   where + ": " + msg);
  };
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json)
    return fail("not a JSON machine description: " +
                llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root)
    return fail("a machine description must be a JSON object");
  for (const auto &[key, value] : *root)
    if (!llvm::is_contained({"name", "description", "sources",
                             "devices_per_node", "memory_bytes",
                             "memory_bytes_per_second",
                             "matrix_flops_per_second",
                             "vector_flops_per_second", "op_overhead_seconds",
                             "intra_node", "inter_node", "ops"},
                            key.str()))
      return fail("unknown key '" + key.str() + "'");
  // A positive number at `path` (keys through objects), which must exist.
  auto number = [&](ArrayRef<StringRef> path) -> llvm::Expected<double> {
    const llvm::json::Object *at = root;
    std::string name = llvm::join(path, ".");
    for (StringRef key : path.drop_back()) {
      const llvm::json::Value *v = at->get(key);
      at = v ? v->getAsObject() : nullptr;
      if (!at)
        return fail("'" + name + "' is missing");
    }
    const llvm::json::Value *v = at->get(path.back());
    std::optional<double> d = v ? v->getAsNumber() : std::nullopt;
    if (!d || *d <= 0)
      return fail("'" + name + "' must be a positive number");
    return *d;
  };
  CostModel m;
  m.machine = root->getString("name").value_or(nameOrPath).str();
  std::string type = dtype.str();
  struct Field {
    SmallVector<StringRef, 3> path;
    double *into;
  };
  double devices = 0, memory = 0;
  SmallVector<Field> fields = {
      {{"devices_per_node"}, &devices},
      {{"memory_bytes"}, &memory},
      {{"memory_bytes_per_second"}, &m.bytesPerSecond},
      {{"matrix_flops_per_second", type, "peak"}, &m.peakFlopsPerSecond},
      {{"matrix_flops_per_second", type, "achievable"}, &m.flopsPerSecond},
      {{"op_overhead_seconds"}, &m.opOverheadSeconds},
      {{"intra_node", "bytes_per_second"}, &m.p2pBytesPerSecond},
      {{"intra_node", "latency_seconds"}, &m.p2pLatencySeconds},
      {{"inter_node", "bytes_per_second"}, &m.interNodeBytesPerSecond},
      {{"inter_node", "latency_seconds"}, &m.interNodeLatencySeconds}};
  for (Field &field : fields) {
    llvm::Expected<double> value = number(field.path);
    if (!value)
      return value.takeError();
    *field.into = *value;
  }
  if (devices != std::floor(devices))
    return fail("'devices_per_node' must be a whole number");
  m.devicesPerNode = int64_t(devices);
  m.memoryBytes = int64_t(memory);
  if (m.flopsPerSecond > m.peakFlopsPerSecond)
    return fail("'matrix_flops_per_second." + type +
                ".achievable' exceeds its peak");
  if (const llvm::json::Value *v = root->get("vector_flops_per_second")) {
    std::optional<double> d = v->getAsNumber();
    if (!d || *d <= 0)
      return fail("'vector_flops_per_second' must be a positive number");
    m.vectorFlopsPerSecond = *d;
  }
  if (llvm::Error e = readOpThroughputs(*root, m, where))
    return std::move(e);
  // The links' measured times, optional: [[bytes, seconds], ...].
  for (auto [link, into] :
       {std::pair<StringRef, SmallVector<std::pair<double, double>> *>{
            "intra_node", &m.intraNodeTimes},
        {"inter_node", &m.interNodeTimes}}) {
    const llvm::json::Object *o = root->getObject(link);
    const llvm::json::Value *v = o ? o->get("measured") : nullptr;
    if (!v)
      continue;
    std::string name = (link + ".measured").str();
    const llvm::json::Array *points = v->getAsArray();
    if (!points)
      return fail("'" + name + "' must be a list of [bytes, seconds]");
    for (const llvm::json::Value &p : *points) {
      const llvm::json::Array *pair = p.getAsArray();
      std::optional<double> bytes, seconds;
      if (pair && pair->size() == 2) {
        bytes = (*pair)[0].getAsNumber();
        seconds = (*pair)[1].getAsNumber();
      }
      if (!bytes || !seconds || *bytes <= 0 || *seconds <= 0)
        return fail("'" + name +
                    "' must be a list of [bytes, seconds], both positive");
      if (!into->empty() && *bytes <= into->back().first)
        return fail("'" + name + "' must be by increasing bytes");
      into->push_back({*bytes, *seconds});
    }
  }
  return m;
}

double CostModel::collectiveTime(StringRef kind, int64_t bytes, int64_t ranks,
                                 bool betweenNodes) const {
  if (ranks <= 1 || bytes <= 0)
    return 0;
  double n = double(ranks), steps = n - 1;
  // What each rank sends: a ring all-reduce is a reduce-scatter and an
  // all-gather of the whole buffer; a reduce-scatter's result is a rank's
  // block of what it reduces.
  double traffic = kind == "all_reduce"       ? 2 * steps / n * bytes
                   : kind == "reduce_scatter" ? steps * bytes
                                              : steps / n * bytes;
  // The latency: NCCL (and MPI) start small collectives down trees, so
  // the fixed cost grows with the steps of a tree (log2 n), twice for an
  // all-reduce (reduce, then broadcast), not with the ring's n - 1 steps.
  double depth = std::ceil(std::log2(n));
  double hops = kind == "all_reduce" ? 2 * depth : depth;
  return linkTime(traffic, betweenNodes, hops);
}

double CostModel::linkTime(double traffic, bool betweenNodes,
                           double hops) const {
  const auto &times = betweenNodes && !interNodeTimes.empty() ? interNodeTimes
                                                              : intraNodeTimes;
  if (times.empty()) {
    double bandwidth = betweenNodes && interNodeBytesPerSecond > 0
                           ? interNodeBytesPerSecond
                           : p2pBytesPerSecond;
    double latency = betweenNodes && interNodeLatencySeconds > 0
                         ? interNodeLatencySeconds
                         : p2pLatencySeconds;
    return hops * latency + traffic / bandwidth;
  }
  // Below the smallest size measured, its time (a latency); between two,
  // on the line through them; past the largest, on the line through the
  // last two, or at its rate where it is the only one.
  if (traffic <= times.front().first)
    return times.front().second;
  if (times.size() == 1)
    return times.front().second * traffic / times.front().first;
  size_t i = 1;
  while (i + 1 < times.size() && times[i].first < traffic)
    ++i;
  auto [x0, t0] = times[i - 1];
  auto [x1, t1] = times[i];
  if (x1 <= x0)
    return t1;
  return t0 + (traffic - x0) * std::max(0.0, (t1 - t0) / (x1 - x0));
}

double CostModel::transferTime(int64_t bytes, bool betweenNodes) const {
  if (bytes <= 0)
    return 0;
  return linkTime(double(bytes), betweenNodes, 1);
}

double CostModel::time(Operation *op) const {
  // A wait completes a collective whose time the collective itself takes.
  if (isa<dist::WaitOp>(op))
    return 0;
  if (op->getDialect() && op->getDialect()->getNamespace() == "dist") {
    int64_t bytes = 0;
    for (Value r : op->getResults())
      bytes += getTensorBytes(r.getType());
    if (!bytes)
      return 0;
    // With a machine, a collective over its group, inside or between nodes.
    auto axes = op->getAttrOfType<ArrayAttr>("axes");
    auto module = op->getParentOfType<ModuleOp>();
    auto mesh =
        module ? module.lookupSymbol<dist::MeshOp>(dist::kMeshName) : nullptr;
    if (!machine.empty() && axes && mesh) {
      StringRef kind = op->getName().stripDialect();
      if (kind == "all_slice")
        return opOverheadSeconds + bytes / bytesPerSecond;
      // The group's ranks lie `stride` apart along each of its axes (row
      // major): it crosses nodes when they span more than a node holds.
      int64_t ranks = 1, span = 1, stride = 1;
      ArrayRef<int64_t> shape = mesh.getShape();
      for (int64_t d = int64_t(shape.size()) - 1; d >= 0; stride *= shape[d--])
        if (llvm::is_contained(axes, mesh.getAxisNames()[d])) {
          ranks *= shape[d];
          span += (shape[d] - 1) * stride;
        }
      return opOverheadSeconds +
             collectiveTime(kind, bytes, ranks,
                            devicesPerNode > 0 && span > devicesPerNode);
    }
    return opOverheadSeconds + transferTime(bytes);
  }
  // A view (a reshape) has no code: it names its input's buffer; nor has a
  // concatenation whose inputs are computed in their parts of it (a bucket
  // of gradients), nor a slice that is one block of a buffer the step
  // computes (BufferPlanOptions::sliceViews).
  if (isa<ViewLikeOpInterface>(op) || canConcatenateInPlace(op))
    return 0;
  // Nor has data movement that products and attention read in place (a
  // transpose a GEMM reads transposed, the split of a fused QKV
  // projection, attention's head transposes: GemmOperands).
  if (GemmOperands::isReadInPlaceAlone(op))
    return 0;
  if (getSliceOffset(op) && getComputedRoot(op->getOperand(0)))
    return 0;
  // A scatter that adds its rows into a partial sum (accumulatesRows)
  // reads and writes those rows alone, and its sum has no code.
  if (isSumOfRows(op))
    return 0;
  auto cost = dyn_cast<graph::CostOpInterface>(op);
  if (!cost)
    return 0;
  if (accumulatesRows(op))
    return time(op->getName().getStringRef(), double(cost.getFlops()),
                3.0 * double(getTensorBytes(op->getOperand(0).getType())) +
                    double(getTensorBytes(op->getOperand(1).getType())),
                false);
  // An element-wise op that pcc-fuse computes inside its readers' loop
  // nest writes no buffer and starts no kernel: its flops alone (its
  // readers' reading of its result stands for its own reads).
  bool matrix = cost.runsOnMatrixUnits();
  // An op fused into its readers' loop: its arithmetic there, at its
  // kind's rate (a division takes several additions' time).
  if (isFusedIntoReaders(op))
    return double(cost.getFlops()) /
           getFlopRate(op->getName().getStringRef(), matrix);
  // The last op of a chain that pcc-fuse makes one loop nest of: that
  // loop's fixed cost and the bytes of the chain's inputs and outputs, at
  // graph.fusion's rate (the chain's other ops took their arithmetic).
  if (std::optional<double> bytes = getFusedChainBytes(op))
    return time(graph::FusionOp::getOperationName(), double(cost.getFlops()),
                *bytes, matrix);
  return time(op->getName().getStringRef(), double(cost.getFlops()),
              double(cost.getBytesAccessed()), matrix);
}

bool CostModel::getFusedChainInputs(Operation *op,
                                    llvm::SetVector<Value> &inputs) {
  // The chain: `op` and, transitively, the producers of its operands that
  // are computed inside their readers' loop.
  llvm::SmallPtrSet<Operation *, 16> chain{op};
  SmallVector<Operation *> worklist{op};
  while (!worklist.empty()) {
    Operation *member = worklist.pop_back_val();
    for (Value operand : member->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (producer && chain.contains(producer))
        continue;
      if (producer && isFusedIntoReaders(producer)) {
        chain.insert(producer);
        worklist.push_back(producer);
        continue;
      }
      inputs.insert(operand);
    }
  }
  return chain.size() > 1;
}

std::optional<double> CostModel::getFusedChainBytes(Operation *op) {
  llvm::SetVector<Value> inputs;
  if (!graph::isFusibleElementwise(op) || !getFusedChainInputs(op, inputs))
    return std::nullopt;
  double bytes = 0;
  for (Value v : inputs)
    bytes += double(getTensorBytes(v.getType()));
  for (Value r : op->getResults())
    bytes += double(getTensorBytes(r.getType()));
  return bytes;
}

bool CostModel::isFusedIntoReaders(Operation *op) {
  if (!graph::isFusibleElementwise(op) || op->getResult(0).use_empty() ||
      isSumOfRows(op))
    return false;
  // Every reader is element-wise over the same shape, in the same block and
  // the same part of the step (forward or backward: a forward value the
  // backward reads is kept, so it is written).
  Type type = op->getResult(0).getType();
  bool backward = op->hasAttr(graph::kBackwardAttr);
  return llvm::all_of(op->getResult(0).getUsers(), [&](Operation *user) {
    return graph::isFusibleElementwise(user) &&
           user->getResult(0).getType() == type &&
           user->getBlock() == op->getBlock() &&
           user->hasAttr(graph::kBackwardAttr) == backward;
  });
}

double CostModel::getFlopRate(StringRef opName, bool matrix) const {
  auto it = ops.find(opName);
  if (it != ops.end() && it->second.flopsPerSecond > 0)
    return it->second.flopsPerSecond;
  return matrix ? flopsPerSecond : getVectorFlopsPerSecond();
}

double CostModel::time(StringRef opName, double flops, double bytes,
                       bool matrix) const {
  double byteRate = bytesPerSecond;
  double overhead = opOverheadSeconds;
  auto it = ops.find(opName);
  if (it != ops.end()) {
    if (it->second.bytesPerSecond > 0)
      byteRate = it->second.bytesPerSecond;
    if (it->second.overheadSeconds >= 0)
      overhead = it->second.overheadSeconds;
    if (it->second.serialBytesPerSecond > 0)
      return overhead + flops / getFlopRate(opName, matrix) +
             bytes / it->second.serialBytesPerSecond;
  }
  return overhead +
         std::max(flops / getFlopRate(opName, matrix), bytes / byteRate);
}
