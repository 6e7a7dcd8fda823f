//===- ModelDescription.cpp - Models described by their sizes -------------===//
//
// `pcc plan --model gpt:layers=96,hidden=12288,...` plans models too large to
// export: the description becomes a GPT-2 style decoder in the Graph
// dialect (token and position embeddings, pre-norm blocks of fused-QKV
// causal attention and a GELU MLP, a final norm, an LM head tied to the
// token embedding unless `tied=0`), with splat weights, since planning
// needs shapes and costs, not values.
//
//===----------------------------------------------------------------------===//

#include "pcc/Planning/Plan.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

using namespace pcc;

namespace {
struct GptConfig {
  int64_t layers = 12, hidden = 768, heads = 12, vocab = 50257, seq = 1024,
          batch = 8, ffn = 0, tied = 1;
};

/// Writes the Graph dialect text of one model, naming values in order.
class Writer {
public:
  std::string text;
  std::string type(std::initializer_list<int64_t> shape,
                   llvm::StringRef elem = "f32") {
    std::string t = "tensor<";
    for (int64_t d : shape)
      t += std::to_string(d) + "x";
    return t + elem.str() + ">";
  }
  std::string weight(llvm::StringRef name, std::string t, double value) {
    std::string v = next();
    text += llvm::formatv("    {0} = graph.weight \"{1}\" {{exported_as = "
                          "\"parameter\"} dense<{2:e}> : {3}\n",
                          v, name, value, t);
    return v;
  }
  template <typename T> std::string op(T &&body) {
    return emit(std::string(std::forward<T>(body)));
  }
  std::string emit(const std::string &body) {
    std::string v = next();
    text += "    " + v + " = " + body + "\n";
    return v;
  }
  std::string next() { return "%v" + std::to_string(counter++); }

private:
  int64_t counter = 0;
};
} // namespace

/// `name` (the description) becomes the function's location, which
/// diagnostics about the whole model name.
static std::string gptSource(const GptConfig &c, llvm::StringRef name,
                             bool causal) {
  Writer w;
  int64_t b = c.batch, s = c.seq, h = c.hidden, n = c.heads, d = h / n,
          v = c.vocab, f = c.ffn ? c.ffn : 4 * h;
  auto act = w.type({b, s, h});
  auto t = [&](std::initializer_list<int64_t> shape) { return w.type(shape); };
  std::string head = "";
  std::string wte = w.weight("wte", t({v, h}), 0.02);
  std::string wpe = w.weight("wpe", t({s, h}), 0.01);
  // Planning needs the mask's shape, not its values; a generation build
  // needs it causal (the lower triangle kept).
  std::string mask =
      w.op(llvm::formatv("graph.constant dense<true> : {0}",
                         w.type({s, s}, "i1")));
  if (causal)
    mask = w.op(llvm::formatv("graph.trilu {0} {{upper = false} : {1}", mask,
                              w.type({s, s}, "i1")));
  std::string ninf =
      w.op("graph.constant dense<-1.0e9> : tensor<f32>");
  std::string x = w.op(llvm::formatv(
      "graph.gather {0}[%ids] {{axis = 0 : i64} : ({1}, {2}) -> {3}", wte,
      t({v, h}), w.type({b, s}, "i64"), act));
  x = w.op(llvm::formatv("graph.add {0}, {1} : ({2}, {3}) -> {2}", x, wpe,
                         act, t({s, h})));
  auto norm = [&](const std::string &in, const std::string &prefix) {
    std::string g = w.weight(prefix + ".weight", t({h}), 1.0);
    std::string bias = w.weight(prefix + ".bias", t({h}), 0.0);
    std::string out = w.next();
    w.text += llvm::formatv(
        "    {0}, {0}_m, {0}_r = graph.layer_norm {1}, {2}, {3} {{axis = 2 : "
        "i64} : ({4}, {5}, {5}) -> ({4}, {6}, {6})\n",
        out, in, g, bias, act, t({h}), t({b, s, 1}));
    return out;
  };
  auto linear = [&](const std::string &in, const std::string &prefix,
                    int64_t from, int64_t to) {
    std::string wt = w.weight(prefix + ".weight", t({from, to}), 0.02);
    std::string bias = w.weight(prefix + ".bias", t({to}), 0.0);
    std::string y = w.op(llvm::formatv("graph.matmul {0}, {1} : ({2}, {3}) -> "
                                       "{4}",
                                       in, wt, t({b, s, from}), t({from, to}),
                                       t({b, s, to})));
    return w.op(llvm::formatv("graph.add {0}, {1} : ({2}, {3}) -> {2}", y,
                              bias, t({b, s, to}), t({to})));
  };
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "h." + std::to_string(l);
    std::string a = norm(x, p + ".ln_1");
    std::string qkv = linear(a, p + ".attn.c_attn", h, 3 * h);
    std::string q = w.next(), k = q + "_k", vv = q + "_v";
    w.text += llvm::formatv(
        "    {0}, {1}, {2} = graph.split {3} {{axis = 2 : i64, sizes = "
        "array<i64: {4}, {4}, {4}>} : ({5}) -> ({6}, {6}, {6})\n",
        q, k, vv, qkv, h, t({b, s, 3 * h}), act);
    auto heads = [&](const std::string &in, bool transposeLast) {
      std::string r = w.op(llvm::formatv("graph.reshape {0} : {1} to {2}", in,
                                         act, t({b, s, n, d})));
      return w.op(llvm::formatv(
          "graph.transpose {0} {{perm = array<i64: {1}>} : ({2}) -> {3}", r,
          transposeLast ? "0, 2, 3, 1" : "0, 2, 1, 3", t({b, s, n, d}),
          transposeLast ? t({b, n, d, s}) : t({b, n, s, d})));
    };
    std::string qt = heads(q, false), kt = heads(k, true),
                vt = heads(vv, false);
    std::string sc = w.op(llvm::formatv(
        "graph.matmul {0}, {1} : ({2}, {3}) -> {4}", qt, kt, t({b, n, s, d}),
        t({b, n, d, s}), t({b, n, s, s})));
    std::string sm = w.op(llvm::formatv(
        "graph.where {0}, {1}, {2} : ({3}, {4}, tensor<f32>) -> {4}", mask, sc,
        ninf, w.type({s, s}, "i1"), t({b, n, s, s})));
    std::string pr = w.op(llvm::formatv(
        "graph.softmax {0} {{axis = 3 : i64} : {1}", sm, t({b, n, s, s})));
    std::string o = w.op(llvm::formatv(
        "graph.matmul {0}, {1} : ({2}, {3}) -> {3}", pr, vt, t({b, n, s, s}),
        t({b, n, s, d})));
    std::string ot = w.op(llvm::formatv(
        "graph.transpose {0} {{perm = array<i64: 0, 2, 1, 3>} : ({1}) -> {2}",
        o, t({b, n, s, d}), t({b, s, n, d})));
    std::string o2 = w.op(llvm::formatv("graph.reshape {0} : {1} to {2}", ot,
                                        t({b, s, n, d}), act));
    std::string proj = linear(o2, p + ".attn.c_proj", h, h);
    x = w.op(llvm::formatv("graph.add {0}, {1} : ({2}, {2}) -> {2}", x, proj,
                           act));
    std::string m = norm(x, p + ".ln_2");
    std::string fc = linear(m, p + ".mlp.c_fc", h, f);
    std::string g = w.op(llvm::formatv("graph.tanh {0} : {1}", fc,
                                       t({b, s, f})));
    std::string pj = linear(g, p + ".mlp.c_proj", f, h);
    x = w.op(llvm::formatv("graph.add {0}, {1} : ({2}, {2}) -> {2}", x, pj,
                           act));
  }
  x = norm(x, "ln_f");
  std::string lm =
      c.tied ? w.op(llvm::formatv(
                   "graph.transpose {0} {{perm = array<i64: 1, 0>} : ({1}) -> "
                   "{2}",
                   wte, t({v, h}), t({h, v})))
             : w.weight("lm_head.weight", t({h, v}), 0.02);
  std::string logits = w.op(llvm::formatv(
      "graph.matmul {0}, {1} : ({2}, {3}) -> {4}", x, lm, act, t({h, v}),
      t({b, s, v})));
  return llvm::formatv("module {{\n  func.func @main(%ids: {0} {{onnx.name = "
                       "\"input_ids\"}) -> ({1} {{onnx.name = \"logits\"}) {{\n"
                       "{2}    return {3} : {1}\n  } loc(\"{4}\")\n}\n",
                       w.type({b, s}, "i64"), t({b, s, v}), w.text, logits,
                       name)
      .str();
}

llvm::FailureOr<std::string> pcc::describedModelSource(llvm::StringRef spec,
                                                       std::string &error,
                                                       int64_t generateSeq) {
  auto [family, params] = spec.split(':');
  if (family != "gpt") {
    error = "unknown model family '" + family.str() +
            "' (known: gpt:layers=L,hidden=H,heads=N,vocab=V,seq=S,batch=B"
            "[,ffn=F][,tied=0|1])";
    return llvm::failure();
  }
  GptConfig c;
  llvm::StringMap<int64_t *> fields{
      {"layers", &c.layers}, {"hidden", &c.hidden}, {"heads", &c.heads},
      {"vocab", &c.vocab},   {"seq", &c.seq},       {"batch", &c.batch},
      {"ffn", &c.ffn},       {"tied", &c.tied}};
  llvm::SmallVector<llvm::StringRef> items;
  params.split(items, ',', -1, false);
  for (llvm::StringRef item : items) {
    auto [key, value] = item.split('=');
    auto it = fields.find(key.trim());
    int64_t number;
    if (it == fields.end()) {
      error = "unknown gpt parameter '" + key.trim().str() + "'";
      return llvm::failure();
    }
    if (value.trim().getAsInteger(10, number) || number < 0 ||
        (number == 0 && key.trim() != "tied" && key.trim() != "ffn")) {
      error = "gpt parameter '" + key.trim().str() +
              "' needs a positive integer, got '" + value.str() + "'";
      return llvm::failure();
    }
    *it->second = number;
  }
  if (c.hidden % c.heads) {
    error = llvm::formatv("gpt: hidden {0} is not a multiple of heads {1}",
                          c.hidden, c.heads)
                .str();
    return llvm::failure();
  }
  // A generation build's forward: one sequence of the longest length.
  if (generateSeq > 0) {
    c.batch = 1;
    c.seq = generateSeq;
  }
  return gptSource(c, spec, /*causal=*/generateSeq > 0);
}
