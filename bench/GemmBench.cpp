//===- GemmBench.cpp - The packed GEMM's speed on given shapes -----------===//
//
// pcc-bench-gemm times pcc's float product (packed::product, as the
// generated code calls it) on the shapes it is given, each the best of R
// runs after one of warm-up (and their median), and prints GFLOP/s per
// shape:
//
//   pcc-bench-gemm [--threads N] [--reps R]
//                  M,N,K[,ta][,tb][,prepared][,swap][,cold][,acc]...
//   pcc-bench-gemm [--threads N] [--reps R] --peak
//
// `ta` and `tb` transpose A and B; `prepared` packs B ahead (a constant
// weight's product); `swap` computes C = A * B^T as C^T = B * A^T
// (pcc_k::gemmByTranspose, a trained weight's product, B read in place);
// `cold` reads B from memory (a copy of it a run); `acc`
// adds the product to C (beta 1: a gradient accumulated in place).
// bench/gemm.sh runs it beside PyTorch's matmul.
//
// `--peak` times the machine's fused multiply-adds alone instead: each of N
// threads runs chains of them on registers, as wide as the build's vectors
// (-march=native), enough chains to hide their latency; no memory is read.
// It is the most any float product can run at here, the yardstick of
// bench/run.sh's percentages.
//
// Built with PCC_GEMM_PAIRS (by bench/gemm-pairs.sh), it times two versions
// of the kernels in one process, a call of each in turns (R pairs, the
// order alternating), and prints each one's median and the median of the
// pairs' time ratios: a virtual machine's slow minutes then fall on both.
//
//===----------------------------------------------------------------------===//

#include "HugePages.h"
#ifdef PCC_GEMM_PAIRS
#include "GemmPairs.h"
#else
#include "pcc_kernels.h"
#endif

#include <algorithm>
#include <chrono>
#include <immintrin.h>
#include <omp.h>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <vector>

namespace {
using pcc_bench::Floats;

struct Shape {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false, prepared = false, cold = false,
       swap = false, accumulate = false;
  std::string text;
};

[[noreturn]] void usage(const std::string &message) {
  std::fprintf(stderr,
               "pcc-bench-gemm: %s\nusage: pcc-bench-gemm [--threads N] "
               "[--reps R] M,N,K[,ta][,tb][,prepared][,swap][,cold][,acc]... | --peak\n",
               message.c_str());
  std::exit(1);
}

Shape parseShape(const std::string &text) {
  Shape s;
  s.text = text;
  std::stringstream in(text);
  std::string field;
  std::vector<std::string> fields;
  while (std::getline(in, field, ','))
    fields.push_back(field);
  if (fields.size() < 3)
    usage("a shape is M,N,K with optional flags: '" + text + "'");
  int64_t *dims[] = {&s.m, &s.n, &s.k};
  for (int i = 0; i < 3; ++i) {
    char *end = nullptr;
    long long v = std::strtoll(fields[i].c_str(), &end, 10);
    if (fields[i].empty() || *end || v <= 0 || v > (1 << 20))
      usage("not a dimension in '" + text + "': '" + fields[i] + "'");
    *dims[i] = v;
  }
  for (size_t i = 3; i < fields.size(); ++i) {
    if (fields[i] == "ta")
      s.transA = true;
    else if (fields[i] == "tb")
      s.transB = true;
    else if (fields[i] == "prepared")
      s.prepared = true;
    else if (fields[i] == "swap")
      s.swap = true;
    else if (fields[i] == "cold")
      s.cold = true;
    else if (fields[i] == "acc")
      s.accumulate = true;
    else
      usage("unknown flag '" + fields[i] + "' in '" + text + "'");
  }
  if (s.prepared && s.transA)
    usage("a prepared product reads A as it is: '" + text + "'");
  if (s.swap && (s.prepared || s.transA || !s.transB))
    usage("a swapped product reads B transposed, A and B as they are: '" +
          text + "'");
  return s;
}

/// The fused multiply-adds' rate of `threads` threads, in GFLOP/s: the
/// best of `reps` runs of 2^26 vector operations a thread.
double peakGflops(int threads, int reps) {
#if defined(__AVX512F__)
  using Vector = __m512;
  auto splat = [](float x) { return _mm512_set1_ps(x); };
  auto fma = [](Vector a, Vector b, Vector c) {
    return _mm512_fmadd_ps(a, b, c);
  };
  auto sum = [](Vector v) { return _mm512_reduce_add_ps(v); };
#elif defined(__FMA__)
  using Vector = __m256;
  auto splat = [](float x) { return _mm256_set1_ps(x); };
  auto fma = [](Vector a, Vector b, Vector c) {
    return _mm256_fmadd_ps(a, b, c);
  };
  auto sum = [](Vector v) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    float s = 0;
    for (float x : lanes)
      s += x;
    return s;
  };
#else
  using Vector = float;
  auto splat = [](float x) { return x; };
  auto fma = [](Vector a, Vector b, Vector c) { return a * b + c; };
  auto sum = [](Vector v) { return v; };
#endif
  // Twelve chains: two FMA units of four cycles' latency need eight.
  constexpr int kChains = 12;
  constexpr int64_t kSteps = int64_t(1) << 22;
  constexpr double kLanes = sizeof(Vector) / sizeof(float);
  double best = 0;
  volatile float sink = 0;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    {
      // Values that stay finite: x * 0.999... + 1e-3 tends to about 1.
      Vector acc[kChains];
      for (int c = 0; c < kChains; ++c)
        acc[c] = splat(float(c + omp_get_thread_num()) * 1e-3f);
      Vector scale = splat(0.99999f), step = splat(1e-3f);
      for (int64_t i = 0; i < kSteps / kChains * 16; ++i) {
        for (int c = 0; c < kChains; ++c)
          acc[c] = fma(acc[c], scale, step);
      }
      float total = 0;
      for (int c = 0; c < kChains; ++c)
        total += sum(acc[c]);
#pragma omp critical
      sink = sink + total;
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    double flop = 2.0 * kLanes * double(kSteps / kChains * 16 * kChains) *
                  double(threads);
    best = std::max(best, flop / seconds / 1e9);
  }
  return best;
}
} // namespace

int main(int argc, char **argv) {
  int threads = 1, reps = 10;
  std::vector<Shape> shapes;
  bool peak = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--peak") {
      peak = true;
    } else if ((arg == "--threads" || arg == "--reps") && i + 1 < argc) {
      int v = std::atoi(argv[++i]);
      if (v <= 0)
        usage(arg + " takes a positive count");
      (arg == "--threads" ? threads : reps) = v;
    } else if (!arg.empty() && arg[0] == '-') {
      usage("unknown option '" + arg + "'");
    } else {
      shapes.push_back(parseShape(arg));
    }
  }
  if (peak) {
    if (!shapes.empty())
      usage("--peak takes no shape");
    std::printf("fused multiply-add peak, %d thread%s: %.1f GFLOP/s\n",
                threads, threads == 1 ? "" : "s", peakGflops(threads, reps));
    return 0;
  }
  if (shapes.empty())
    usage("no shape");
  for (const Shape &s : shapes) {
    int64_t aRows = s.transA ? s.k : s.m, aCols = s.transA ? s.m : s.k;
    int64_t bRows = s.transB ? s.n : s.k, bCols = s.transB ? s.k : s.n;
    // Multiples of 1/8 and 1/16 below 1: every partial sum of a product is
    // a float exactly (a multiple of 1/128 below 2^17), in any order.
    Floats a(size_t(aRows * aCols)), b(size_t(bRows * bCols)),
        c(size_t(s.m * s.n));
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = float(int64_t(i * 7 % 13) - 6) / 8;
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = float(int64_t(i * 5 % 11) - 5) / 16;
    double flop = 2.0 * double(s.m) * double(s.n) * double(s.k);
#ifdef PCC_GEMM_PAIRS
    // Each version packs its own B: the two may lay it out differently.
    // Each writes a C of its own, compared at the end.
    Floats cNew(c.size());
    gemm_pairs::Product product{s.m,      s.n,        s.k,      a.data(),
                                aCols,    s.transA,   b.data(), bCols,
                                s.transB, s.prepared, c.data(), threads,
                                s.accumulate ? 1.0f : 0.0f};
    // `cold`: copies of B over 256 MB, a copy a pair (each side packs its
    // own copies of a prepared one).
    size_t bytes = size_t(bRows * bCols) * sizeof(float);
    product.copies = s.cold ? int64_t(std::max<size_t>(2, (size_t(256) << 20) /
                                                            bytes))
                            : 1;
    std::vector<Floats> bs(s.prepared ? 1 : size_t(product.copies), b);
    Floats packed[2];
    int64_t pair = 0;
    auto time = [&](int side) {
      gemm_pairs::Product call = product;
      call.copy = pair % product.copies;
      if (!s.prepared)
        call.b = bs[size_t(call.copy)].data();
      if (side)
        call.c = cNew.data();
      auto start = std::chrono::steady_clock::now();
      (side ? gemm_pairs::runNew : gemm_pairs::runBase)(call, packed[side]);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                           start)
          .count();
    };
    time(0), time(1);
    std::vector<double> seconds[2], ratios;
    for (int r = 0; r < reps; ++r) {
      double t[2];
      int first = r % 2;
      ++pair;
      t[first] = time(first);
      t[1 - first] = time(1 - first);
      seconds[0].push_back(t[0]);
      seconds[1].push_back(t[1]);
      ratios.push_back(t[1] / t[0]);
    }
    auto quantile = [](std::vector<double> v, double q) {
      std::sort(v.begin(), v.end());
      return v[size_t(q * double(v.size() - 1) + 0.5)];
    };
    // Exact sums: two correct versions give the same bits.
    bool differ = c != cNew;
    std::printf("%-24s base %7.1f  new %7.1f GFLOP/s  new/base time %.3f "
                "(quartiles %.3f-%.3f)%s\n",
                s.text.c_str(), flop / quantile(seconds[0], 0.5) / 1e9,
                flop / quantile(seconds[1], 0.5) / 1e9, quantile(ratios, 0.5),
                quantile(ratios, 0.25), quantile(ratios, 0.75),
                differ ? "  RESULTS DIFFER" : "");
#else
    pcc_k::setThreads(threads);
    // B as the product reads it (packed ahead, or as it is); `cold` keeps
    // copies of it over 256 MB, a copy a run, so that every run reads B
    // from memory, as a forward reads its weights, while A stays cached.
    Floats packed;
    if (s.prepared) {
      packed.resize(size_t(pcc_k::packedBElements(s.k, s.n)));
      pcc_k::packB(s.k, s.n, b.data(), bCols, s.transB, packed.data());
    } else {
      packed = b;
    }
    size_t copies =
        s.cold ? std::max<size_t>(2, (size_t(256) << 20) /
                                         (packed.size() * sizeof(float)))
               : 1;
    std::vector<Floats> bs(copies, packed);
    bool parallel = threads > 1 && pcc_k::parallelProduct(s.m, s.n, s.k);
    std::vector<double> times;
    for (int r = 0; r <= reps; ++r) {
      const float *bUsed = bs[size_t(r) % copies].data();
      auto start = std::chrono::steady_clock::now();
      if (s.swap)
        pcc_k::gemmByTranspose(s.m, s.n, s.k, 1.0f, a.data(), aCols, bUsed,
                               bCols, s.accumulate ? 1.0f : 0.0f, c.data(),
                               s.n);
      else
        pcc_k::packed::product(s.m, s.n, s.k, 1.0f, a.data(), aCols,
                               s.transA, s.prepared ? bUsed : nullptr,
                               s.prepared ? b.data() : bUsed, bCols,
                               s.transB, s.accumulate ? 1.0f : 0.0f,
                               c.data(), s.n, nullptr, nullptr, parallel);
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      if (r > 0)
        times.push_back(seconds);
    }
    std::sort(times.begin(), times.end());
    double best = times.front(), median = times[times.size() / 2];
    std::printf("%-24s %9.3f ms %7.1f GFLOP/s (median %.1f)\n", s.text.c_str(),
                best * 1e3, flop / best / 1e9, flop / median / 1e9);
#endif
  }
  return 0;
}
