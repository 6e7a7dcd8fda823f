//===- CppEmitter.cpp - Graph dialect to C++ for the CPU target -----------===//
//
// Lowers one function of Graph ops on static tensors to straight-line C++:
// every buffer is planned at compile time (liveness-based reuse of one
// workspace, reshapes alias their input), element-wise ops, reductions and
// data movement become loop nests with constant bounds and strides, and
// contractions, normalizations and gathers call pcc_kernels.h. For a
// training step, state arguments live in the weights table and the state
// updates are copied back into it once everything else is computed.
//
//===----------------------------------------------------------------------===//

#include "pcc/Target/Cpu/CppEmitter.h"

#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Import/OnnxImporter.h"

#include "mlir/IR/BuiltinOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>
#include <functional>

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

static const char kKernelHeader[] =
#include "EmbeddedKernels.inc"
    ;
static const char kAbiHeader[] =
#include "EmbeddedAbi.inc"
    ;

StringRef pcc::getKernelHeader() { return kKernelHeader; }
StringRef pcc::getAbiHeader() { return kAbiHeader; }

//===----------------------------------------------------------------------===//
// Types and constants
//===----------------------------------------------------------------------===//

int32_t pcc::getOnnxDataType(Type t) {
  if (t.isF32())
    return 1;
  if (t.isF64())
    return 11;
  if (t.isF16())
    return 10;
  if (t.isBF16())
    return 16;
  auto i = dyn_cast<IntegerType>(t);
  if (!i)
    return 0;
  bool u = i.isUnsigned();
  switch (i.getWidth()) {
  case 1:
    return 9;
  case 8:
    return u ? 2 : 3;
  case 16:
    return u ? 4 : 5;
  case 32:
    return u ? 12 : 6;
  case 64:
    return u ? 13 : 7;
  default:
    return 0;
  }
}

static std::string cType(Type t) {
  if (t.isF32())
    return "float";
  if (t.isF64())
    return "double";
  if (t.isF16())
    return "pcc_k::f16";
  if (t.isBF16())
    return "pcc_k::bf16";
  auto i = cast<IntegerType>(t);
  if (i.getWidth() == 1)
    return "bool";
  return (i.isUnsigned() ? "uint" : "int") + std::to_string(i.getWidth()) +
         "_t";
}

static int64_t elementBytes(Type t) {
  return t.isInteger(1) ? 1 : t.getIntOrFloatBitWidth() / 8;
}

std::vector<uint8_t> pcc::getRawBytes(DenseElementsAttr value) {
  Type et = value.getElementType();
  int64_t n = value.getNumElements(), w = elementBytes(et);
  std::vector<uint8_t> out(n * w);
  if (et.isInteger(1)) {
    int64_t i = 0;
    for (bool b : value.getValues<bool>())
      out[i++] = b;
    return out;
  }
  if (!value.isSplat()) {
    ArrayRef<char> raw = value.getRawData();
    std::memcpy(out.data(), raw.data(), out.size());
    return out;
  }
  APInt bits = isa<FloatType>(et)
                   ? value.getSplatValue<APFloat>().bitcastToAPInt()
                   : value.getSplatValue<APInt>();
  uint64_t word = bits.getZExtValue();
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(&out[i * w], &word, w);
  return out;
}

static std::string floatLiteral(double v, bool isFloat) {
  std::string t = isFloat ? "float" : "double";
  if (std::isnan(v))
    return "std::numeric_limits<" + t + ">::quiet_NaN()";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + t +
           ">::infinity()";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", v);
  return std::string(buf) + (isFloat ? "f" : "");
}

static std::string intLiteral(int64_t v, Type t) {
  if (t.isInteger(1))
    return v ? "true" : "false";
  if (v == std::numeric_limits<int64_t>::min())
    return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + "LL";
}

/// The elements of a constant as C++ literals.
static std::string literals(DenseElementsAttr value) {
  std::string s;
  llvm::raw_string_ostream os(s);
  Type et = value.getElementType();
  if (auto ft = dyn_cast<FloatType>(et)) {
    llvm::interleaveComma(value.getValues<APFloat>(), os, [&](APFloat f) {
      os << floatLiteral(f.convertToDouble(), et.isF32());
    });
  } else {
    bool u = et.isUnsignedInteger() || et.isInteger(1);
    llvm::interleaveComma(value.getValues<APInt>(), os, [&](APInt i) {
      os << intLiteral(u ? int64_t(i.getZExtValue()) : i.getSExtValue(), et);
    });
  }
  return s;
}

//===----------------------------------------------------------------------===//
// Emitter
//===----------------------------------------------------------------------===//

namespace {

/// How a loop nest indexes one tensor: element offset and per-dimension
/// strides of the iteration space (0 for broadcast dimensions).
struct Access {
  int64_t base = 0;
  SmallVector<int64_t> strides;
};

static SmallVector<int64_t> contiguousStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/// Strides of `shape` read in an iteration space of rank `rank` with numpy
/// broadcasting (trailing alignment, extent-1 dimensions repeat).
static Access broadcastAccess(ArrayRef<int64_t> shape, ArrayRef<int64_t> out) {
  Access a;
  SmallVector<int64_t> st = contiguousStrides(shape);
  a.strides.assign(out.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1)
      a.strides[i + out.size() - shape.size()] = st[i];
  return a;
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
static Type elemOf(Value v) { return getElementTypeOrSelf(v.getType()); }
static int64_t numElements(ArrayRef<int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

class Emitter {
public:
  Emitter(func::FuncOp func, raw_ostream &os, const CppEmitOptions &options)
      : func(func), out(os), options(options) {}
  FailureOr<CppEmitResult> run();

private:
  /// What a result of the function is for.
  enum class Role { Output, Grad, StateUpdate };

  LogicalResult collectInterface();
  LogicalResult planBuffers();
  LogicalResult emitOp(Operation *op);
  LogicalResult emitConstants();

  std::string ptr(Value v) { return names.lookup(v); }
  std::string type(Value v) { return cType(elemOf(v)); }

  /// Emits a loop nest over `shape`; `body` receives each access's offset
  /// expression. Dimensions that are contiguous for every access merge.
  void loops(ArrayRef<int64_t> shape, ArrayRef<Access> accesses,
             const std::function<void(ArrayRef<std::string>)> &body);
  /// out[...] = expr(in0[...], in1[...], ...), with broadcasting.
  void elementwise(Operation *op, ArrayRef<Value> ins,
                   const std::function<std::string(ArrayRef<std::string>)> &f);
  /// Strided copy of `src` into `dst` over `shape`.
  void copy(Value src, const Access &srcAccess, Value dst,
            const Access &dstAccess, ArrayRef<int64_t> shape);
  std::string scalarExpr(Operation *op, ArrayRef<std::string> a);
  /// A call of a gather/scatter kernel over slices of `shape` ([outer, k,
  /// inner] around `axis`) at the indices.
  void slicesAlongAxis(StringRef kernel, Operation *op, Value src, Value idx,
                       ArrayRef<int64_t> shape, int64_t axis);
  /// A call of an element-wise gather/scatter kernel, which walks the
  /// indices' shape and needs both shapes as arrays.
  LogicalResult elementsAlongAxis(StringRef kernel, Operation *op, Value src,
                                  Value idx, ArrayRef<int64_t> dataShape,
                                  int64_t axis);
  /// The buffer `v` lives in: reshapes alias their operand.
  Value rootOf(Value v) const {
    auto it = root.find(v);
    return it == root.end() ? v : it->second;
  }
  bool isSplatInWorkspace(Operation *op) const {
    return splatsInWorkspace.contains(op);
  }

  func::FuncOp func;
  raw_ostream &out;
  const CppEmitOptions &options;
  CppEmitResult result;
  llvm::DenseMap<Value, std::string> names;
  llvm::DenseMap<Value, Value> root;
  std::string body, globals;
  int counter = 0;

  /// Per argument: its index in the inputs table, or, for a state, in the
  /// weights table (argWeight >= 0).
  SmallVector<int64_t> argInput, argWeight;
  /// Per result: its role, and its index in the outputs table or, for a
  /// state update, the weights table index of the state it updates.
  SmallVector<Role> resultRole;
  SmallVector<int64_t> resultIndex;
  /// Large anonymous splat constants, filled into the workspace.
  llvm::DenseSet<Operation *> splatsInWorkspace;
  /// dist.all_slice ops of a weight that the weights table holds as the
  /// rank's block: no code, no buffer.
  llvm::DenseSet<Operation *> loadedSlices;
  /// The mesh: axis names and sizes (empty for one rank).
  dist::MeshOp mesh;
  /// The sharding fields of a table entry: "axes, dim, groups, extent".
  std::string shardFields(dist::ShardingAttr sharding, ArrayRef<int64_t> whole);
  /// The padded dimension and real extent of argument `arg` ({-1, 0}).
  std::pair<int64_t, int64_t> paddingOfArg(unsigned arg);
  /// The mask of mesh axes `axes` names.
  uint32_t axesMask(ArrayAttr axes);
  /// Code for this rank's position in the group of `axes`.
  std::string groupPosition(ArrayAttr axes);
  /// Buffers of split entries: shape of the whole tensor per entry.
  llvm::DenseMap<Value, dist::ShardingAttr> resultShardings;
  /// State updates that read another updated state's old value, which that
  /// state's own update may overwrite first: result index -> the name of a
  /// workspace copy taken before any update lands.
  llvm::DenseMap<int64_t, std::string> updateSnapshots;
};

} // namespace

std::pair<int64_t, int64_t> Emitter::paddingOfArg(unsigned arg) {
  // Optimizer state is padded like its parameter.
  if (auto of = func.getArgAttrOfType<IntegerAttr>(arg, kStateOfAttr))
    arg = of.getInt();
  if (auto pad = func.getArgAttrOfType<DenseI64ArrayAttr>(arg, "dist.padding"))
    return {pad[0], pad[1]};
  return {-1, 0};
}

uint32_t Emitter::axesMask(ArrayAttr axes) {
  uint32_t mask = 0;
  if (!mesh)
    return 0;
  for (Attribute a : axes)
    for (auto [i, name] : llvm::enumerate(mesh.getAxisNames()))
      if (cast<StringAttr>(name) == cast<StringAttr>(a))
        mask |= 1u << i;
  return mask;
}

std::string Emitter::groupPosition(ArrayAttr axes) {
  // Row-major over the mesh: axis i's coordinate is rank / stride_i % size_i;
  // the group position runs row-major over the group's axes.
  ArrayRef<int64_t> shape = mesh.getShape();
  std::string expr = "0";
  for (Attribute a : axes) {
    int64_t stride = 1, size = 1;
    bool found = false;
    for (int64_t i = shape.size() - 1; i >= 0; --i) {
      if (cast<StringAttr>(mesh.getAxisNames()[i]) == cast<StringAttr>(a)) {
        size = shape[i];
        found = true;
        break;
      }
      stride *= shape[i];
    }
    if (!found)
      continue;
    expr = llvm::formatv("(({0}) * {1} + (int64_t)ctx->rank / {2} % {1})", expr,
                         size, stride)
               .str();
  }
  return expr;
}

std::string Emitter::shardFields(dist::ShardingAttr sharding,
                                 ArrayRef<int64_t> whole) {
  if (sharding)
    for (unsigned d = 0; d < sharding.getDims().size(); ++d)
      if (!sharding.getDimAxes(d).empty())
        return llvm::formatv("{0}u, {1}, {2}, {3}",
                             axesMask(cast<ArrayAttr>(sharding.getDims()[d])),
                             d, sharding.getDimGroups(d), whole[d])
            .str();
  return "0u, 0, 0, 0";
}

LogicalResult Emitter::collectInterface() {
  if (auto module = func->getParentOfType<ModuleOp>())
    for (auto m : module.getOps<dist::MeshOp>())
      if (m.getNumRanks() > 1) {
        if (mesh)
          return m.emitError("the CPU target takes one mesh per module");
        mesh = m;
        for (auto [name, size] : llvm::zip(m.getAxisNames(), m.getShape()))
          result.mesh.push_back(
              {cast<StringAttr>(name).getValue().str(), size});
      }
  // The training contract (graph.state, graph.update, graph.grad) was
  // checked by the Graph dialect's verifier when the IR was verified, as it
  // is after parsing and after every pass; this maps it onto the ABI's
  // tables.
  Block &block = func.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  int64_t numInputs = 0;
  for (auto [i, arg] : llvm::enumerate(block.getArguments())) {
    StringRef name = getStateName(func, i);
    if (name.empty()) {
      argInput.push_back(numInputs++);
      argWeight.push_back(-1);
      continue;
    }
    auto init = func.getArgAttrOfType<DenseElementsAttr>(i, kInitAttr);
    if (!init)
      return func.emitError("state '")
             << name << "': the CPU target needs a dense " << kInitAttr
             << " value";
    argInput.push_back(-1);
    argWeight.push_back(result.weights.size());
    WeightEntry entry{name.str(), init, WeightKind::State};
    entry.localType = cast<RankedTensorType>(arg.getType());
    entry.padding = paddingOfArg(i);
    if (auto sharding =
            func.getArgAttrOfType<dist::ShardingAttr>(i, "dist.sharding"))
      for (unsigned d = 0; d < sharding.getDims().size(); ++d)
        if (!sharding.getDimAxes(d).empty()) {
          entry.shardAxes = axesMask(cast<ArrayAttr>(sharding.getDims()[d]));
          entry.shardDim = d;
          entry.shardGroups = sharding.getDimGroups(d);
        }
    result.weights.push_back(entry);
  }

  int64_t numOutputs = 0;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    if (std::optional<unsigned> state = getStateIndex(func, i, kUpdateAttr)) {
      resultRole.push_back(Role::StateUpdate);
      resultIndex.push_back(argWeight[*state]);
      continue;
    }
    resultRole.push_back(getStateIndex(func, i, kGradAttr) ? Role::Grad
                                                           : Role::Output);
    resultIndex.push_back(numOutputs++);
  }
  return success();
}

LogicalResult Emitter::planBuffers() {
  Block &block = func.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  // Reshapes alias their operand; liveness is tracked per root buffer.
  llvm::DenseMap<Value, int64_t> lastUse;
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (auto [i, op] : llvm::enumerate(ops)) {
    if (auto r = dyn_cast<ReshapeOp>(op))
      root[r.getResult()] = rootOf(r.getInput());
    for (Value v : op->getOperands())
      lastUse[rootOf(v)] = std::max<int64_t>(lastUse.lookup(rootOf(v)), i);
  }
  // A value first returned as output k is computed in place in
  // outputs[k]; everything else the function returns is copied at the end
  // (state updates into their state buffers).
  llvm::DenseMap<Value, int64_t> outputSlot;
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (resultRole[k] != Role::StateUpdate && isa<OpResult>(v) &&
        !root.count(v) && !isa<ConstantOp, WeightOp>(v.getDefiningOp()) &&
        !outputSlot.count(v))
      outputSlot[v] = resultIndex[k];

  for (auto [i, arg] : llvm::enumerate(block.getArguments())) {
    std::string n = "a" + std::to_string(i);
    if (argWeight[i] >= 0)
      body += llvm::formatv("  {0}* {1} = ({0}*)w[{2}];\n", type(arg), n,
                            argWeight[i]);
    else
      body += llvm::formatv("  {0}* {1} = ({0}*)in[{2}];\n", type(arg), n,
                            argInput[i]);
    names[arg] = n;
  }

  // First-fit allocation in a 64-byte aligned workspace.
  struct Block_ {
    int64_t offset, size;
    Value owner;
  };
  SmallVector<Block_> live;
  int64_t high = 0;
  auto allocate = [&](int64_t size) {
    size = (std::max<int64_t>(size, 1) + 63) / 64 * 64;
    llvm::sort(live, [](auto &a, auto &b) { return a.offset < b.offset; });
    int64_t at = 0;
    for (auto &b : live) {
      if (b.offset - at >= size)
        break;
      at = std::max(at, b.offset + b.size);
    }
    high = std::max(high, at + size);
    return std::make_pair(at, size);
  };
  for (auto [i, op] : llvm::enumerate(ops)) {
    if ((isa<ConstantOp, WeightOp>(op) && !isSplatInWorkspace(op)) ||
        loadedSlices.contains(op))
      continue;
    for (Value v : op->getResults()) {
      std::string n = "v" + std::to_string(counter++);
      names[v] = n;
      if (root.count(v)) {
        body += llvm::formatv("  {0}* {1} = ({0}*){2};\n", type(v), n,
                              names[root[v]]);
        continue;
      }
      if (auto it = outputSlot.find(v); it != outputSlot.end()) {
        body += llvm::formatv("  {0}* {1} = ({0}*)out[{2}];\n", type(v), n,
                              it->second);
        continue;
      }
      int64_t bytes = numElements(shapeOf(v)) * elementBytes(elemOf(v));
      auto [offset, size] = allocate(bytes);
      live.push_back({offset, size, v});
      body +=
          llvm::formatv("  {0}* {1} = ({0}*)(ws + {2});\n", type(v), n, offset);
      // A result nobody reads is still written: free it after this op.
      if (!lastUse.count(v))
        lastUse[v] = i;
    }
    // Free buffers whose last reader is this op (results stay allocated
    // until after the op, so no op reads and writes the same bytes).
    llvm::erase_if(live, [&](const Block_ &b) {
      return lastUse.lookup(b.owner) <= int64_t(i) &&
             !llvm::is_contained(ret.getOperands(), b.owner) &&
             llvm::none_of(ret.getOperands(),
                           [&](Value r) { return rootOf(r) == b.owner; });
    });
  }

  // An update that reads another state, itself updated, must read it
  // before that update lands: snapshot it in a buffer of its own. (Every
  // returned value is still live here, so the snapshots overlap none.)
  llvm::DenseSet<int64_t> updatedStates;
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (resultRole[k] == Role::StateUpdate)
      updatedStates.insert(resultIndex[k]);
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    if (resultRole[k] != Role::StateUpdate)
      continue;
    auto arg = dyn_cast<BlockArgument>(rootOf(v));
    if (!arg || argWeight[arg.getArgNumber()] < 0 ||
        argWeight[arg.getArgNumber()] == resultIndex[k] ||
        !updatedStates.contains(argWeight[arg.getArgNumber()]))
      continue;
    int64_t bytes = numElements(shapeOf(v)) * elementBytes(elemOf(v));
    auto [offset, size] = allocate(bytes);
    live.push_back({offset, size, v});
    std::string n = "snap" + std::to_string(counter++);
    body +=
        llvm::formatv("  {0}* {1} = ({0}*)(ws + {2});\n", type(v), n, offset);
    updateSnapshots[k] = n;
  }
  result.workspaceBytes = high;
  return success();
}

LogicalResult Emitter::emitConstants() {
  llvm::StringSet<> stateNames;
  for (const WeightEntry &w : result.weights)
    stateNames.insert(w.name);
  for (Operation &op : func.getBody().front()) {
    if (!isa<ConstantOp, WeightOp>(op))
      continue;
    Value v = op.getResult(0);
    auto weight = dyn_cast<WeightOp>(op);
    auto value = dyn_cast<DenseElementsAttr>(
        weight ? weight.getValue() : cast<ConstantOp>(op).getValue());
    if (!value)
      return op.emitError("the CPU target needs dense constants");
    if (weight && stateNames.contains(weight.getName()))
      return op.emitError("weight '")
             << weight.getName() << "' has the name of a state argument";
    if (!weight && value.isSplat() &&
        value.getNumElements() > options.maxInlineElements) {
      // Autodiff creates large zero tensors: writing them to the weights
      // file would cost disk and load time for nothing. planBuffers gives
      // them a workspace buffer and emitOp fills it.
      splatsInWorkspace.insert(&op);
      continue;
    }
    std::string n = "c" + std::to_string(counter++);
    names[v] = n;
    std::string t = type(v);
    // Small constants live in the code; parameters and large constants in
    // the weights file.
    if (!weight && value.getNumElements() <= options.maxInlineElements) {
      globals += llvm::formatv("static const {0} {1}_data[] = {{{2}};\n", t, n,
                               value.getNumElements() ? literals(value) : "0");
      body += llvm::formatv("  {0}* {1} = ({0}*){1}_data;\n", t, n);
      continue;
    }
    std::string wname =
        weight ? weight.getName().str()
               : "pcc.const." + std::to_string(result.weights.size());
    body += llvm::formatv("  {0}* {1} = ({0}*)w[{2}];\n", t, n,
                          result.weights.size());
    WeightEntry entry{wname, value};
    entry.localType = cast<RankedTensorType>(v.getType());
    if (weight)
      if (auto pad = weight->getAttrOfType<DenseI64ArrayAttr>("dist.padding"))
        entry.padding = {pad[0], pad[1]};
    // A weight read only through its dist.all_slice: the table holds the
    // rank's block, which the runtime cuts from the whole tensor.
    if (weight && v.hasOneUse())
      if (auto slice = dyn_cast<dist::AllSliceOp>(*v.getUsers().begin())) {
        entry.localType = cast<RankedTensorType>(slice.getType());
        entry.shardAxes = axesMask(slice.getAxes());
        entry.shardDim = slice.getDimAttr().getInt();
        entry.shardGroups = slice.getGroupsAttr().getInt();
        loadedSlices.insert(slice);
        names[slice.getResult()] = n;
      }
    result.weights.push_back(entry);
  }
  return success();
}

void Emitter::loops(ArrayRef<int64_t> shape, ArrayRef<Access> accesses,
                    const std::function<void(ArrayRef<std::string>)> &f) {
  if (numElements(shape) == 0)
    return;
  // Drop unit dimensions, then merge dimension d into d+1 where every
  // access is contiguous across them.
  SmallVector<int64_t> dims;
  SmallVector<SmallVector<int64_t>> strides(accesses.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    dims.push_back(shape[d]);
    for (size_t k = 0; k < accesses.size(); ++k)
      strides[k].push_back(accesses[k].strides[d]);
  }
  for (int64_t d = int64_t(dims.size()) - 2; d >= 0; --d) {
    bool mergeable = llvm::all_of(
        strides, [&](auto &s) { return s[d] == s[d + 1] * dims[d + 1]; });
    if (!mergeable)
      continue;
    dims[d] *= dims[d + 1];
    dims.erase(dims.begin() + d + 1);
    for (auto &s : strides) {
      s[d] = s[d + 1];
      s.erase(s.begin() + d + 1);
    }
  }
  std::string indent = "  ";
  SmallVector<std::string> vars;
  body += "  {\n";
  for (int64_t n : dims) {
    std::string v = "i" + std::to_string(counter++);
    body += indent +
            llvm::formatv("  for (int64_t {0} = 0; {0} < {1}; ++{0})\n", v, n)
                .str();
    indent += "  ";
    vars.push_back(v);
  }
  SmallVector<std::string> offsets;
  for (size_t k = 0; k < accesses.size(); ++k) {
    std::string e = std::to_string(accesses[k].base);
    for (size_t d = 0; d < dims.size(); ++d)
      if (strides[k][d] == 1)
        e += " + " + vars[d];
      else if (strides[k][d] != 0)
        e += " + " + vars[d] + " * " + std::to_string(strides[k][d]);
    offsets.push_back(e);
  }
  body += indent + "  ";
  f(offsets);
  body += "\n  }\n";
}

void Emitter::elementwise(
    Operation *op, ArrayRef<Value> ins,
    const std::function<std::string(ArrayRef<std::string>)> &f) {
  Value res = op->getResult(0);
  ArrayRef<int64_t> shape = shapeOf(res);
  SmallVector<Access> accesses{broadcastAccess(shape, shape)};
  for (Value v : ins)
    accesses.push_back(broadcastAccess(shapeOf(v), shape));
  loops(shape, accesses, [&](ArrayRef<std::string> off) {
    SmallVector<std::string> args;
    for (auto [k, v] : llvm::enumerate(ins))
      args.push_back(ptr(v) + "[" + off[k + 1] + "]");
    body += ptr(res) + "[" + off[0] + "] = " + f(args) + ";";
  });
}

void Emitter::copy(Value src, const Access &srcAccess, Value dst,
                   const Access &dstAccess, ArrayRef<int64_t> shape) {
  loops(shape, {dstAccess, srcAccess}, [&](ArrayRef<std::string> off) {
    body += ptr(dst) + "[" + off[0] + "] = " + ptr(src) + "[" + off[1] + "];";
  });
}

std::string Emitter::scalarExpr(Operation *op, ArrayRef<std::string> a) {
  std::string t = type(op->getResult(0));
  Type et = elemOf(op->getResult(0));
  bool isFloat = isa<FloatType>(et);
  auto call = [&](StringRef fn) {
    return ("std::" + fn + "(" + a[0] + ")").str();
  };
  return llvm::TypeSwitch<Operation *, std::string>(op)
      .Case([&](SqrtOp) { return call("sqrt"); })
      .Case([&](ReciprocalOp) { return t + "(1) / " + a[0]; })
      .Case([&](NegOp) { return t + "(-" + a[0] + ")"; })
      .Case([&](AbsOp) {
        return isFloat ? call("fabs")
                       : "(" + a[0] + " < 0 ? " + t + "(-" + a[0] +
                             ") : " + a[0] + ")";
      })
      .Case([&](ErfOp) { return call("erf"); })
      .Case([&](TanhOp) { return call("tanh"); })
      .Case([&](SigmoidOp) {
        return t + "(1) / (" + t + "(1) + std::exp(-" + a[0] + "))";
      })
      .Case([&](ExpOp) { return call("exp"); })
      .Case([&](LogOp) { return call("log"); })
      .Case([&](ReluOp) {
        return "(" + a[0] + " > " + t + "(0) ? " + a[0] + " : " + t + "(0))";
      })
      .Case([&](FloorOp) { return call("floor"); })
      .Case([&](CeilOp) { return call("ceil"); })
      .Case([&](SinOp) { return call("sin"); })
      .Case([&](CosOp) { return call("cos"); })
      .Case([&](NotOp) { return "!" + a[0]; })
      .Case([&](IsNaNOp) { return "std::isnan(" + a[0] + ")"; })
      .Case([&](AddOp) { return t + "(" + a[0] + " + " + a[1] + ")"; })
      .Case([&](SubOp) { return t + "(" + a[0] + " - " + a[1] + ")"; })
      .Case([&](MulOp) { return t + "(" + a[0] + " * " + a[1] + ")"; })
      .Case([&](DivOp) {
        // Integer division by zero is undefined in ONNX; give 0, not a trap.
        return isFloat ? a[0] + " / " + a[1]
                       : "(" + a[1] + " ? " + t + "(" + a[0] + " / " + a[1] +
                             ") : " + t + "(0))";
      })
      .Case([&](PowOp) {
        return isFloat ? t + "(std::pow(double(" + a[0] + "), double(" + a[1] +
                             ")))"
                       : "pcc_k::ipow<" + t + ">(" + a[0] + ", " + t + "(" +
                             a[1] + "))";
      })
      .Case([&](MaxOp) {
        return isFloat ? "std::fmax(" + a[0] + ", " + a[1] + ")"
                       : "std::max<" + t + ">(" + a[0] + ", " + a[1] + ")";
      })
      .Case([&](MinOp) {
        return isFloat ? "std::fmin(" + a[0] + ", " + a[1] + ")"
                       : "std::min<" + t + ">(" + a[0] + ", " + a[1] + ")";
      })
      .Case([&](AndOp) { return "(" + a[0] + " && " + a[1] + ")"; })
      .Case([&](OrOp) { return "(" + a[0] + " || " + a[1] + ")"; })
      .Case([&](XorOp) { return "(" + a[0] + " != " + a[1] + ")"; })
      .Case([&](EqualOp) { return "(" + a[0] + " == " + a[1] + ")"; })
      .Case([&](LessOp) { return "(" + a[0] + " < " + a[1] + ")"; })
      .Case([&](LessOrEqualOp) { return "(" + a[0] + " <= " + a[1] + ")"; })
      .Case([&](GreaterOp) { return "(" + a[0] + " > " + a[1] + ")"; })
      .Case([&](GreaterOrEqualOp) { return "(" + a[0] + " >= " + a[1] + ")"; })
      .Case([&](WhereOp) {
        return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
      })
      .Case([&](CastOp c) {
        if (et.isInteger(1))
          return "(" + a[0] + " != 0)";
        return "static_cast<" + t + ">(" + a[0] + ")";
      })
      .Default([](Operation *) { return std::string(); });
}

void Emitter::slicesAlongAxis(StringRef kernel, Operation *op, Value src,
                              Value idx, ArrayRef<int64_t> shape,
                              int64_t axis) {
  body += llvm::formatv(
      "  if (pcc_k::{0}({1}, {2}, {3}, {4}, {5}, {6}, {7})) return "
      "PCCRT_ERR_INDEX_OUT_OF_RANGE;\n",
      kernel, ptr(src), ptr(idx), ptr(op->getResult(0)),
      numElements(shape.take_front(axis)), shape[axis],
      numElements(shape.drop_front(axis + 1)), numElements(shapeOf(idx)));
}

LogicalResult Emitter::elementsAlongAxis(StringRef kernel, Operation *op,
                                         Value src, Value idx,
                                         ArrayRef<int64_t> dataShape,
                                         int64_t axis) {
  if (dataShape.size() > 16)
    return op->emitOpError("of rank above 16 is not supported by the CPU "
                           "target");
  auto join = [](ArrayRef<int64_t> v) {
    std::string s;
    llvm::raw_string_ostream os(s);
    llvm::interleaveComma(v, os);
    return s;
  };
  std::string n = "s" + std::to_string(counter++);
  globals += llvm::formatv("static const int64_t {0}_d[] = {{{1}};\n"
                           "static const int64_t {0}_i[] = {{{2}};\n",
                           n, join(dataShape), join(shapeOf(idx)));
  body += llvm::formatv("  if (pcc_k::{0}({1}, {2}, {3}, {4}, {5}_d, {5}_i, "
                        "{6})) return PCCRT_ERR_INDEX_OUT_OF_RANGE;\n",
                        kernel, ptr(src), ptr(idx), ptr(op->getResult(0)),
                        dataShape.size(), n, axis);
  return success();
}

LogicalResult Emitter::emitOp(Operation *op) {
  body += llvm::formatv("  // {0} {1}\n", op->getName().getStringRef(),
                        op->getLoc());
  auto result = [&](unsigned i = 0) { return op->getResult(i); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ConstantOp c) {
        if (!isSplatInWorkspace(op))
          return success();
        // A large splat: filled here, in its workspace buffer.
        auto value = cast<DenseElementsAttr>(c.getValue());
        Type et = value.getElementType();
        std::string element =
            literals(value.resizeSplat(RankedTensorType::get({1}, et)));
        body += llvm::formatv("  for (int64_t k = 0; k < {0}; ++k) "
                              "{1}[k] = {2}({3});\n",
                              value.getNumElements(), ptr(result()),
                              type(result()), element);
        return success();
      })
      .Case<WeightOp, ReshapeOp>([](auto) { return success(); })
      .Case<SqrtOp, ReciprocalOp, NegOp, AbsOp, ErfOp, TanhOp, SigmoidOp, ExpOp,
            LogOp, ReluOp, FloorOp, CeilOp, SinOp, CosOp, NotOp, AddOp, SubOp,
            MulOp, DivOp, PowOp, MaxOp, MinOp, AndOp, OrOp, XorOp, EqualOp,
            LessOp, LessOrEqualOp, GreaterOp, GreaterOrEqualOp, WhereOp, CastOp,
            IsNaNOp>([&](Operation *o) {
        SmallVector<Value> ins(o->getOperands());
        elementwise(o, ins,
                    [&](ArrayRef<std::string> a) { return scalarExpr(o, a); });
        return success();
      })
      .Case([&](MatMulOp m) {
        SmallVector<int64_t> a(shapeOf(m.getLhs())), b(shapeOf(m.getRhs()));
        bool vecA = a.size() == 1, vecB = b.size() == 1;
        if (vecA)
          a.insert(a.begin(), 1);
        if (vecB)
          b.push_back(1);
        int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
        SmallVector<int64_t> batch(
            *broadcastShapes(ArrayRef<int64_t>(a).drop_back(2),
                             ArrayRef<int64_t>(b).drop_back(2)));
        Access aa = broadcastAccess(ArrayRef<int64_t>(a).drop_back(2), batch);
        Access ab = broadcastAccess(ArrayRef<int64_t>(b).drop_back(2), batch);
        Access ac = broadcastAccess(batch, batch);
        for (int64_t &s : aa.strides)
          s *= M * K;
        for (int64_t &s : ab.strides)
          s *= K * N;
        for (int64_t &s : ac.strides)
          s *= M * N;
        std::string t = type(result());
        if (numElements(batch) == 0 || M * N == 0)
          return success();
        loops(batch, {aa, ab, ac}, [&](ArrayRef<std::string> off) {
          body += llvm::formatv("pcc_k::gemm<{0}>({1}, {2}, {3}, {0}(1), "
                                "{4} + {5}, {3}, false, {6} + {7}, {2}, false, "
                                "{0}(0), {8} + {9}, {2});",
                                t, M, N, K, ptr(m.getLhs()), off[0],
                                ptr(m.getRhs()), off[1], ptr(result()), off[2]);
        });
        return success();
      })
      .Case([&](GemmOp g) {
        ArrayRef<int64_t> c = shapeOf(result());
        ArrayRef<int64_t> as = shapeOf(g.getA()), bs = shapeOf(g.getB());
        int64_t K = g.getTransA() ? as[0] : as[1];
        std::string t = type(result());
        float beta = g.getBeta().convertToFloat();
        if (Value bias = g.getC())
          elementwise(op, {bias}, [&](ArrayRef<std::string> a) {
            return t + "(" + floatLiteral(beta, true) + " * " + a[0] + ")";
          });
        body += llvm::formatv(
            "  pcc_k::gemm<{0}>({1}, {2}, {3}, {0}({4}), {5}, {6}, {7}, {8}, "
            "{9}, {10}, {0}({11}), {12}, {2});\n",
            t, c[0], c[1], K, floatLiteral(g.getAlpha().convertToFloat(), true),
            ptr(g.getA()), as[1], g.getTransA() ? "true" : "false",
            ptr(g.getB()), bs[1], g.getTransB() ? "true" : "false",
            g.getC() ? "1" : "0", ptr(result()));
        return success();
      })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto s) {
        ArrayRef<int64_t> sh = shapeOf(s.getInput());
        int64_t axis = s.getAxis();
        body += llvm::formatv(
            "  pcc_k::softmax<{0}>({1}, {2}, {3}, {4}, {5}, {6});\n",
            type(result()), ptr(s.getInput()), ptr(result()),
            numElements(sh.take_front(axis)), sh[axis],
            numElements(sh.drop_front(axis + 1)),
            isa<LogSoftmaxOp>(op) ? "true" : "false");
        return success();
      })
      .Case([&](LayerNormOp l) -> LogicalResult {
        ArrayRef<int64_t> sh = shapeOf(l.getInput());
        int64_t n = numElements(sh.drop_front(l.getAxis()));
        for (Value v : {l.getScale(), l.getBias()})
          if (v && numElements(shapeOf(v)) != n)
            return op->emitError("LayerNormalization: broadcast scale/bias "
                                 "is not supported by the CPU target");
        body += llvm::formatv(
            "  pcc_k::layerNorm<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, "
            "{0}({9}));\n",
            type(result()), ptr(l.getInput()), ptr(l.getScale()),
            l.getBias() ? ptr(l.getBias()) : "nullptr", ptr(result(0)),
            ptr(result(1)), ptr(result(2)),
            numElements(sh.take_front(l.getAxis())), n,
            floatLiteral(l.getEpsilon().convertToFloat(), true));
        return success();
      })
      .Case<ReduceMeanOp, ReduceSumOp, ReduceMaxOp, ReduceMinOp>([&](auto r) {
        // Iterate over the input; the output access has stride 0 along
        // reduced dimensions.
        ArrayRef<int64_t> in = shapeOf(r.getInput());
        SmallVector<int64_t> kept;
        for (size_t d = 0; d < in.size(); ++d)
          kept.push_back(llvm::is_contained(r.getAxes(), int64_t(d)) ? 1
                                                                     : in[d]);
        Access ao = broadcastAccess(kept, in);
        for (size_t d = 0; d < in.size(); ++d)
          if (llvm::is_contained(r.getAxes(), int64_t(d)))
            ao.strides[d] = 0;
        std::string t = type(result());
        int64_t outN = numElements(shapeOf(result()));
        bool isMax = isa<ReduceMaxOp>(op), isMin = isa<ReduceMinOp>(op);
        std::string init = isMax   ? "std::numeric_limits<" + t + ">::lowest()"
                           : isMin ? "std::numeric_limits<" + t + ">::max()"
                                   : t + "(0)";
        if (isa<FloatType>(elemOf(result())) && (isMax || isMin))
          init = std::string(isMax ? "-" : "") + "std::numeric_limits<" + t +
                 ">::infinity()";
        body += llvm::formatv("  for (int64_t k = 0; k < {0}; ++k) "
                              "{1}[k] = {2};\n",
                              outN, ptr(result()), init);
        loops(in, {ao, broadcastAccess(in, in)},
              [&](ArrayRef<std::string> off) {
                std::string y = ptr(result()) + "[" + off[0] + "]";
                std::string x = ptr(r.getInput()) + "[" + off[1] + "]";
                if (isMax)
                  body += y + " = std::max<" + t + ">(" + y + ", " + x + ");";
                else if (isMin)
                  body += y + " = std::min<" + t + ">(" + y + ", " + x + ");";
                else
                  body += y + " = " + t + "(" + y + " + " + x + ");";
              });
        if (isa<ReduceMeanOp>(op)) {
          int64_t count = numElements(in) / std::max<int64_t>(outN, 1);
          body += llvm::formatv("  for (int64_t k = 0; k < {0}; ++k) "
                                "{1}[k] = {1}[k] / {2}({3});\n",
                                outN, ptr(result()), t, count);
        }
        return success();
      })
      .Case([&](TransposeOp tr) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        SmallVector<int64_t> st = contiguousStrides(shapeOf(tr.getInput()));
        Access src;
        for (int64_t p : tr.getPerm())
          src.strides.push_back(st[p]);
        copy(tr.getInput(), src, result(), broadcastAccess(outShape, outShape),
             outShape);
        return success();
      })
      .Case([&](ExpandOp e) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        copy(e.getInput(), broadcastAccess(shapeOf(e.getInput()), outShape),
             result(), broadcastAccess(outShape, outShape), outShape);
        return success();
      })
      .Case([&](SliceOp s) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        SmallVector<int64_t> st = contiguousStrides(shapeOf(s.getInput()));
        Access src;
        for (size_t d = 0; d < st.size(); ++d) {
          src.base += s.getStarts()[d] * st[d];
          src.strides.push_back(s.getSteps()[d] * st[d]);
        }
        copy(s.getInput(), src, result(), broadcastAccess(outShape, outShape),
             outShape);
        return success();
      })
      .Case([&](ConcatOp c) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        SmallVector<int64_t> ost = contiguousStrides(outShape);
        int64_t at = 0, axis = c.getAxis();
        for (Value in : c.getInputs()) {
          ArrayRef<int64_t> s = shapeOf(in);
          Access dst{at * ost[axis], ost};
          copy(in, broadcastAccess(s, s), result(), dst, s);
          at += s[axis];
        }
        return success();
      })
      .Case([&](SplitOp s) {
        ArrayRef<int64_t> inShape = shapeOf(s.getInput());
        SmallVector<int64_t> ist = contiguousStrides(inShape);
        int64_t at = 0, axis = s.getAxis();
        for (Value o : s.getResults()) {
          ArrayRef<int64_t> os = shapeOf(o);
          Access src{at * ist[axis], ist};
          copy(s.getInput(), src, o, broadcastAccess(os, os), os);
          at += os[axis];
        }
        return success();
      })
      .Case([&](GatherOp g) {
        slicesAlongAxis("gather", op, g.getData(), g.getIndices(),
                        shapeOf(g.getData()), g.getAxis());
        return success();
      })
      .Case([&](GatherElementsOp g) {
        return elementsAlongAxis("gatherElements", op, g.getData(),
                                 g.getIndices(), shapeOf(g.getData()),
                                 g.getAxis());
      })
      .Case([&](CumSumOp c) {
        ArrayRef<int64_t> s = shapeOf(result());
        int64_t axis = c.getAxis(), n = s[axis];
        int64_t inner = numElements(s.drop_front(axis + 1));
        std::string t = type(result());
        // i runs along the axis in summing order; e is the element index.
        body += llvm::formatv(
            "  for (int64_t o = 0; o < {0}; ++o)\n"
            "    for (int64_t k = 0; k < {1}; ++k) {{\n"
            "      {2} acc = {2}(0);\n"
            "      for (int64_t step = 0; step < {3}; ++step) {{\n"
            "        int64_t i = {4};\n"
            "        int64_t e = (o * {3} + i) * {1} + k;\n"
            "        {5}\n"
            "      }\n"
            "    }\n",
            numElements(s.take_front(axis)), inner, t, n,
            c.getReverse() ? llvm::formatv("{0} - 1 - step", n).str()
                           : std::string("step"),
            c.getExclusive()
                ? llvm::formatv("{0} x = {1}[e]; {2}[e] = acc; acc = {0}(acc "
                                "+ x);",
                                t, ptr(c.getInput()), ptr(result()))
                      .str()
                : llvm::formatv("acc = {0}(acc + {1}[e]); {2}[e] = acc;", t,
                                ptr(c.getInput()), ptr(result()))
                      .str());
        return success();
      })
      .Case([&](TriluOp t) {
        ArrayRef<int64_t> s = shapeOf(t.getInput());
        int64_t rows = s[s.size() - 2], cols = s.back();
        body += llvm::formatv(
            "  pcc_k::trilu({0}, {1}, {2}, {3}, {4}, {5}, "
            "{6}LL);\n",
            ptr(t.getInput()), ptr(result()),
            numElements(s) / std::max<int64_t>(rows * cols, 1), rows, cols,
            t.getUpper() ? "true" : "false", t.getK());
        return success();
      })
      .Case([&](ScatterAddOp sc) {
        slicesAlongAxis("scatterAdd", op, sc.getUpdates(), sc.getIndices(),
                        shapeOf(result()), sc.getAxis());
        return success();
      })
      .Case([&](ScatterElementsAddOp sc) {
        return elementsAlongAxis("scatterElementsAdd", op, sc.getUpdates(),
                                 sc.getIndices(), shapeOf(result()),
                                 sc.getAxis());
      })
      .Case([&](InsertSliceOp is) {
        ArrayRef<int64_t> outShape = shapeOf(result());
        ArrayRef<int64_t> srcShape = shapeOf(is.getSource());
        std::string t = type(result());
        body += llvm::formatv("  for (int64_t k = 0; k < {0}; ++k) {1}[k] = "
                              "{2}(0);\n",
                              numElements(outShape), ptr(result()), t);
        SmallVector<int64_t> st = contiguousStrides(outShape);
        Access dst;
        for (size_t d = 0; d < st.size(); ++d) {
          dst.base += is.getStarts()[d] * st[d];
          dst.strides.push_back(is.getSteps()[d] * st[d]);
        }
        copy(is.getSource(), broadcastAccess(srcShape, srcShape), result(), dst,
             srcShape);
        return success();
      })
      .Case([&](dist::AllReduceOp r) {
        int64_t n = numElements(shapeOf(r.getInput()));
        body += llvm::formatv(
            "  if ((void*){0} != (void*){1}) std::memcpy({0}, {1}, {2});\n"
            "  if (ctx->comm->ops->all_reduce(ctx->comm, {3}u, {0}, {4}, {5}, "
            "{6})) return PCCRT_ERR_COMM;\n",
            ptr(result()), ptr(r.getInput()),
            n * elementBytes(elemOf(result())), axesMask(r.getAxes()), n,
            getOnnxDataType(elemOf(result())), int(r.getKind()));
        return success();
      })
      .Case([&](dist::AllGatherOp g) -> LogicalResult {
        // Blocks are joined along the outermost dimension (partitioning
        // moves the gathered dimension there).
        ArrayRef<int64_t> in = shapeOf(g.getInput());
        if (g.getDimAttr().getInt() != 0 &&
            llvm::any_of(in.take_front(g.getDimAttr().getInt()),
                         [](int64_t d) { return d != 1; }))
          return g.emitError("the CPU target gathers along the outermost "
                             "dimension only");
        body += llvm::formatv(
            "  if (ctx->comm->ops->all_gather(ctx->comm, {0}u, {1}, {2}, {3}, "
            "{4})) return PCCRT_ERR_COMM;\n",
            axesMask(g.getAxes()), ptr(g.getInput()), ptr(result()),
            numElements(in), getOnnxDataType(elemOf(result())));
        return success();
      })
      .Case([&](dist::ReduceScatterOp r) -> LogicalResult {
        ArrayRef<int64_t> out = shapeOf(result());
        int64_t dim = r.getDimAttr().getInt();
        if (dim != 0 &&
            llvm::any_of(out.take_front(dim), [](int64_t d) { return d != 1; }))
          return r.emitError("the CPU target scatters along the outermost "
                             "dimension only");
        body += llvm::formatv(
            "  if (ctx->comm->ops->reduce_scatter(ctx->comm, {0}u, {1}, {2}, "
            "{3}, {4}, {5})) return PCCRT_ERR_COMM;\n",
            axesMask(r.getAxes()), ptr(r.getInput()), ptr(result()),
            numElements(out), getOnnxDataType(elemOf(result())),
            int(r.getKind()));
        return success();
      })
      .Case([&](dist::AllSliceOp sl) {
        if (loadedSlices.contains(op))
          return success();
        // Viewed as [outer * groups, shards, block * inner]: keep this
        // rank's block of every group.
        ArrayRef<int64_t> in = shapeOf(sl.getInput());
        int64_t dim = sl.getDimAttr().getInt();
        int64_t groups = sl.getGroupsAttr().getInt();
        int64_t shards = sl.getGroupSize();
        int64_t outer = numElements(in.take_front(dim)) * groups;
        int64_t inner = numElements(in.drop_front(dim + 1));
        int64_t chunk = in[dim] / groups / shards * inner;
        body += llvm::formatv(
            "  {{ const int64_t p = {0};\n"
            "    for (int64_t o = 0; o < {1}; ++o) std::memcpy({2} + o * {3}, "
            "{4} + (o * {5} + p) * {3}, {3} * sizeof({6})); }\n",
            groupPosition(sl.getAxes()), outer, ptr(result()), chunk,
            ptr(sl.getInput()), shards, type(result()));
        return success();
      })
      .Case([&](dist::AxisIndexOp a) {
        body += llvm::formatv("  {0}[0] = {1};\n", ptr(result()),
                              groupPosition(a.getAxes()));
        return success();
      })
      .Default([](Operation *o) {
        return o->emitError("the CPU target cannot lower '")
               << o->getName() << "'";
      });
}

FailureOr<CppEmitResult> Emitter::run() {
  if (!llvm::hasSingleElement(func.getBody()))
    return func.emitError("the CPU target expects a single block"), failure();
  Block &block = func.getBody().front();
  if (failed(collectInterface()) || failed(emitConstants()) ||
      failed(planBuffers()))
    return failure();
  for (Operation &op : block.without_terminator())
    if (failed(emitOp(&op)))
      return failure();

  // Outputs that are not computed in place are copied. Then the state
  // updates land, last, so that every read of a state (outputs and
  // gradients that alias one included) sees its old value.
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  auto bytesOf = [](Value v) {
    return numElements(shapeOf(v)) * elementBytes(elemOf(v));
  };
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    if (resultRole[k] == Role::StateUpdate)
      continue;
    std::string target =
        llvm::formatv("(({0}*)out[{1}])", type(v), resultIndex[k]).str();
    body += llvm::formatv("  if ((void*){0} != (void*){1}) "
                          "std::memcpy({0}, {1}, {2});\n",
                          target, ptr(v), bytesOf(v));
  }
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (auto it = updateSnapshots.find(k); it != updateSnapshots.end())
      body += llvm::formatv("  std::memcpy({0}, {1}, {2});\n", it->second,
                            ptr(v), bytesOf(v));
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    if (resultRole[k] != Role::StateUpdate)
      continue;
    std::string target =
        llvm::formatv("(({0}*)w[{1}])", type(v), resultIndex[k]).str();
    auto snapshot = updateSnapshots.find(k);
    std::string src =
        snapshot != updateSnapshots.end() ? snapshot->second : ptr(v);
    body += llvm::formatv("  // state update '{0}'\n",
                          result.weights[resultIndex[k]].name);
    body += llvm::formatv("  if ((void*){0} != (void*){1}) "
                          "std::memcpy({0}, {1}, {2});\n",
                          target, src, bytesOf(v));
  }

  std::string p = options.symbolPrefix;
  auto tableEntry = [&](StringRef name, Type t, int64_t i, StringRef group,
                        StringRef kind, std::string shard = "0u, 0, 0, 0") {
    auto rt = cast<RankedTensorType>(t);
    std::string shapeName = llvm::formatv("{0}_{1}_shape{2}", p, group, i);
    std::string dims;
    llvm::raw_string_ostream os(dims);
    llvm::interleaveComma(rt.getShape(), os);
    globals += llvm::formatv("static const int64_t {0}[] = {{{1}};\n",
                             shapeName, rt.getRank() ? dims : "0");
    std::string escaped;
    for (char ch : name) {
      if (ch == '"' || ch == '\\')
        escaped += '\\';
      escaped += ch;
    }
    return llvm::formatv("  {{\"{0}\", {1}, {2}, {3}, {4}, {5}},\n", escaped,
                         getOnnxDataType(rt.getElementType()), rt.getRank(),
                         shapeName, kind, shard)
        .str();
  };
  std::string inputs, outputs, weights;
  int64_t numInputs = 0, numOutputs = 0;
  for (auto [i, arg] : llvm::enumerate(block.getArguments())) {
    if (argWeight[i] >= 0)
      continue;
    auto name = func.getArgAttrOfType<StringAttr>(i, kOnnxNameAttr);
    inputs += tableEntry(name ? name.getValue() : "input_" + std::to_string(i),
                         arg.getType(), numInputs++, "in", "PCCRT_KIND_INPUT");
  }
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (resultRole[i] == Role::StateUpdate)
      continue;
    // A gradient is named by its parameter.
    bool isGrad = resultRole[i] == Role::Grad;
    std::string name = "output_" + std::to_string(i);
    if (isGrad)
      name = getStateName(func, *getStateIndex(func, i, kGradAttr)).str();
    else if (auto onnx = func.getResultAttrOfType<StringAttr>(i, kOnnxNameAttr))
      name = onnx.getValue().str();
    // A split result's whole extents are the local ones times the shards.
    auto sharding =
        func.getResultAttrOfType<dist::ShardingAttr>(i, "dist.sharding");
    SmallVector<int64_t> whole(shapeOf(v));
    if (sharding)
      for (unsigned d = 0; d < whole.size(); ++d)
        for (StringRef axis : sharding.getDimAxes(d))
          whole[d] *= mesh ? mesh.getAxisSize(axis).value_or(1) : 1;
    // Padding is cut from a split output when gathered: a gradient is
    // padded like its parameter.
    std::pair<int64_t, int64_t> pad{-1, 0};
    if (isGrad)
      pad = paddingOfArg(*getStateIndex(func, i, kGradAttr));
    else if (auto p =
                 func.getResultAttrOfType<DenseI64ArrayAttr>(i, "dist.padding"))
      pad = {p[0], p[1]};
    if (pad.first >= 0)
      whole[pad.first] = pad.second;
    outputs += tableEntry(name, v.getType(), numOutputs++, "out",
                          isGrad ? "PCCRT_KIND_GRAD" : "PCCRT_KIND_OUTPUT",
                          shardFields(sharding, whole));
  }
  for (auto [i, w] : llvm::enumerate(result.weights)) {
    std::string shard = "0u, 0, 0, 0";
    if (w.shardAxes)
      shard = llvm::formatv("{0}u, {1}, {2}, {3}", w.shardAxes, w.shardDim,
                            w.shardGroups,
                            w.padding.first == w.shardDim
                                ? w.padding.second
                                : w.value.getType().getDimSize(w.shardDim))
                  .str();
    weights += tableEntry(w.name, w.localType ? w.localType : w.value.getType(),
                          i, "w",
                          w.kind == WeightKind::State ? "PCCRT_KIND_STATE"
                                                      : "PCCRT_KIND_CONSTANT",
                          shard);
  }
  // The mesh of a multi-rank program.
  std::string meshInfo = "0, nullptr, nullptr";
  if (!result.mesh.empty()) {
    std::string names, sizes;
    for (auto &[name, size] : result.mesh) {
      names += "\"" + name + "\", ";
      sizes += std::to_string(size) + ", ";
    }
    globals += llvm::formatv("static const char *const {0}_mesh_axes[] = "
                             "{{{1}};\nstatic const int64_t {0}_mesh_shape[] "
                             "= {{{2}};\n",
                             p, names, sizes);
    meshInfo = llvm::formatv("{0}, {1}_mesh_axes, {1}_mesh_shape",
                             result.mesh.size(), p);
  }
  // C++ has no empty arrays: an empty table holds one unused entry.
  static const char kNoEntry[] =
      "  {nullptr, 0, 0, nullptr, 0, 0u, 0, 0, 0},\n";

  out << "// Generated by pcc: the model as straight-line C++ on static "
         "shapes.\n"
      << "#include \"pccrt.h\"\n#include \"pcc_kernels.h\"\n\n"
      << "namespace " << p << "_model {\n"
      << globals << "\n"
      << "static const pccrt_tensor_info inputs[] = {\n"
      << (inputs.empty() ? kNoEntry : inputs)
      << "};\nstatic const pccrt_tensor_info outputs[] = {\n"
      << (outputs.empty() ? kNoEntry : outputs)
      << "};\nstatic const pccrt_tensor_info weights[] = {\n"
      << (weights.empty() ? kNoEntry : weights) << "};\n} // namespace " << p
      << "_model\n\n"
      << "extern \"C\" const pccrt_model_info *" << p << "_model_info(void) {\n"
      << "  using namespace " << p << "_model;\n"
      << "  static const pccrt_model_info info = {PCCRT_ABI_VERSION, "
      << numInputs << ", inputs, " << numOutputs << ", outputs, "
      << result.weights.size() << ", weights, " << result.workspaceBytes
      << "ULL, " << meshInfo << "};\n  return &info;\n}\n\n"
      << "extern \"C\" int " << p << "_model_run(const pccrt_context *ctx) {\n"
      << "  using namespace " << p << "_model;\n"
      << "  if (ctx->abi_version != PCCRT_ABI_VERSION) "
         "return PCCRT_ERR_ABI_MISMATCH;\n"
      << "  void *const *in = ctx->inputs;\n"
      << "  void *const *out = ctx->outputs;\n"
      << "  void *const *w = ctx->weights;\n"
      << "  char *ws = (char *)ctx->workspace;\n"
      << "  (void)in; (void)out; (void)w; (void)ws;\n"
      << (result.mesh.empty() ? ""
                              : "  if (!ctx->comm) return PCCRT_ERR_COMM;\n")
      << body << "  return PCCRT_OK;\n}\n";
  return result;
}

FailureOr<CppEmitResult> pcc::emitCpp(func::FuncOp func, raw_ostream &os,
                                      const CppEmitOptions &options) {
  return Emitter(func, os, options).run();
}
