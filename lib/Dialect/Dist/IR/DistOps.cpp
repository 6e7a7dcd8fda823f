//===- DistOps.cpp - The Dist dialect: meshes, shardings, collectives -----===//
//
// Verifiers check what the ops need to mean anything: a mesh of uniquely
// named axes of positive size; shardings that use each axis once;
// collectives over existing, distinct axes of their mesh, with result shapes
// that follow from the group size; transfers to peers inside the group;
// pipeline schedules whose actions name stages, microbatches and peers that
// exist, on the ranks that hold them.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Dist/IR/DistOps.h"
#include "pcc/Dialect/Dist/IR/DistNames.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace pcc::dist;

#include "pcc/Dialect/Dist/IR/DistDialect.cpp.inc"
#include "pcc/Dialect/Dist/IR/DistEnums.cpp.inc"

/// A reduction kind as a bare keyword: `sum`, `max`, `min`, `mean`.
static ParseResult parseReductionKeyword(AsmParser &parser,
                                         ReductionKind &kind) {
  std::string word;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeywordOrString(&word))
    return failure();
  std::optional<ReductionKind> k = symbolizeReductionKind(word);
  if (!k)
    return parser.emitError(loc, "unknown reduction '")
           << word << "' (sum, max, min or mean)";
  kind = *k;
  return success();
}

/// A sharding's reduction kind, always printed (`sum` too) so that what
/// prints parses back.
static ParseResult parsePartialKind(AsmParser &parser, ReductionKind &kind) {
  return parseReductionKeyword(parser, kind);
}

static void printPartialKind(AsmPrinter &printer, ReductionKind kind) {
  printer << stringifyReductionKind(kind);
}

#define GET_ATTRDEF_CLASSES
#include "pcc/Dialect/Dist/IR/DistAttrs.cpp.inc"

void DistDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "pcc/Dialect/Dist/IR/DistAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "pcc/Dialect/Dist/IR/DistOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// The dialect's discardable attributes
//===----------------------------------------------------------------------===//

namespace {
/// Where a `dist.*` attribute stands, for its checks and messages.
struct AttrSite {
  enum Kind { Op, Argument, Result } kind;
  Operation *op;
  unsigned index = 0;
  /// The argument's or result's type (null on an op).
  Type type;
};
} // namespace

static LogicalResult verifyDistAttribute(const AttrSite &site,
                                         NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto fail = [&]() -> InFlightDiagnostic {
    InFlightDiagnostic diag = site.op->emitError();
    if (site.kind == AttrSite::Argument)
      diag << "argument " << site.index << ": ";
    else if (site.kind == AttrSite::Result)
      diag << "result " << site.index << ": ";
    diag << name << " ";
    return diag;
  };
  auto integer = [&](int64_t least) -> LogicalResult {
    auto i = dyn_cast<IntegerAttr>(value);
    if (!i || i.getInt() < least)
      return fail() << "must be an integer of at least " << least << ", not "
                    << value;
    return success();
  };
  auto nonNegativeArray = [&](size_t multipleOf) -> LogicalResult {
    if (auto a = dyn_cast<DenseI64ArrayAttr>(value)) {
      if (llvm::any_of(a.asArrayRef(), [](int64_t v) { return v < 0; }))
        return fail() << "holds a negative value";
      return success();
    }
    if (auto a = dyn_cast<DenseF64ArrayAttr>(value)) {
      if (llvm::any_of(a.asArrayRef(), [](double v) { return !(v >= 0); }))
        return fail() << "holds a negative or NaN value";
      if (a.size() % multipleOf != 0)
        return fail() << "must hold " << multipleOf << " values per stage";
      return success();
    }
    return fail() << "must be an array of numbers, not " << value;
  };
  auto rankOf = [&]() -> int64_t {
    auto t = dyn_cast_or_null<RankedTensorType>(site.type);
    return t ? t.getRank() : -1;
  };
  auto checkSharding = [&](Attribute a, int64_t rank) -> LogicalResult {
    auto sharding = dyn_cast<ShardingAttr>(a);
    if (!sharding)
      return fail() << "must be a #dist.sharding, not " << a;
    if (rank >= 0 && int64_t(sharding.getDims().size()) != rank)
      return fail() << "gives " << sharding.getDims().size()
                    << " dimension(s) for a tensor of rank " << rank;
    return success();
  };
  auto layouts = [&](TypeRange types) -> LogicalResult {
    auto array = dyn_cast<ArrayAttr>(value);
    if (!array || array.size() != types.size())
      return fail() << "must be an array of " << types.size()
                    << " #dist.sharding";
    for (auto [a, t] : llvm::zip(array, types)) {
      auto rt = dyn_cast<RankedTensorType>(t);
      if (failed(checkSharding(a, rt ? rt.getRank() : -1)))
        return failure();
    }
    return success();
  };

  if (name == kShardingAttr) {
    int64_t rank = rankOf();
    if (site.kind == AttrSite::Op && site.op->getNumResults() == 1)
      if (auto t = dyn_cast<RankedTensorType>(site.op->getResult(0).getType()))
        rank = t.getRank();
    return checkSharding(value, rank);
  }
  if (name == kOperandsAttr)
    return layouts(site.op->getOperandTypes());
  if (name == kResultsAttr)
    return layouts(site.op->getResultTypes());
  if (name == kPaddingAttr) {
    auto a = dyn_cast<DenseI64ArrayAttr>(value);
    if (!a || a.size() != 2 || a[0] < 0 || a[1] <= 0)
      return fail() << "must be array<i64: dim, extent> with extent > 0";
    return success();
  }
  if (name == kMicrobatchesAttr || name == kNumStagesAttr ||
      name == kPipelinesAttr)
    return integer(1);
  if (name == kStepScheduleAttr) {
    if (!isa<FlatSymbolRefAttr>(value))
      return fail() << "must name a dist.schedule (@name)";
    return success();
  }
  if (name == kBatchDimAttr) {
    if (failed(integer(0)))
      return failure();
    int64_t rank = rankOf();
    if (rank >= 0 && cast<IntegerAttr>(value).getInt() >= rank)
      return fail() << "names dimension " << cast<IntegerAttr>(value).getInt()
                    << " of a tensor of rank " << rank;
    return success();
  }
  if (name == kStageAttr || name == kRankAttr || name == kResultIndexAttr ||
      name == kInputRole || name == kStateRole || name == kValueRole ||
      name == kOutputRole || name == kGradRole || name == kUpdateRole ||
      name == kAccumulatesAttr || name == kInvariantRole ||
      name == kInvariantIdAttr || name == kDeferredRole)
    return integer(0);
  if (name == kStagesAttr) {
    auto a = dyn_cast<DenseI64ArrayAttr>(value);
    if (!a || a.empty())
      return fail() << "must be a non-empty array<i64> of stages";
    return nonNegativeArray(1);
  }
  if (name == kWeightGradAttr || name == kGradSumAttr) {
    if (!isa<UnitAttr>(value))
      return fail() << "must be a unit attribute";
    return success();
  }
  if (name == kStageCostsAttr)
    return nonNegativeArray(3);
  if (name == kDeferredCostsAttr)
    return nonNegativeArray(1);
  if (name == kTransferCostsAttr)
    return nonNegativeArray(2);
  if (name == kStashBytesAttr || name == kTransferBytesAttr ||
      name == kBaseBytesAttr) {
    if (!isa<DenseI64ArrayAttr>(value))
      return fail() << "must be an array<i64> of bytes";
    return nonNegativeArray(1);
  }
  if (name == kHeaviestOpTimeAttr) {
    auto f = dyn_cast<FloatAttr>(value);
    if (!f || !(f.getValueAsDouble() >= 0))
      return fail() << "must be a non-negative float";
    return success();
  }
  if (name == kPhaseAttr) {
    auto phase = dyn_cast<StringAttr>(value);
    if (!phase ||
        !llvm::is_contained({StringRef("forward"), StringRef("backward"),
                             StringRef("weight"), StringRef("optimizer")},
                            phase.getValue()))
      return fail() << "must be \"forward\", \"backward\", \"weight\" or "
                       "\"optimizer\", not "
                    << value;
    return success();
  }
  if (name == kReduceAxesAttr) {
    auto axes = dyn_cast<ArrayAttr>(value);
    if (!axes || axes.empty() || !llvm::all_of(axes, [](Attribute a) {
          return isa<StringAttr>(a) && !cast<StringAttr>(a).empty();
        }))
      return fail() << "must be a non-empty array of mesh axis names";
    return success();
  }
  if (name == kActionAttr) {
    auto action = dyn_cast<StringAttr>(value);
    StringRef text = action ? action.getValue() : StringRef();
    unsigned microbatch = 0;
    // A `+` marks a microbatch of the next step (a schedule without a
    // flush).
    StringRef number = text.drop_front();
    number.consume_back("+");
    bool ok =
        text == "O" || text == "W" ||
        (text.size() > 1 && StringRef("FBW").contains(text[0]) &&
                        !number.getAsInteger(10, microbatch));
    if (!ok)
      return fail() << "must be \"O\", \"W\" or F, B or W and a microbatch "
                       "(with a `+` when of the next step), not "
                    << value;
    return success();
  }
  return fail() << "is no attribute of the Dist dialect";
}

LogicalResult DistDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  return verifyDistAttribute({AttrSite::Op, op}, attr);
}

LogicalResult DistDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  Type type;
  if (op->getNumRegions() > regionIndex &&
      !op->getRegion(regionIndex).empty() &&
      argIndex < op->getRegion(regionIndex).getNumArguments())
    type = op->getRegion(regionIndex).getArgument(argIndex).getType();
  return verifyDistAttribute({AttrSite::Argument, op, argIndex, type}, attr);
}

LogicalResult DistDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  Type type;
  if (auto f = dyn_cast<FunctionOpInterface>(op))
    if (resultIndex < f.getResultTypes().size())
      type = f.getResultTypes()[resultIndex];
  return verifyDistAttribute({AttrSite::Result, op, resultIndex, type}, attr);
}

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

static ParseResult parseReduction(OpAsmParser &parser,
                                  ReductionKindAttr &kind) {
  ReductionKind k;
  if (parseReductionKeyword(parser, k))
    return failure();
  kind = ReductionKindAttr::get(parser.getContext(), k);
  return success();
}

static void printReduction(OpAsmPrinter &printer, Operation *,
                           ReductionKindAttr kind) {
  printer << stringifyReductionKind(kind.getValue());
}

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

/// `tp = 4, pp = 2`: axis names and sizes.
static ParseResult parseMeshAxes(OpAsmParser &parser, ArrayAttr &names,
                                 DenseI64ArrayAttr &shape) {
  SmallVector<Attribute> nameAttrs;
  SmallVector<int64_t> sizes;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size = 0;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    nameAttrs.push_back(parser.getBuilder().getStringAttr(name));
    sizes.push_back(size);
    return success();
  };
  if (parser.parseCommaSeparatedList(parseAxis))
    return failure();
  names = parser.getBuilder().getArrayAttr(nameAttrs);
  shape = parser.getBuilder().getDenseI64ArrayAttr(sizes);
  return success();
}

static void printMeshAxes(OpAsmPrinter &printer, Operation *, ArrayAttr names,
                          DenseI64ArrayAttr shape) {
  llvm::interleaveComma(llvm::zip(names, shape.asArrayRef()), printer,
                        [&](auto axis) {
                          printer.printKeywordOrString(
                              cast<StringAttr>(std::get<0>(axis)).getValue());
                          printer << " = " << std::get<1>(axis);
                        });
}

LogicalResult MeshOp::verify() {
  if (getAxisNames().size() != getShape().size())
    return emitOpError("has ") << getAxisNames().size() << " axis names for "
                               << getShape().size() << " sizes";
  if (getShape().empty())
    return emitOpError("needs at least one axis");
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(getAxisNames(), getShape())) {
    StringRef n = cast<StringAttr>(name).getValue();
    if (n.empty())
      return emitOpError("has an axis without a name");
    if (!seen.insert(n).second)
      return emitOpError("has two axes named '") << n << "'";
    if (size < 1)
      return emitOpError("axis '")
             << n << "' has size " << size << "; sizes are at least 1";
  }
  return success();
}

std::optional<int64_t> MeshOp::getAxisSize(StringRef name) {
  for (auto [n, size] : llvm::zip(getAxisNames(), getShape()))
    if (cast<StringAttr>(n).getValue() == name)
      return size;
  return std::nullopt;
}

int64_t MeshOp::getNumRanks() {
  int64_t n = 1;
  for (int64_t s : getShape())
    n *= s;
  return n;
}

FailureOr<MeshOp> pcc::dist::getOrAddMeshAxis(ModuleOp module, StringRef axis,
                                              int64_t size) {
  auto mesh = module.lookupSymbol<MeshOp>(kMeshName);
  if (mesh && mesh.getAxisSize(axis)) {
    if (*mesh.getAxisSize(axis) != size)
      return mesh.emitError("the mesh's '")
             << axis << "' axis has " << *mesh.getAxisSize(axis)
             << " ranks, not " << size;
    return mesh;
  }
  auto order = [](StringRef name) {
    return size_t(llvm::find(kMeshAxisOrder, name) -
                  std::begin(kMeshAxisOrder));
  };
  SmallVector<StringRef> names;
  SmallVector<int64_t> sizes;
  if (mesh)
    for (auto [name, s] : llvm::zip(mesh.getAxisNames(), mesh.getShape())) {
      names.push_back(cast<StringAttr>(name).getValue());
      sizes.push_back(s);
    }
  size_t at = 0;
  while (at < names.size() && order(names[at]) <= order(axis))
    ++at;
  names.insert(names.begin() + at, axis);
  sizes.insert(sizes.begin() + at, size);
  OpBuilder b(module.getBodyRegion());
  if (mesh)
    b.setInsertionPoint(mesh);
  Location loc = mesh ? mesh.getLoc() : module.getLoc();
  auto created = MeshOp::create(b, loc, kMeshName, b.getStrArrayAttr(names),
                                b.getDenseI64ArrayAttr(sizes));
  if (mesh)
    mesh.erase();
  return created;
}

//===----------------------------------------------------------------------===//
// Sharding
//===----------------------------------------------------------------------===//

static LogicalResult collectAxes(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayAttr axes, StringRef what,
                                 llvm::StringSet<> &seen) {
  for (Attribute a : axes) {
    auto name = dyn_cast<StringAttr>(a);
    if (!name || name.getValue().empty())
      return emitError() << what << " must list axis names";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "axis '" << name.getValue() << "' is used twice";
  }
  return success();
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayAttr dims,
                                   DenseI64ArrayAttr groups,
                                   ArrayAttr partialAxes,
                                   ReductionKind partialKind) {
  llvm::StringSet<> seen;
  for (Attribute dim : dims) {
    auto axes = dyn_cast<ArrayAttr>(dim);
    if (!axes)
      return emitError() << "each dimension's entry must be a list of axes";
    if (failed(collectAxes(emitError, axes, "a dimension's entry", seen)))
      return failure();
  }
  if (groups) {
    if (groups.size() != int64_t(dims.size()))
      return emitError() << "groups has " << groups.size() << " entries for "
                         << dims.size() << " dimensions";
    for (int64_t g : groups.asArrayRef())
      if (g < 1)
        return emitError() << "groups must be at least 1, got " << g;
  }
  if (partialAxes) {
    if (partialAxes.empty())
      return emitError() << "partial needs at least one axis";
    if (failed(collectAxes(emitError, partialAxes, "partial", seen)))
      return failure();
  }
  return success();
}

SmallVector<StringRef> ShardingAttr::getDimAxes(unsigned dim) const {
  SmallVector<StringRef> out;
  for (Attribute a : cast<ArrayAttr>(getDims()[dim]))
    out.push_back(cast<StringAttr>(a).getValue());
  return out;
}

int64_t ShardingAttr::getDimGroups(unsigned dim) const {
  return getGroups() ? getGroups()[dim] : 1;
}

bool ShardingAttr::isReplicated() const {
  return !getPartialAxes() && llvm::all_of(getDims(), [](Attribute d) {
    return cast<ArrayAttr>(d).empty();
  });
}

//===----------------------------------------------------------------------===//
// Collectives and transfers
//===----------------------------------------------------------------------===//

/// The mesh of a collective and the size of its group along `axes`.
static FailureOr<int64_t> groupOf(Operation *op, FlatSymbolRefAttr meshRef,
                                  ArrayAttr axes,
                                  SymbolTableCollection *symbols) {
  Operation *found =
      symbols ? symbols->lookupNearestSymbolFrom(op, meshRef.getAttr())
              : SymbolTable::lookupNearestSymbolFrom(op, meshRef.getAttr());
  auto mesh = dyn_cast_or_null<MeshOp>(found);
  if (!mesh)
    return op->emitOpError("mesh ") << meshRef << " is not a dist.mesh",
           failure();
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis"), failure();
  llvm::StringSet<> seen;
  int64_t group = 1;
  for (Attribute a : axes) {
    StringRef name = cast<StringAttr>(a).getValue();
    std::optional<int64_t> size = mesh.getAxisSize(name);
    if (!size)
      return op->emitOpError("axis '")
                 << name << "' is not an axis of mesh " << meshRef,
             failure();
    if (!seen.insert(name).second)
      return op->emitOpError("axis '") << name << "' is listed twice",
             failure();
    group *= *size;
  }
  return group;
}

template <typename OpT> static int64_t groupSizeOf(OpT op) {
  FailureOr<int64_t> g =
      groupOf(op, op.getMeshAttr(), op.getAxes(), /*symbols=*/nullptr);
  return succeeded(g) ? *g : 0;
}

static LogicalResult checkDim(Operation *op, int64_t dim, int64_t rank,
                              StringRef what) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError(what)
           << " " << dim << " out of range for rank " << rank;
  return success();
}

/// Result shape = input shape with `dim` scaled by `mul / div`.
static LogicalResult
checkScaled(Operation *op, ShapedType in, ShapedType out,
            ArrayRef<std::tuple<int64_t, int64_t, int64_t>> scaled) {
  if (in.getRank() != out.getRank() ||
      in.getElementType() != out.getElementType())
    return op->emitOpError("result ")
           << out << " must have the input's rank and element type";
  SmallVector<int64_t> expected(in.getShape());
  for (auto [dim, mul, div] : scaled) {
    if (expected[dim] * mul % div)
      return op->emitOpError("dimension ")
             << dim << " of extent " << in.getDimSize(dim)
             << " does not divide by the group size " << div;
    expected[dim] = expected[dim] * mul / div;
  }
  if (ArrayRef<int64_t>(expected) != out.getShape()) {
    std::string s;
    llvm::raw_string_ostream os(s);
    llvm::interleave(expected, os, "x");
    return op->emitOpError("result ") << out << " should have the shape " << s;
  }
  return success();
}

#define PCC_GROUP_SIZE(Op)                                                     \
  int64_t Op::getGroupSize() { return groupSizeOf(*this); }
PCC_GROUP_SIZE(AllReduceOp)
PCC_GROUP_SIZE(AllGatherOp)
PCC_GROUP_SIZE(ReduceScatterOp)
PCC_GROUP_SIZE(AllToAllOp)
PCC_GROUP_SIZE(AllSliceOp)
PCC_GROUP_SIZE(AxisIndexOp)
PCC_GROUP_SIZE(SendOp)
PCC_GROUP_SIZE(RecvOp)
#undef PCC_GROUP_SIZE

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return groupOf(*this, getMeshAttr(), getAxes(), &symbols);
}

/// all_gather and reduce_scatter: along `dim`, the result is the input
/// times (gather) or divided by (scatter) the group size.
template <typename OpT>
static LogicalResult verifyAlongDim(OpT op, SymbolTableCollection &symbols,
                                    bool gather) {
  FailureOr<int64_t> group =
      groupOf(op, op.getMeshAttr(), op.getAxes(), &symbols);
  if (failed(group))
    return failure();
  auto in = cast<ShapedType>(op.getInput().getType());
  int64_t dim = op.getDimAttr().getInt();
  if (failed(checkDim(op, dim, in.getRank(), "dim")))
    return failure();
  return checkScaled(op, in, cast<ShapedType>(op.getType()),
                     {{dim, gather ? *group : 1, gather ? 1 : *group}});
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyAlongDim(*this, symbols, /*gather=*/true);
}

LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyAlongDim(*this, symbols, /*gather=*/false);
}

LogicalResult AllSliceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> group = groupOf(*this, getMeshAttr(), getAxes(), &symbols);
  if (failed(group))
    return failure();
  auto in = cast<ShapedType>(getInput().getType());
  int64_t dim = getDimAttr().getInt(), groups = getGroupsAttr().getInt();
  if (failed(checkDim(*this, dim, in.getRank(), "dim")))
    return failure();
  if (groups < 1 || in.getDimSize(dim) % (groups * *group))
    return emitOpError("dimension ")
           << dim << " of extent " << in.getDimSize(dim) << " does not split "
           << "into " << groups << " group(s) of " << *group << " blocks";
  return checkScaled(*this, in, cast<ShapedType>(getType()),
                     {{dim, 1, *group}});
}

LogicalResult AxisIndexOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return groupOf(*this, getMeshAttr(), getAxes(), &symbols);
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> group = groupOf(*this, getMeshAttr(), getAxes(), &symbols);
  if (failed(group))
    return failure();
  auto in = cast<ShapedType>(getInput().getType());
  if (failed(checkDim(*this, getSplitDimAttr().getInt(), in.getRank(),
                      "split dim")) ||
      failed(checkDim(*this, getConcatDimAttr().getInt(), in.getRank(),
                      "concat dim")))
    return failure();
  if (getSplitDim() == getConcatDim())
    return checkScaled(*this, in, cast<ShapedType>(getType()), {});
  return checkScaled(*this, in, cast<ShapedType>(getType()),
                     {{getSplitDim(), 1, *group}, {getConcatDim(), *group, 1}});
}

template <typename OpT>
static LogicalResult verifyTransfer(OpT op, SymbolTableCollection &symbols) {
  FailureOr<int64_t> group =
      groupOf(op, op.getMeshAttr(), op.getAxes(), &symbols);
  if (failed(group))
    return failure();
  // I64Attr getters are unsigned: read the signed values.
  int64_t peer = op.getPeerAttr().getInt(), tag = op.getTagAttr().getInt();
  if (peer < 0 || peer >= *group)
    return op.emitOpError("peer ")
           << peer << " is outside the group of " << *group << " ranks";
  if (tag < 0)
    return op.emitOpError("tag ") << tag << " is negative";
  return success();
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyTransfer(*this, symbols);
}

LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyTransfer(*this, symbols);
}

LogicalResult WaitSendOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyTransfer(*this, symbols);
}

//===----------------------------------------------------------------------===//
// Pipeline schedules
//===----------------------------------------------------------------------===//

SmallVector<RankOp> ScheduleOp::getRankOps() {
  return llvm::to_vector(getBody().front().getOps<RankOp>());
}

ScheduleOp RankOp::getSchedule() {
  return cast<ScheduleOp>((*this)->getParentOp());
}

ParseResult ScheduleOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes) ||
      parser.parseOptionalAttrDict(result.attributes))
    return failure();
  Region *body = result.addRegion();
  if (parser.parseRegion(*body))
    return failure();
  if (body->empty())
    body->emplaceBlock();
  return success();
}

void ScheduleOp::print(OpAsmPrinter &printer) {
  printer << ' ';
  printer.printSymbolName(getSymName());
  printer.printOptionalAttrDict((*this)->getAttrs(), {getSymNameAttrName()});
  printer << ' ';
  printer.printRegion(getBody(), /*printEntryBlockArgs=*/false);
}

LogicalResult ScheduleOp::verify() {
  int64_t ranks = getNumRanks(), stages = getNumStages();
  int64_t expected = 0;
  for (Operation &op : getBody().front()) {
    auto rank = dyn_cast<RankOp>(op);
    if (!rank)
      return op.emitOpError("cannot be in a dist.schedule, which holds "
                            "dist.rank ops only");
    if (rank.getIndex() != expected)
      return rank.emitOpError("is rank ")
             << rank.getIndex() << " where rank " << expected
             << " belongs: ranks appear once each, in order";
    ++expected;
  }
  if (expected != ranks)
    return emitOpError("has ")
           << expected << " dist.rank ops for " << ranks << " ranks";
  // Two pipelines over the same ranks: one stage per rank each, and a
  // microbatch in each.
  if (getNumPipelines() > 2)
    return emitOpError("has ")
           << getNumPipelines() << " pipelines; at most 2 (one each way)";
  if (getNumPipelines() == 2 &&
      (stages != ranks || getNumSteps() != 1 || getNumMicrobatches() % 2))
    return emitOpError("has 2 pipelines, which need one stage per rank, one "
                       "step and an even number of microbatches");
  // A table of two steps is cut into a run's calls by the ranks' leads.
  if (getNumSteps() > 2)
    return emitOpError("covers ")
           << getNumSteps()
           << " steps; a table without a flush covers 2 (a step and the next)";
  if (getNumSteps() == 2 && stages != ranks)
    return emitOpError("covers 2 steps with ")
           << stages << " virtual stages on " << ranks
           << " ranks; a table without a flush has one stage per rank";
  for (RankOp rank : getRankOps()) {
    if (!rank.getLead())
      continue;
    if (getNumSteps() == 1)
      return rank.emitOpError("has a lead, which only a table of 2 steps "
                              "(steps = 2) has");
    if (rank.getNumLead() > getNumMicrobatches())
      return rank.emitOpError("leads by ")
             << rank.getNumLead() << " forwards, more than a step's "
             << getNumMicrobatches() << " microbatches";
  }
  auto checkTimes = [&](std::optional<ArrayRef<double>> times, StringRef name,
                        int64_t perStage, StringRef what) -> LogicalResult {
    if (!times)
      return success();
    if (int64_t(times->size()) != perStage * stages)
      return emitOpError(name)
             << " has " << times->size() << " values; expected " << what
             << " for each of the " << stages << " virtual stages ("
             << perStage * stages << ")";
    for (double c : *times)
      if (!(c >= 0) || !std::isfinite(c))
        return emitOpError(name)
               << " must be finite and non-negative; got " << c;
    return success();
  };
  if (failed(checkTimes(getCosts(), "costs", 3, "F, B and W times")) ||
      failed(checkTimes(getTransferCosts(), "transfer_costs", 2,
                        "the activations' and the input gradient's transfer "
                        "times")) ||
      failed(checkTimes(getDeferredCosts(), "deferred_costs", 1,
                        "the time of its deferred products")))
    return failure();
  auto checkBytes = [&](std::optional<ArrayRef<int64_t>> bytes, StringRef name,
                        int64_t count, StringRef per) -> LogicalResult {
    if (!bytes)
      return success();
    if (int64_t(bytes->size()) != count)
      return emitOpError(name)
             << " has " << bytes->size() << " values; expected one per " << per
             << " (" << count << ")";
    for (int64_t b : *bytes)
      if (b < 0)
        return emitOpError(name) << " must be non-negative; got " << b;
    return success();
  };
  return failure(
      failed(checkBytes(getStashBytes(), "stash_bytes", stages,
                        "virtual stage")) ||
      failed(checkBytes(getBaseBytes(), "base_bytes", ranks, "rank")));
}

LogicalResult RankOp::verify() {
  for (Operation &op : getBody().front())
    if (!isa<ComputeOp, TransferOp>(op))
      return op.emitOpError("cannot be in a dist.rank, which holds "
                            "dist.compute and dist.transfer ops only");
  return success();
}

/// The stage and microbatch of a schedule action are within the schedule.
static LogicalResult checkScheduleRanges(Operation *op, ScheduleOp schedule,
                                         int64_t stage, int64_t microbatch) {
  if (stage >= schedule.getNumStages())
    return op->emitOpError("stage ")
           << stage << " is outside the schedule's " << schedule.getNumStages()
           << " virtual stages";
  if (microbatch >= schedule.getNumTableMicrobatches())
    return op->emitOpError("microbatch ")
           << microbatch << " is outside the schedule's "
           << schedule.getNumTableMicrobatches() << " microbatches";
  return success();
}

/// Virtual stage `stage` of microbatch `microbatch` runs on rank `rank`.
static LogicalResult checkStageOnRank(Operation *op, ScheduleOp schedule,
                                      int64_t stage, int64_t microbatch,
                                      int64_t rank) {
  int64_t holder = schedule.getRankOf(stage, microbatch);
  if (holder != rank) {
    InFlightDiagnostic diag = op->emitOpError("stage ")
                              << stage << " is on rank " << holder;
    if (schedule.getNumPipelines() > 1)
      diag << " for microbatch " << microbatch;
    diag << ", not on rank " << rank;
    return diag;
  }
  return success();
}

LogicalResult ComputeOp::verify() {
  auto rank = cast<RankOp>((*this)->getParentOp());
  ScheduleOp schedule = rank.getSchedule();
  if (failed(checkScheduleRanges(*this, schedule, getStageIndex(),
                                 getMicrobatchIndex())))
    return failure();
  return checkStageOnRank(*this, schedule, getStageIndex(),
                          getMicrobatchIndex(), rank.getIndex());
}

LogicalResult TransferOp::verify() {
  auto rank = cast<RankOp>((*this)->getParentOp());
  ScheduleOp schedule = rank.getSchedule();
  int64_t stage = getStageIndex(), peer = getPeerRank();
  if (failed(checkScheduleRanges(*this, schedule, stage, getMicrobatchIndex())))
    return failure();
  if (peer >= schedule.getNumRanks())
    return emitOpError("peer ") << peer << " is outside the schedule's "
                                << schedule.getNumRanks() << " ranks";
  bool act = getPayload() == Payload::Act;
  if (act && stage == schedule.getNumStages() - 1)
    return emitOpError("stage ")
           << stage << " is the last: its activation goes to no stage";
  if (!act && stage == 0)
    return emitOpError("stage 0 is the first: its input gradient goes to no "
                       "stage");
  // An activation flows from `stage` to `stage + 1`, a gradient from `stage`
  // to `stage - 1`; the sender holds `stage`, the receiver the other one.
  int64_t other = act ? stage + 1 : stage - 1;
  int64_t local = holdsStage() ? stage : other,
          remote = holdsStage() ? other : stage;
  int64_t k = getMicrobatchIndex();
  if (failed(checkStageOnRank(*this, schedule, local, k, rank.getIndex())))
    return failure();
  int64_t holder = schedule.getRankOf(remote, k);
  if (holder == rank.getIndex())
    return emitOpError("stages ")
           << std::min(stage, other) << " and " << std::max(stage, other)
           << " are both on rank " << rank.getIndex()
           << " and need no transfer";
  if (peer != holder)
    return emitOpError("peer ") << peer << " does not hold stage " << remote
                                << " (rank " << holder << " does)";
  return success();
}

SendOp WaitSendOp::getSend() {
  for (Operation *op = (*this)->getPrevNode(); op; op = op->getPrevNode()) {
    auto send = dyn_cast<SendOp>(op);
    if (send && send.getInput() == getInput() && send.getPeer() == getPeer() &&
        send.getTag() == getTag() && send.getAxes() == getAxes())
      return send;
  }
  return nullptr;
}

LogicalResult WaitSendOp::verify() {
  SendOp send = getSend();
  if (!send)
    return emitOpError("completes no send: no dist.send of its tensor to ")
           << getPeer() << " with tag " << getTag()
           << " comes before it in its block";
  for (Operation *op = (*this)->getPrevNode(); op != send;
       op = op->getPrevNode()) {
    auto wait = dyn_cast<WaitSendOp>(op);
    if (wait && wait.getInput() == getInput() && wait.getPeer() == getPeer() &&
        wait.getTag() == getTag() && wait.getAxes() == getAxes())
      return emitOpError("completes a send that an earlier dist.wait_send "
                         "completed");
  }
  return success();
}

#define GET_OP_CLASSES
#include "pcc/Dialect/Dist/IR/DistOps.cpp.inc"

bool pcc::dist::isStartedCollective(Operation *op) {
  return isa<AllReduceOp, AllGatherOp, ReduceScatterOp>(op);
}

bool pcc::dist::completesAtWait(Operation *op) {
  return isStartedCollective(op) && !op->getResult(0).use_empty() &&
         llvm::all_of(op->getResult(0).getUsers(),
                      [](Operation *user) { return isa<WaitOp>(user); });
}

LogicalResult WaitOp::verify() {
  Operation *def = getInput().getDefiningOp();
  if (!def || !isStartedCollective(def))
    return emitOpError("waits for a value that no started collective "
                       "(all_reduce, all_gather, reduce_scatter) makes");
  if (def->getBlock() != (*this)->getBlock())
    return emitOpError("waits for a collective of another block");
  return success();
}

Value WaitOp::getViewSource() { return getInput(); }

bool pcc::dist::keepsCommunicationOrder(Operation *op) {
  // Completing a collective is this rank's affair: waits may come in any
  // order.
  if (isa<WaitOp>(op))
    return false;
  return (isa<DistDialect>(op->getDialect()) && !isMemoryEffectFree(op)) ||
         isa<CallOpInterface>(op);
}
