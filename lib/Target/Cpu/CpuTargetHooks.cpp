//===- CpuTargetHooks.cpp - How the CPU target spells code ----------------===//

#include "CpuTargetHooks.h"

#include "pcc/Target/AbiTables.h"
#include "pcc/Target/ScalarExpr.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace pcc;

std::string pcc::getCppTypeName(Type t) {
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

std::string CpuTargetHooks::getTypeName(Type elementType) const {
  return getCppTypeName(elementType);
}

std::string CpuTargetHooks::getMathCall(MathFunction fn, Type type,
                                        ArrayRef<std::string> a) const {
  std::string t = getTypeName(type);
  bool isFloat = isa<FloatType>(type);
  auto call = [&](StringRef name) {
    return ("std::" + name + "(" + a[0] + ")").str();
  };
  // libm's float exp, tanh, erf and log are calls that keep the loop around
  // them scalar; pcc_kernels.h has inline ones that vectorize. Doubles and
  // the 16-bit types (computed in float) keep libm's.
  auto callFloat = [&](StringRef name) {
    return type.isF32() ? ("pcc_k::f" + name + "(" + a[0] + ")").str()
                        : call(name);
  };
  switch (fn) {
  case MathFunction::Abs:
    return isFloat
               ? call("fabs")
               : "(" + a[0] + " < 0 ? " + t + "(-" + a[0] + ") : " + a[0] + ")";
  case MathFunction::Ceil:
    return call("ceil");
  case MathFunction::Cos:
    return call("cos");
  case MathFunction::Erf:
    return callFloat("erf");
  case MathFunction::Exp:
    return callFloat("exp");
  case MathFunction::Floor:
    return call("floor");
  case MathFunction::IsNaN:
    return call("isnan");
  case MathFunction::Log:
    return callFloat("log");
  case MathFunction::Sin:
    return call("sin");
  case MathFunction::Sqrt:
    return call("sqrt");
  case MathFunction::Tanh:
    return callFloat("tanh");
  case MathFunction::Pow:
    return isFloat
               ? t + "(std::pow(double(" + a[0] + "), double(" + a[1] + ")))"
               : "pcc_k::ipow<" + t + ">(" + a[0] + ", " + t + "(" + a[1] +
                     "))";
  case MathFunction::Max:
    return isFloat ? "std::fmax(" + a[0] + ", " + a[1] + ")"
                   : "std::max<" + t + ">(" + a[0] + ", " + a[1] + ")";
  case MathFunction::Min:
    return isFloat ? "std::fmin(" + a[0] + ", " + a[1] + ")"
                   : "std::min<" + t + ">(" + a[0] + ", " + a[1] + ")";
  }
  llvm_unreachable("unknown math function");
}

void CpuTargetHooks::emitLine(StringRef line) {
  *body += "  " + line.str() + "\n";
}

void CpuTargetHooks::emitComment(StringRef text) {
  emitLine("// " + text.str());
}

void CpuTargetHooks::emitLoops(
    const LoopNest &nest,
    function_ref<std::string(ArrayRef<std::string>)> statement,
    bool parallel) {
  if (nest.isEmpty())
    return;
  std::string indent = "  ";
  SmallVector<std::string> ivs;
  *body += "  {\n";
  if (parallel)
    *body += "#pragma omp parallel for schedule(static) "
             "num_threads(pcc_k::threads()) if(pcc_k::threads() > 1) "
             "collapse(" +
             std::to_string(nest.getBounds().size()) + ")\n";
  for (int64_t n : nest.getBounds()) {
    std::string iv = makeName("i");
    *body += indent +
             llvm::formatv("  for (int64_t {0} = 0; {0} < {1}; ++{0})\n", iv, n)
                 .str();
    indent += "  ";
    ivs.push_back(iv);
  }
  SmallVector<std::string> offsets;
  for (unsigned k = 0; k < nest.getNumAccesses(); ++k)
    offsets.push_back(nest.getOffset(k, ivs));
  *body += indent + "  " + statement(offsets) + "\n  }\n";
}

void CpuTargetHooks::emitParallelLoop(
    const LoopNest &nest, ArrayRef<LoopBuffer> buffers,
    function_ref<std::string(ArrayRef<std::string>, ArrayRef<std::string>)>
        statement) {
  emitLoopKernel(nest, buffers, statement, /*parallel=*/true);
}

void CpuTargetHooks::emitLoopKernel(
    const LoopNest &nest, ArrayRef<LoopBuffer> buffers,
    function_ref<std::string(ArrayRef<std::string>, ArrayRef<std::string>)>
        statement,
    bool parallel,
    function_ref<std::string(ArrayRef<std::string>)> prologue,
    function_ref<std::string(ArrayRef<std::string>)> epilogue) {
  if (nest.isEmpty())
    return;
  // The nest becomes a kernel of its own whose parameters are the buffers,
  // restrict-qualified (a written buffer overlaps no other), so that the
  // C++ compiler vectorizes its innermost loop without alias checks. Equal
  // kernels (each layer of a model runs the same ones) are defined once.
  SmallVector<std::string> names, params;
  int64_t bytesPerIteration = 0;
  for (auto [k, b] : llvm::enumerate(buffers)) {
    names.push_back("p" + std::to_string(k));
    params.push_back((b.written ? "" : "const ") + getTypeName(b.elementType) +
                     "* __restrict " + names.back());
    bytesPerIteration +=
        std::max<int64_t>(1, b.elementType.getIntOrFloatBitWidth() / 8);
  }
  ArrayRef<int64_t> bounds = nest.getBounds();
  SmallVector<std::string> ivs;
  for (unsigned d = 0; d < bounds.size(); ++d)
    ivs.push_back("i" + std::to_string(d));
  SmallVector<std::string> offsets;
  for (unsigned k = 0; k < nest.getNumAccesses(); ++k)
    offsets.push_back(nest.getOffset(k, ivs));

  std::string text;
  if (prologue)
    text += "  " + prologue(names) + "\n";
  // Threads split the outer dimensions when the nest moves enough bytes to
  // pay for waking them (kParallelBytes), collapsing as many dimensions as
  // it takes to give each thread several iterations.
  int64_t bytes = nest.getNumIterations() * bytesPerIteration;
  unsigned collapse = 0;
  for (int64_t outer = 1; collapse + 1 < bounds.size() && outer < 16;)
    outer *= bounds[collapse++];
  if (bounds.size() == 1 || collapse == 0)
    collapse = 1;
  if (parallel && bytes >= kParallelBytes) {
    text += "#pragma omp parallel for schedule(static) num_threads(pcc_k::"
            "threads()) if(pcc_k::threads() > 1)";
    if (collapse > 1)
      text += " collapse(" + std::to_string(collapse) + ")";
    text += "\n";
  }
  std::string indent = "  ";
  for (auto [d, n] : llvm::enumerate(bounds)) {
    text += indent + llvm::formatv("for (int64_t {0} = 0; {0} < {1}; ++{0})",
                                   ivs[d], n)
                         .str();
    text += "\n";
    indent += "  ";
  }
  text += indent + "{ " + statement(names, offsets) + " }\n";
  if (epilogue)
    text += "  " + epilogue(names) + "\n";

  std::string signature = llvm::join(params, ", ");
  std::string &name = kernels[signature + "\n" + text];
  if (name.empty()) {
    name = makeName("pcc_loop");
    globals += "static void " + name + "(" + signature + ") {\n" + text +
               "}\n";
  }
  SmallVector<std::string> args;
  for (const LoopBuffer &b : buffers)
    args.push_back(b.pointer);
  emitLine(name + "(" + llvm::join(args, ", ") + ");");
}

void CpuTargetHooks::emitReduction(const ReductionLoop &r) {
  std::string t = getTypeName(r.elementType);
  using Kind = ReductionLoop::Kind;
  bool isMax = r.kind == Kind::Max, isMin = r.kind == Kind::Min;
  std::string init = isMax   ? "std::numeric_limits<" + t + ">::lowest()"
                     : isMin ? "std::numeric_limits<" + t + ">::max()"
                             : t + "(0)";
  if (isa<FloatType>(r.elementType) && (isMax || isMin))
    init = std::string(isMax ? "-" : "") + "std::numeric_limits<" + t +
           ">::infinity()";
  // One kernel: the output starts at the reduction's identity, takes in
  // every input element, and a mean divides at the end. The iterations
  // accumulate into shared outputs, so they run in order.
  auto fill = [&](ArrayRef<std::string> name) {
    return llvm::formatv("for (int64_t k = 0; k < {0}; ++k) {1}[k] = {2};",
                         r.outputElements, name[0], init)
        .str();
  };
  auto divide = [&](ArrayRef<std::string> name) {
    return llvm::formatv("for (int64_t k = 0; k < {0}; ++k) "
                         "{1}[k] = {1}[k] / {2}({3});",
                         r.outputElements, name[0], t, r.count)
        .str();
  };
  emitLoopKernel(
      r.nest, {{r.output, r.elementType, true}, {r.input, r.elementType}},
      [&](ArrayRef<std::string> name, ArrayRef<std::string> off) {
        std::string y = name[0] + "[" + off[0] + "]";
        std::string x = name[1] + "[" + off[1] + "]";
        if (isMax)
          return y + " = std::max<" + t + ">(" + y + ", " + x + ");";
        if (isMin)
          return y + " = std::min<" + t + ">(" + y + ", " + x + ");";
        return y + " = " + t + "(" + y + " + " + x + ");";
      },
      /*parallel=*/false, fill,
      r.kind == Kind::Mean
          ? function_ref<std::string(ArrayRef<std::string>)>(divide)
          : nullptr);
}

void CpuTargetHooks::emitGemm(const GemmCall &g) {
  std::string t = getTypeName(g.elementType);
  // A batch of products (attention's heads) runs one product per thread;
  // a single product is split inside pcc_k::gemm.
  bool batched = g.batch.getNumIterations() > 1;
  emitLoops(
      g.batch,
      [&](ArrayRef<std::string> off) {
        return llvm::formatv(
                   "pcc_k::{17}<{0}>({1}, {2}, {3}, {4}, {5} + {6}, {7}, {8}, "
                   "{9} + {10}, {11}, {12}, {13}, {14} + {15}, {16});",
                   t, g.m, g.n, g.k, g.alpha, g.a, off[0], g.lda,
                   g.transA ? "true" : "false", g.b, off[1], g.ldb,
                   g.transB ? "true" : "false", g.beta, g.c, off[2], g.ldc,
                   batched ? "gemmSerial" : "gemm")
            .str();
      },
      /*parallel=*/batched);
}

void CpuTargetHooks::emitKernelCall(StringRef kernel, ArrayRef<Type> typeArgs,
                                    ArrayRef<std::string> args,
                                    StringRef errorCode) {
  std::string call = "pcc_k::" + kernel.str();
  if (!typeArgs.empty()) {
    call += "<";
    llvm::interleave(
        typeArgs, [&](Type t) { call += getTypeName(t); },
        [&] { call += ", "; });
    call += ">";
  }
  call += "(" + llvm::join(args, ", ") + ")";
  if (errorCode.empty())
    emitLine(call + ";");
  else
    emitLine("if (" + call + ") return " + errorCode.str() + ";");
}

std::string CpuTargetHooks::emitIndexArray(ArrayRef<int64_t> values) {
  std::string name = makeName("s");
  std::string list;
  llvm::raw_string_ostream os(list);
  llvm::interleaveComma(values, os);
  globals += llvm::formatv("static const int64_t {0}[] = {{{1}};\n", name,
                           values.empty() ? "0" : list);
  return name;
}

void CpuTargetHooks::emitCollective(const CollectiveCall &c) {
  int32_t dtype = getOnnxDataType(c.elementType);
  switch (c.kind) {
  case CollectiveCall::Kind::AllReduce:
    // In place on the output, which starts as a copy of the input.
    emitCopy(c.output, c.input,
             c.count * std::max<int64_t>(
                           1, c.elementType.getIntOrFloatBitWidth() / 8),
             /*mayAlias=*/true);
    emitLine(llvm::formatv("if (ctx->comm->ops->all_reduce(ctx->comm, {0}u, "
                           "{1}, {2}, {3}, {4})) return PCCRT_ERR_COMM;",
                           c.axes, c.output, c.count, dtype, c.reduction)
                 .str());
    return;
  case CollectiveCall::Kind::AllGather:
    emitLine(llvm::formatv("if (ctx->comm->ops->all_gather(ctx->comm, {0}u, "
                           "{1}, {2}, {3}, {4})) return PCCRT_ERR_COMM;",
                           c.axes, c.input, c.output, c.count, dtype)
                 .str());
    return;
  case CollectiveCall::Kind::ReduceScatter:
    emitLine(llvm::formatv("if (ctx->comm->ops->reduce_scatter(ctx->comm, "
                           "{0}u, {1}, {2}, {3}, {4}, {5})) return "
                           "PCCRT_ERR_COMM;",
                           c.axes, c.input, c.output, c.count, dtype,
                           c.reduction)
                 .str());
    return;
  }
}

void CpuTargetHooks::emitTransfer(const TransferCall &t) {
  // Sends are non-blocking (isend), so that a pipeline rank goes on
  // computing while its activations travel.
  bool isSend = t.kind == TransferCall::Kind::Send;
  emitLine(llvm::formatv("if (ctx->comm->ops->{0}(ctx->comm, {1}u, {2}, {3}, "
                         "{4}, {5}, {6})) return PCCRT_ERR_COMM;",
                         isSend ? "isend" : "recv", t.axes, t.peer, t.tag,
                         t.buffer, t.count, getOnnxDataType(t.elementType))
               .str());
}

void CpuTargetHooks::emitWaitForSends() {
  emitLine("if (ctx->comm->ops->wait_all(ctx->comm)) return PCCRT_ERR_COMM;");
}

void CpuTargetHooks::emitTrace(StringRef action, bool begin) {
  emitLine(llvm::formatv("if (ctx->trace) ctx->trace(ctx->trace_user, {0}, "
                         "{1});",
                         getCStringLiteral(action), begin ? 1 : 0)
               .str());
}

void CpuTargetHooks::emitCopy(StringRef dst, StringRef src, int64_t bytes,
                              bool mayAlias) {
  std::string copy =
      llvm::formatv("std::memcpy({0}, {1}, {2});", dst, src, bytes).str();
  if (mayAlias)
    copy =
        llvm::formatv("if ((void*){0} != (void*){1}) ", dst, src).str() + copy;
  emitLine(copy);
}

void CpuTargetHooks::emitFill(StringRef dst, int64_t count, StringRef value) {
  emitLine(
      llvm::formatv("std::fill_n({0}, {1}, {2});", dst, count, value).str());
}

void CpuTargetHooks::emitCall(StringRef callee, ArrayRef<std::string> args,
                              ArrayRef<std::string> results,
                              StringRef workspace) {
  // Generated functions take their buffers as arrays of pointers (C++ has
  // no empty arrays: an empty list holds one null).
  auto list = [](ArrayRef<std::string> buffers) {
    return buffers.empty() ? std::string("nullptr") : llvm::join(buffers, ", ");
  };
  *body += "  {\n";
  emitLine("  void *const callArgs[] = {" + list(args) + "};");
  emitLine("  void *const callResults[] = {" + list(results) + "};");
  emitLine(("  if (int error = " + callee + "(ctx, callArgs, callResults, " +
            workspace + ")) return error;")
               .str());
  *body += "  }\n";
}
