//===- VjpFiniteDifferenceTest.cpp - VJPs against finite differences ------===//
//
// For every differentiable op family: a function of random float64 weights,
// loss = sum(op(weights) * R) with a random projection R, goes through
// pcc-autodiff, the CPU target and libpccrt; each gradient element must
// equal the central difference (loss(w + h) - loss(w - h)) / 2h, evaluated
// with the same compiled library and perturbed weights files.
//
//===----------------------------------------------------------------------===//

#include "pcc/Dialect/Graph/IR/GraphOps.h"
#include "pcc/Driver/Driver.h"
#include "pcc/InitAll.h"
#include "pcc/Target/Cpu/CppEmitter.h"
#include "pcc/Target/WeightTensors.h"
#include "pcc/Transforms/Passes.h"

#include "pccrt/Runtime.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace mlir;

namespace {

struct Weight {
  std::string shape; ///< MLIR shape, e.g. "2x3"
  double lo = -1, hi = 1;
  /// Values are kept at least this far from zero (abs, relu, reciprocal).
  double avoidZero = 0;
};

struct Case {
  const char *name;
  std::vector<Weight> weights;
  /// Uses %w0, %w1, ... and defines %y of type `yType`.
  const char *body;
  const char *yType;
};

int64_t numElements(const std::string &shape) {
  int64_t n = 1;
  for (llvm::StringRef d : llvm::split(shape, 'x'))
    if (!d.empty())
      n *= std::stoll(d.str());
  return n;
}

/// Random values as a hex dense literal, which MLIR accepts for any shape.
std::string dense(std::mt19937 &rng, int64_t n, const Weight &w) {
  std::uniform_real_distribution<double> dist(w.lo, w.hi);
  std::string s = "dense<\"0x";
  for (int64_t i = 0; i < n; ++i) {
    double v = dist(rng);
    if (std::fabs(v) < w.avoidZero)
      v = v < 0 ? v - w.avoidZero : v + w.avoidZero;
    uint8_t bytes[8];
    std::memcpy(bytes, &v, 8);
    for (uint8_t b : bytes) {
      char hex[3];
      std::snprintf(hex, sizeof(hex), "%02X", b);
      s += hex;
    }
  }
  return s + "\">";
}

std::string tensorType(const std::string &shape) {
  return "tensor<" + (shape.empty() ? "" : shape + "x") + "f64>";
}

class VjpTest : public ::testing::TestWithParam<Case> {};

TEST_P(VjpTest, MatchesCentralDifferences) {
  const Case &c = GetParam();
  std::mt19937 rng(std::hash<std::string>{}(c.name) & 0xffff);

  // The function: weights, the op, a random projection, the sum.
  std::string yShape =
      llvm::StringRef(c.yType).drop_front(7).drop_back(5).str();
  if (llvm::StringRef(yShape).ends_with("x"))
    yShape.pop_back();
  int64_t yRank = yShape.empty() ? 0 : llvm::count(yShape, 'x') + 1;
  std::string src = "func.func @main() -> (tensor<f64> {graph.loss, onnx.name "
                    "= \"loss\"}) {\n";
  for (size_t i = 0; i < c.weights.size(); ++i)
    src += llvm::formatv(
        "  %w{0} = graph.weight \"w{0}\" trainable {1} : {2}\n", i,
        dense(rng, numElements(c.weights[i].shape), c.weights[i]),
        tensorType(c.weights[i].shape));
  src += c.body;
  std::string axes;
  for (int64_t i = 0; i < yRank; ++i)
    axes += (i ? ", " : "") + std::to_string(i);
  src += llvm::formatv(
      "  %r = graph.constant {0} : {1}\n"
      "  %p = graph.mul %y, %r : ({1}, {1}) -> {1}\n"
      "  %l = graph.reduce_sum %p {{axes = array<i64{2}{3}>, keepdims = false} "
      ": ({1}) -> tensor<f64>\n"
      "  return %l : tensor<f64>\n}\n",
      dense(rng, numElements(yShape), Weight{yShape}), c.yType,
      axes.empty() ? "" : ": ", axes);

  DialectRegistry registry;
  pcc::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(src, &context);
  ASSERT_TRUE(module) << src;
  auto func = cast<func::FuncOp>(module->getBody()->front());
  ASSERT_TRUE(succeeded(pcc::differentiate(func))) << src;
  PassManager pm(&context);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  ASSERT_TRUE(succeeded(pm.run(*module)));

  // Build the library once.
  SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("pcc-vjp", dir));
  std::string source = (dir + "/model.cpp").str();
  FailureOr<pcc::CppEmitResult> emitted;
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(source, ec);
    ASSERT_FALSE(ec);
    emitted = pcc::emitCpp(func, os);
    ASSERT_TRUE(succeeded(emitted));
  }
  std::string error;
  ASSERT_TRUE(succeeded(pcc::writeRuntimeSources(dir, error))) << error;
  std::string lib = (dir + "/libmodel.so").str();
  ASSERT_TRUE(succeeded(
      pcc::buildSharedLibrary(source, lib, (dir + "/build.log").str(), error)))
      << error;

  // Copies the test perturbs.
  std::deque<std::vector<uint8_t>> storage;
  std::vector<pccrt::Tensor> weights;
  for (const pccrt::TensorRef &r : pcc::getWeightTensors(*emitted, storage))
    weights.push_back({r.name, r.dtype, r.shape,
                       std::vector<uint8_t>(r.data, r.data + r.size)});
  std::string weightsFile = (dir + "/weights.safetensors").str();
  auto evaluate = [&]() {
    pccrt::writeSafetensors(weightsFile, weights);
    auto model = pccrt::Model::load(lib, weightsFile);
    return model->run({});
  };
  auto scalarOf = [](const pccrt::Tensor &t) {
    double v;
    std::memcpy(&v, t.data.data(), 8);
    return v;
  };

  std::vector<pccrt::Tensor> outputs = evaluate();
  const double h = 1e-6;
  int checked = 0;
  for (pccrt::Tensor &w : weights) {
    if (w.name.rfind("pcc.const.", 0) == 0)
      continue;
    const pccrt::Tensor *grad = nullptr;
    for (const pccrt::Tensor &o : outputs)
      if (o.kind == PCCRT_KIND_GRAD && o.name == w.name)
        grad = &o;
    ASSERT_TRUE(grad) << "no gradient for " << w.name;
    auto *values = reinterpret_cast<double *>(w.data.data());
    auto *g = reinterpret_cast<const double *>(grad->data.data());
    for (int64_t i = 0; i < w.numElements(); ++i) {
      double saved = values[i];
      values[i] = saved + h;
      double up = scalarOf(evaluate()[0]);
      values[i] = saved - h;
      double down = scalarOf(evaluate()[0]);
      values[i] = saved;
      double fd = (up - down) / (2 * h);
      EXPECT_NEAR(g[i], fd, 1e-5 * std::max(1.0, std::fabs(fd)))
          << c.name << ": d loss / d " << w.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  llvm::sys::fs::remove_directories(dir);
}

const Weight kAny{"2x3"};
const Weight kPositive{"2x3", 0.5, 2};
const Weight kAwayFromZero{"2x3", -2, 2, 0.2};

#define UNARY(NAME, W)                                                         \
  Case {                                                                       \
#NAME, {W }, "  %y = graph." #NAME " %w0 : tensor<2x3xf64>\n",             \
            "tensor<2x3xf64>"                                                  \
  }
#define BINARY(NAME, WA, WB, TA, TB)                                           \
  Case {                                                                       \
#NAME, {WA, WB },                                                          \
            "  %y = graph." #NAME " %w0, %w1 : (" TA ", " TB                   \
            ") -> tensor<2x3xf64>\n",                                          \
            "tensor<2x3xf64>"                                                  \
  }

const Case kCases[] = {
    UNARY(sqrt, kPositive),
    UNARY(reciprocal, kAwayFromZero),
    UNARY(neg, kAny),
    UNARY(abs, kAwayFromZero),
    UNARY(erf, kAny),
    UNARY(tanh, kAny),
    UNARY(sigmoid, kAny),
    UNARY(exp, kAny),
    UNARY(log, kPositive),
    UNARY(relu, kAwayFromZero),
    UNARY(sin, kAny),
    UNARY(cos, kAny),
    BINARY(add, kAny, Weight{"3"}, "tensor<2x3xf64>", "tensor<3xf64>"),
    BINARY(sub, kAny, Weight{"2x1"}, "tensor<2x3xf64>", "tensor<2x1xf64>"),
    BINARY(mul, kAny, Weight{"1x3"}, "tensor<2x3xf64>", "tensor<1x3xf64>"),
    BINARY(div, kAny, (Weight{"3", -2, 2, 0.5}), "tensor<2x3xf64>",
           "tensor<3xf64>"),
    BINARY(max, kAny, kAny, "tensor<2x3xf64>", "tensor<2x3xf64>"),
    BINARY(min, kAny, kAny, "tensor<2x3xf64>", "tensor<2x3xf64>"),
    {"pow",
     {kAny},
     "  %e = graph.constant dense<3.0> : tensor<f64>\n"
     "  %y = graph.pow %w0, %e : (tensor<2x3xf64>, tensor<f64>) -> "
     "tensor<2x3xf64>\n",
     "tensor<2x3xf64>"},
    {"where",
     {kAny, Weight{"3"}},
     "  %c = graph.constant dense<[[true, false, true], [false, false, "
     "true]]> : tensor<2x3xi1>\n"
     "  %y = graph.where %c, %w0, %w1 : (tensor<2x3xi1>, tensor<2x3xf64>, "
     "tensor<3xf64>) -> tensor<2x3xf64>\n",
     "tensor<2x3xf64>"},
    {"matmul",
     {Weight{"2x3x4"}, Weight{"4x5"}},
     "  %y = graph.matmul %w0, %w1 : (tensor<2x3x4xf64>, tensor<4x5xf64>) "
     "-> tensor<2x3x5xf64>\n",
     "tensor<2x3x5xf64>"},
    {"gemm",
     {Weight{"4x3"}, Weight{"5x4"}, Weight{"5"}},
     "  %y = graph.gemm %w0, %w1, %w2 {alpha = 0.5 : f32, beta = 2.0 : f32, "
     "transA = true, transB = true} : (tensor<4x3xf64>, tensor<5x4xf64>, "
     "tensor<5xf64>) -> tensor<3x5xf64>\n",
     "tensor<3x5xf64>"},
    {"softmax",
     {Weight{"2x4"}},
     "  %y = graph.softmax %w0 {axis = 1 : i64} : tensor<2x4xf64>\n",
     "tensor<2x4xf64>"},
    {"log_softmax",
     {Weight{"3x2"}},
     "  %y = graph.log_softmax %w0 {axis = 0 : i64} : tensor<3x2xf64>\n",
     "tensor<3x2xf64>"},
    {"layer_norm",
     {Weight{"2x2x4"}, Weight{"4"}, Weight{"4"}},
     "  %y, %m, %s = graph.layer_norm %w0, %w1, %w2 {axis = 2 : i64} : "
     "(tensor<2x2x4xf64>, tensor<4xf64>, tensor<4xf64>) -> "
     "(tensor<2x2x4xf64>, tensor<2x2x1xf64>, tensor<2x2x1xf64>)\n",
     "tensor<2x2x4xf64>"},
    {"reduce_mean",
     {Weight{"2x3x2"}},
     "  %y = graph.reduce_mean %w0 {axes = array<i64: 1>} : "
     "(tensor<2x3x2xf64>) -> tensor<2x1x2xf64>\n",
     "tensor<2x1x2xf64>"},
    {"reduce_sum",
     {Weight{"2x3x2"}},
     "  %y = graph.reduce_sum %w0 {axes = array<i64: 0, 2>, keepdims = "
     "false} : (tensor<2x3x2xf64>) -> tensor<3xf64>\n",
     "tensor<3xf64>"},
    {"reduce_max",
     {Weight{"2x3"}},
     "  %y = graph.reduce_max %w0 {axes = array<i64: 1>} : "
     "(tensor<2x3xf64>) -> tensor<2x1xf64>\n",
     "tensor<2x1xf64>"},
    {"reshape_transpose",
     {Weight{"2x6"}},
     "  %a = graph.reshape %w0 : tensor<2x6xf64> to tensor<3x4xf64>\n"
     "  %y = graph.transpose %a {perm = array<i64: 1, 0>} : "
     "(tensor<3x4xf64>) -> tensor<4x3xf64>\n",
     "tensor<4x3xf64>"},
    {"expand",
     {Weight{"3x1"}},
     "  %y = graph.expand %w0 : tensor<3x1xf64> to tensor<2x3x4xf64>\n",
     "tensor<2x3x4xf64>"},
    {"slice",
     {Weight{"4x5"}},
     "  %y = graph.slice %w0 {starts = array<i64: 3, 0>, sizes = array<i64: "
     "2, 3>, steps = array<i64: -2, 2>} : (tensor<4x5xf64>) -> "
     "tensor<2x3xf64>\n",
     "tensor<2x3xf64>"},
    {"concat_split",
     {Weight{"2x3"}, Weight{"2x2"}},
     "  %c = graph.concat %w0, %w1 {axis = 1 : i64} : (tensor<2x3xf64>, "
     "tensor<2x2xf64>) -> tensor<2x5xf64>\n"
     "  %a, %b = graph.split %c {axis = 1 : i64, sizes = array<i64: 2, 3>} "
     ": (tensor<2x5xf64>) -> (tensor<2x2xf64>, tensor<2x3xf64>)\n"
     "  %t = graph.tanh %a : tensor<2x2xf64>\n"
     "  %y = graph.matmul %t, %b : (tensor<2x2xf64>, tensor<2x3xf64>) -> "
     "tensor<2x3xf64>\n",
     "tensor<2x3xf64>"},
    {"gather",
     {Weight{"4x3"}},
     "  %i = graph.constant dense<[[1, 3], [1, -4]]> : tensor<2x2xi64>\n"
     "  %y = graph.gather %w0[%i] {axis = 0 : i64} : (tensor<4x3xf64>, "
     "tensor<2x2xi64>) -> tensor<2x2x3xf64>\n",
     "tensor<2x2x3xf64>"},
    {"gather_elements",
     {Weight{"3x4"}},
     "  %i = graph.constant dense<[[0, 3], [2, 2], [1, 0]]> : "
     "tensor<3x2xi64>\n"
     "  %y = graph.gather_elements %w0[%i] {axis = 1 : i64} : "
     "(tensor<3x4xf64>, tensor<3x2xi64>) -> tensor<3x2xf64>\n",
     "tensor<3x2xf64>"},
    {"scatter_add",
     {Weight{"2x3x2"}},
     "  %i = graph.constant dense<[1, 3, 1]> : tensor<3xi64>\n"
     "  %y = graph.scatter_add %w0[%i] {axis = 1 : i64} : "
     "(tensor<2x3x2xf64>, tensor<3xi64>) -> tensor<2x4x2xf64>\n",
     "tensor<2x4x2xf64>"},
    {"scatter_elements_add",
     {Weight{"2x3"}},
     "  %i = graph.constant dense<[[0, 2, 2], [3, 1, 0]]> : "
     "tensor<2x3xi64>\n"
     "  %y = graph.scatter_elements_add %w0[%i] {axis = 1 : i64} : "
     "(tensor<2x3xf64>, tensor<2x3xi64>) -> tensor<2x4xf64>\n",
     "tensor<2x4xf64>"},
    {"trilu",
     {Weight{"3x3"}},
     "  %y = graph.trilu %w0 {upper = false, k = 1 : i64} : "
     "tensor<3x3xf64>\n",
     "tensor<3x3xf64>"},
    {"cumsum",
     {Weight{"2x4"}},
     "  %y = graph.cumsum %w0 {axis = 1 : i64} : tensor<2x4xf64>\n",
     "tensor<2x4xf64>"},
    {"cumsum_reverse_exclusive",
     {Weight{"3x2"}},
     "  %y = graph.cumsum %w0 {axis = 0 : i64, exclusive = true, reverse = "
     "true} : tensor<3x2xf64>\n",
     "tensor<3x2xf64>"},
    {"top_k",
     {Weight{"3x5"}},
     "  %y, %i = graph.top_k %w0 {axis = 1 : i64, k = 2 : i64} : "
     "(tensor<3x5xf64>) -> (tensor<3x2xf64>, tensor<3x2xi64>)\n",
     "tensor<3x2xf64>"},
    {"top_k_smallest_axis0",
     {Weight{"4x3"}},
     "  %y, %i = graph.top_k %w0 {axis = 0 : i64, k = 3 : i64, largest = "
     "false} : (tensor<4x3xf64>) -> (tensor<3x3xf64>, tensor<3x3xi64>)\n",
     "tensor<3x3xf64>"},
    {"tied",
     {Weight{"3x2"}},
     "  %t = graph.transpose %w0 {perm = array<i64: 1, 0>} : "
     "(tensor<3x2xf64>) -> tensor<2x3xf64>\n"
     "  %y = graph.matmul %w0, %t : (tensor<3x2xf64>, tensor<2x3xf64>) -> "
     "tensor<3x3xf64>\n",
     "tensor<3x3xf64>"},
};

INSTANTIATE_TEST_SUITE_P(Ops, VjpTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.name);
                         });

} // namespace
