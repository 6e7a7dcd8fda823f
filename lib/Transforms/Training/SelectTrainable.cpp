//===- SelectTrainable.cpp - Which initializers a training step updates ---===//
//
// Exporters store a model's parameters and the constants they folded
// (attention masks, rotary tables, scalars) alike, as float initializers.
// Training the constants changes the model after the first step, so the
// trainable set is decided here, once, and recorded on each graph.weight:
// the exporter's record where there is one, else the structural rule of
// docs/design.md ("The trainable set"), then the user's overrides.
//
//===----------------------------------------------------------------------===//

#include "pcc/Transforms/Passes.h"

#include "pcc/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Regex.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace pcc;
using namespace pcc::graph;

namespace pcc {
#define GEN_PASS_DEF_SELECTTRAINABLE
#include "pcc/Transforms/Passes.h.inc"
} // namespace pcc

static bool isFloat(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

static OperandRole roleOf(OpOperand &use) {
  auto diff = dyn_cast<DifferentiableOpInterface>(use.getOwner());
  return diff ? diff.getOperandRole(use.getOperandNumber())
              : OperandRole::Other;
}

/// True when `v`, broadcast against `result`, varies only along the
/// result's last dimension: a per-feature vector (a bias, a norm's scale).
static bool isPerFeature(Value v, Value result) {
  ArrayRef<int64_t> vs = cast<ShapedType>(v.getType()).getShape();
  ArrayRef<int64_t> rs = cast<ShapedType>(result.getType()).getShape();
  if (vs.empty() || rs.empty() || vs.size() > rs.size() || vs.back() <= 1 ||
      vs.back() != rs.back())
    return false;
  return llvm::all_of(vs.drop_back(), [](int64_t d) { return d == 1; });
}

/// True when `v` flows into a softmax through element-wise and movement ops
/// only: an additive attention mask or bias (causal mask, ALiBi).
static bool reachesSoftmax(Value v, int depth = 0) {
  if (depth > 8)
    return false;
  for (OpOperand &use : v.getUses()) {
    switch (roleOf(use)) {
    case OperandRole::SoftmaxInput:
      return true;
    case OperandRole::Additive:
    case OperandRole::Multiplicative:
    case OperandRole::Elementwise:
    case OperandRole::Select:
    case OperandRole::Movement:
      for (Value r : use.getOwner()->getResults())
        if (isFloat(r) && reachesSoftmax(r, depth + 1))
          return true;
      break;
    default:
      break;
    }
  }
  return false;
}

/// The first `rows` rows of `value`, a table [rows, columns] after leading
/// 1s, as doubles; empty where it is no such table or is not read here.
static SmallVector<double> getTableRows(ElementsAttr value, int64_t &rows,
                                        int64_t &columns) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || type.getRank() < 2 ||
      llvm::any_of(type.getShape().drop_back(2),
                   [](int64_t d) { return d != 1; }))
    return {};
  int64_t all = type.getShape()[type.getRank() - 2];
  columns = type.getShape().back();
  rows = std::min<int64_t>(all, 64);
  SmallVector<double> out;
  if (type.getElementType().isF32()) {
    std::optional<ArrayRef<char>> bytes = graph::getStoredBytes(value);
    if (!bytes || int64_t(bytes->size()) != all * columns * 4)
      return {};
    out.resize(size_t(rows * columns));
    for (int64_t i = 0; i < rows * columns; ++i) {
      float x;
      std::memcpy(&x, bytes->data() + i * 4, 4);
      out[i] = x;
    }
    return out;
  }
  // Other float types, where the table is small enough to copy.
  if (all * columns > (int64_t(1) << 20))
    return {};
  DenseElementsAttr dense = graph::getDenseValue(value);
  if (!dense || dense.isSplat())
    return {};
  for (APFloat x : dense.getValues<APFloat>()) {
    if (int64_t(out.size()) == rows * columns)
      break;
    out.push_back(x.convertToDouble());
  }
  return out;
}

/// True when `value` is a fixed sinusoidal position table (the original
/// Transformer's, CTRL's, an exporter's folded slice of one): each column
/// a unit sine or cosine of the position, sin(p w) or cos(p w), so that row
/// 0 holds only 0s and 1s, and at least one column swings. A sinusoid
/// x(p) = sin(p w + phi) satisfies x(p+1) + x(p-1) = 2 cos(w) x(p): each
/// column is checked against that recurrence, cos(w) fitted by least
/// squares over its first 64 rows. A learned table (random at
/// initialization, trained later) fails it.
static bool isSinusoidTable(ElementsAttr value) {
  int64_t rows = 0, columns = 0;
  SmallVector<double> x = getTableRows(value, rows, columns);
  if (x.empty() || rows < 4 || columns < 2)
    return false;
  auto at = [&](int64_t p, int64_t j) { return x[size_t(p * columns + j)]; };
  bool zero = false, one = false, swings = false;
  for (int64_t j = 0; j < columns; ++j) {
    double x0 = at(0, j);
    if (std::abs(x0) > 1e-6 && std::abs(x0 - 1) > 1e-6)
      return false;
    (x0 < 0.5 ? zero : one) = true;
    double num = 0, den = 0, peak = 0;
    for (int64_t p = 1; p + 1 < rows; ++p) {
      num += (at(p + 1, j) + at(p - 1, j)) * at(p, j);
      den += 2 * at(p, j) * at(p, j);
    }
    double c = den > 0 ? num / den : 1;
    if (std::abs(c) > 1 + 1e-6)
      return false;
    for (int64_t p = 0; p < rows; ++p) {
      if (std::abs(at(p, j)) > 1 + 1e-5)
        return false;
      peak = std::max(peak, std::abs(at(p, j) - x0));
      if (p > 0 && p + 1 < rows &&
          std::abs(at(p + 1, j) + at(p - 1, j) - 2 * c * at(p, j)) > 1e-4)
        return false;
    }
    swings |= peak > 0.5;
  }
  return zero && one && swings;
}

namespace {
/// The structural rule's verdict on one initializer.
struct Verdict {
  bool parameter = false;
  std::string reason;
  /// Uses as a per-feature scale or bias (several: merged parameters).
  int vectorUses = 0;
};

/// Follows an initializer through the ops that combine it only with other
/// constants until it meets the model's activations, and judges it by the
/// role it plays there.
class StructuralRule {
public:
  explicit StructuralRule(func::FuncOp func) {
    for (BlockArgument a : func.getArguments())
      dynamic.insert(a);
    func.walk([&](Operation *op) {
      if (llvm::any_of(op->getOperands(),
                       [&](Value v) { return dynamic.contains(v); }))
        dynamic.insert(op->result_begin(), op->result_end());
    });
  }

  Verdict judge(WeightOp w) {
    Verdict verdict;
    std::string constantReason;
    auto parameter = [&](StringRef why) {
      if (!verdict.parameter)
        verdict.reason = why.str();
      verdict.parameter = true;
    };
    auto constant = [&](StringRef why) {
      if (constantReason.empty())
        constantReason = why.str();
    };
    llvm::SetVector<Value> worklist;
    worklist.insert(w.getResult());
    for (size_t i = 0; i < worklist.size(); ++i) {
      Value v = worklist[i];
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        auto follow = [&]() {
          for (Value r : user->getResults())
            if (isFloat(r))
              worklist.insert(r);
        };
        bool meetsActivations = llvm::any_of(
            user->getOperands(), [&](Value o) { return dynamic.contains(o); });
        if (!meetsActivations && !dynamic.contains(v)) {
          follow();
          continue;
        }
        Value result = user->getNumResults() ? user->getResult(0) : Value();
        bool scalar = cast<ShapedType>(v.getType()).getNumElements() == 1;
        bool vector = result && isPerFeature(v, result);
        switch (roleOf(use)) {
        case OperandRole::Contraction:
          vector ? parameter("the bias of a matrix product")
                 : parameter("an operand of a matrix product");
          verdict.vectorUses += vector;
          break;
        case OperandRole::Lookup:
          parameter("a table looked up by the model's inputs");
          break;
        case OperandRole::Affine:
          parameter("the scale or bias of a normalization");
          ++verdict.vectorUses;
          break;
        case OperandRole::Additive:
          if (scalar)
            constant("a scalar");
          else if (vector)
            parameter("a per-feature bias"), ++verdict.vectorUses;
          else if (reachesSoftmax(result))
            constant("an additive attention mask or bias");
          else if (isSinusoidTable(w.getValue()))
            constant("a fixed sinusoidal position table");
          else
            parameter("an additive table (a position embedding)");
          break;
        case OperandRole::Multiplicative:
          if (scalar)
            constant("a scalar");
          else if (vector)
            parameter("a per-feature scale"), ++verdict.vectorUses;
          else
            constant("a table that scales activations (rotary cos/sin)");
          break;
        case OperandRole::Select:
          constant("a value selected by a condition (a mask's fill)");
          break;
        case OperandRole::Movement:
          follow();
          break;
        default:
          constant(("combined with activations by '" +
                    user->getName().getStringRef() + "' in no parameter role")
                       .str());
          break;
        }
      }
    }
    if (!verdict.parameter)
      verdict.reason = constantReason.empty()
                           ? "never combined with the model's inputs"
                           : constantReason;
    return verdict;
  }

private:
  llvm::DenseSet<Value> dynamic;
};
} // namespace

static std::string listNames(ArrayRef<std::string> names) {
  std::string out;
  for (auto [i, n] : llvm::enumerate(names)) {
    if (i == 4) {
      out += ", ... (" + std::to_string(names.size()) + " in all)";
      break;
    }
    out += (i ? ", '" : "'") + n + "'";
  }
  return out;
}

static constexpr char kTrainingExport[] =
    "export the model for training with torch.onnx.export(model, args, "
    "dynamo=True, optimize=False)";

FailureOr<SmallVector<TrainableDecision>>
pcc::selectTrainable(func::FuncOp func, StringRef trainableRegex,
                     StringRef freezeRegex) {
  llvm::Regex trainable(trainableRegex), freeze(freezeRegex);
  std::string error;
  if (!trainableRegex.empty() && !trainable.isValid(error))
    return func.emitError("--trainable: invalid regular expression: ") << error;
  if (!freezeRegex.empty() && !freeze.isValid(error))
    return func.emitError("--freeze: invalid regular expression: ") << error;

  StructuralRule rule(func);
  SmallVector<TrainableDecision> decisions;
  SmallVector<std::string> unrecorded, merged;
  bool annotated = false, freezeMatched = false, trainableMatched = false;
  func.walk([&](WeightOp w) { annotated |= w.getExportedAs().has_value(); });
  func.walk([&](WeightOp w) {
    if (!isFloat(w.getResult()))
      return;
    TrainableDecision d;
    d.name = w.getName().str();
    Verdict v = rule.judge(w);
    if (std::optional<StringRef> kind = w.getExportedAs()) {
      d.exportedAs = kind->str();
      d.trainable = *kind == "parameter";
      d.reason = ("exported as a " + *kind).str();
    } else {
      d.trainable = v.parameter;
      d.reason = v.reason;
      if (annotated && v.parameter)
        unrecorded.push_back(d.name);
    }
    if (d.trainable && v.vectorUses > 1)
      merged.push_back(d.name);
    bool frozen = !freezeRegex.empty() && freeze.match(d.name);
    bool chosen = !trainableRegex.empty() && trainable.match(d.name);
    freezeMatched |= frozen;
    trainableMatched |= chosen;
    if (frozen) {
      d.trainable = false;
      d.reason = "matches --freeze";
    } else if (chosen) {
      d.trainable = true;
      d.reason = "matches --trainable";
    }
    if (d.trainable)
      w.setTrainable(true);
    else
      w.removeTrainableAttr();
    decisions.push_back(std::move(d));
  });
  // A pattern that names no initializer is a typo, not a choice.
  if (!freezeRegex.empty() && !freezeMatched)
    func.emitWarning() << "--freeze '" << freezeRegex
                       << "' matches no float initializer's name";
  if (!trainableRegex.empty() && !trainableMatched)
    func.emitWarning() << "--trainable '" << trainableRegex
                       << "' matches no float initializer's name";
  if (!unrecorded.empty())
    func.emitWarning() << "the export lost its parameter records: "
                       << unrecorded.size()
                       << " float initializer(s) without one ("
                       << listNames(unrecorded)
                       << ") are trained by pcc's structural rule; "
                       << kTrainingExport;
  if (!merged.empty())
    func.emitWarning()
        << "initializer(s) " << listNames(merged)
        << " serve as the scale or bias of several layers: the exporter "
           "merged equal parameters (a freshly initialized model) and "
           "training updates them as one; "
        << kTrainingExport << "; or untie them with --untie REGEX";
  return decisions;
}

namespace {
struct SelectTrainablePass
    : pcc::impl::SelectTrainableBase<SelectTrainablePass> {
  using SelectTrainableBase::SelectTrainableBase;
  SelectTrainablePass(const pcc::SelectTrainableOptions &options,
                      pcc::TrainableDecisionSink sink)
      : SelectTrainableBase(options), sink(std::move(sink)) {}

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto decisions = pcc::selectTrainable(func, trainable, freeze);
    if (failed(decisions))
      return signalPassFailure();
    if (sink)
      sink(*decisions);
    if (!remarks)
      return;
    // One remark per initializer, at the initializer: how `pcc compile`
    // reports the decisions, and how lit tests pin them.
    llvm::StringMap<const TrainableDecision *> byName;
    for (const TrainableDecision &d : *decisions)
      byName[d.name] = &d;
    func.walk([&](WeightOp w) {
      if (const TrainableDecision *d = byName.lookup(w.getName()))
        emitRemark(w.getLoc())
            << (d->trainable ? "trainable: " : "constant: ") << d->reason;
    });
  }

  pcc::TrainableDecisionSink sink;
};
} // namespace

std::unique_ptr<Pass>
pcc::createSelectTrainable(const SelectTrainableOptions &options,
                           TrainableDecisionSink sink) {
  return std::make_unique<SelectTrainablePass>(options, std::move(sink));
}
