//===- TargetHooks.cpp - What each code-generating target spells ----------===//

#include "pcc/Target/TargetHooks.h"

#include "pcc/Target/AbiTables.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace pcc;

std::string pcc::getCppTypeName(Type t, StringRef kernelNamespace) {
  if (t.isF32())
    return "float";
  if (t.isF64())
    return "double";
  if (t.isF16())
    return (kernelNamespace + "::f16").str();
  if (t.isBF16())
    return (kernelNamespace + "::bf16").str();
  auto i = cast<IntegerType>(t);
  if (i.getWidth() == 1)
    return "bool";
  return (i.isUnsigned() ? "uint" : "int") + std::to_string(i.getWidth()) +
         "_t";
}

void TargetHooks::getKernelParameters(ArrayRef<LoopBuffer> buffers,
                                      StringRef restrictQualifier,
                                      SmallVectorImpl<std::string> &names,
                                      SmallVectorImpl<std::string> &params) const {
  for (auto [k, b] : llvm::enumerate(buffers)) {
    names.push_back("p" + std::to_string(k));
    params.push_back((b.written ? "" : "const ") + getTypeName(b.elementType) +
                     "* " + restrictQualifier.str() + " " + names.back());
  }
}

TargetHooks::RowKernelParts
TargetHooks::getRowKernelParts(const RowSoftmax &softmax,
                               ArrayRef<LoopBuffer> buffers,
                               StringRef restrictQualifier) const {
  RowKernelParts parts;
  getKernelParameters(buffers, restrictQualifier, parts.names, parts.params);
  for (unsigned d = 0; d < softmax.rows.getBounds().size(); ++d)
    parts.ivs.push_back("i" + std::to_string(d));
  for (unsigned k = 0; k < buffers.size(); ++k)
    parts.offsets.push_back(getRowElementOffset(softmax, k, parts.ivs));
  parts.typeName = getTypeName(softmax.elementType);
  return parts;
}

std::string TargetHooks::defineKernel(StringRef declaration,
                                      ArrayRef<std::string> params,
                                      StringRef text) {
  std::string signature = llvm::join(params, ", ");
  std::string &name = kernels[signature + "\n" + text.str()];
  if (name.empty()) {
    name = makeName("pcc_loop");
    globals += declaration.str() + " " + name + "(" + signature + ") {\n" +
               text.str() + "}\n";
  }
  return name;
}

std::string TargetHooks::getKernelArguments(ArrayRef<LoopBuffer> buffers) {
  SmallVector<std::string> args;
  for (const LoopBuffer &b : buffers)
    args.push_back(b.pointer);
  return llvm::join(args, ", ");
}

std::string pcc::getRowElementOffset(const RowSoftmax &softmax, unsigned k,
                                     ArrayRef<std::string> ivs) {
  std::string off = "(" + softmax.rows.getOffset(k, ivs) + ")";
  int64_t stride = softmax.columnStrides[k];
  if (k > 0 && stride != 0)
    off += stride == 1 ? " + j" : " + j * " + std::to_string(stride);
  return off;
}

// Out of line, so that the vtable has one home.
TargetHooks::~TargetHooks() = default;

// A call of the kernel library is spelled alike on every target, in the
// target's namespace.
void TargetHooks::printRunBody(raw_ostream &os, StringRef preamble,
                               StringRef body, bool, StringRef) const {
  os << preamble << body << "  " << getRunSuccess() << "\n";
}

void TargetHooks::emitKernelCall(StringRef kernel, ArrayRef<Type> typeArgs,
                                 ArrayRef<std::string> args,
                                 StringRef errorCode) {
  std::string call = (getKernelNamespace() + "::" + kernel).str();
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
  else if (errorSite.empty())
    emitLine("if (" + call + ") return " + errorCode.str() + ";");
  else
    emitLine("if (" + call + ") { if (ctx->error_op) *ctx->error_op = " +
             getCStringLiteral(errorSite) + "; return " + errorCode.str() +
             "; }");
}

// Communication, tracing and calls are host code on every target: calls
// of the run context's communicator and tracer, and of other functions of
// the program.

void TargetHooks::emitCollective(const CollectiveCall &c) {
  int32_t dtype = getOnnxDataType(c.elementType);
  std::string stream = getCommStream();
  emitLine("int32_t " + c.request + " = -1;");
  switch (c.kind) {
  case CollectiveCall::Kind::AllReduce:
    // In place on the output, which starts as a copy of the input.
    emitCopy(c.output, c.input,
             c.count * std::max<int64_t>(
                           1, c.elementType.getIntOrFloatBitWidth() / 8),
             /*mayAlias=*/true);
    emitBeforeCollective();
    emitLine(llvm::formatv("if (ctx->comm->ops->start_all_reduce(ctx->comm, "
                           "{0}u, {1}, {2}, {3}, {4}, {5}, &{6})) return "
                           "PCCRT_ERR_COMM;",
                           c.axes, c.output, c.count, dtype, c.reduction,
                           stream, c.request)
                 .str());
    return;
  case CollectiveCall::Kind::AllGather:
    emitBeforeCollective();
    emitLine(llvm::formatv("if (ctx->comm->ops->start_all_gather(ctx->comm, "
                           "{0}u, {1}, {2}, {3}, {4}, {5}, &{6})) return "
                           "PCCRT_ERR_COMM;",
                           c.axes, c.input, c.output, c.count, dtype, stream,
                           c.request)
                 .str());
    return;
  case CollectiveCall::Kind::ReduceScatter:
    emitBeforeCollective();
    emitLine(llvm::formatv("if (ctx->comm->ops->start_reduce_scatter("
                           "ctx->comm, {0}u, {1}, {2}, {3}, {4}, {5}, {6}, "
                           "&{7})) return PCCRT_ERR_COMM;",
                           c.axes, c.input, c.output, c.count, dtype,
                           c.reduction, stream, c.request)
                 .str());
    return;
  }
}

void TargetHooks::emitCollectiveWait(StringRef request) {
  emitLine(llvm::formatv("if (ctx->comm->ops->wait(ctx->comm, {0}, {1})) "
                         "return PCCRT_ERR_COMM;",
                         request, getCommStream())
               .str());
}

void TargetHooks::emitTransfer(const TransferCall &t) {
  // Sends are non-blocking (isend), so that a pipeline rank goes on
  // computing while its activations travel.
  bool isSend = t.kind == TransferCall::Kind::Send;
  if (isSend && !t.request.empty()) {
    emitLine("int32_t " + t.request + " = -1;");
    emitLine(llvm::formatv("if (ctx->comm->ops->start_send(ctx->comm, {0}u, "
                           "{1}, {2}, {3}, {4}, {5}, &{6})) return "
                           "PCCRT_ERR_COMM;",
                           t.axes, t.peer, t.tag, t.buffer, t.count,
                           getOnnxDataType(t.elementType), t.request)
                 .str());
    return;
  }
  emitLine(llvm::formatv("if (ctx->comm->ops->{0}(ctx->comm, {1}u, {2}, {3}, "
                         "{4}, {5}, {6})) return PCCRT_ERR_COMM;",
                         isSend ? "isend" : "recv", t.axes, t.peer, t.tag,
                         t.buffer, t.count, getOnnxDataType(t.elementType))
               .str());
}

void TargetHooks::emitWaitForSends() {
  emitLine("if (ctx->comm->ops->wait_all(ctx->comm)) return PCCRT_ERR_COMM;");
}

void TargetHooks::emitSendWait(StringRef request) {
  emitLine(llvm::formatv("if (ctx->comm->ops->wait_send(ctx->comm, {0})) "
                         "return PCCRT_ERR_COMM;",
                         request)
               .str());
}

void TargetHooks::emitTrace(StringRef action, bool begin) {
  emitLine(llvm::formatv("if (ctx->trace) ctx->trace(ctx->trace_user, {0}, "
                         "{1});",
                         getCStringLiteral(action), begin ? 1 : 0)
               .str());
}

void TargetHooks::emitCall(StringRef callee, ArrayRef<std::string> args,
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

std::string ReductionLoop::getIdentity(StringRef typeName) const {
  std::string limits = ("std::numeric_limits<" + typeName + ">::").str();
  bool isFloat = isa<FloatType>(elementType);
  switch (kind) {
  case Kind::Max:
    return isFloat ? "-" + limits + "infinity()" : limits + "lowest()";
  case Kind::Min:
    return isFloat ? limits + "infinity()" : limits + "max()";
  case Kind::Sum:
  case Kind::Mean:
    return (typeName + "(0)").str();
  }
  llvm_unreachable("unknown reduction");
}
