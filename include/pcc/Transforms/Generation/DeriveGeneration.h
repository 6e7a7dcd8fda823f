//===- DeriveGeneration.h - Prefill and decode over a KV cache --*- C++ -*-===//

#ifndef PCC_TRANSFORMS_GENERATION_DERIVEGENERATION_H
#define PCC_TRANSFORMS_GENERATION_DERIVEGENERATION_H

#include "mlir/IR/BuiltinOps.h"

namespace pcc {

/// The shape of a generation build (pcc-derive-generation).
struct GenerationOptions {
  /// Sequences running at once: the rows of the block table, the logits a
  /// step returns, and the decode step's tokens.
  int64_t maxBatch = 8;
  /// The prefill step's tokens (its budget).
  int64_t maxTokens = 256;
  /// The decode step's tokens, and the logits it returns (0: maxBatch). A
  /// pipeline's runtime decodes its sequences in groups, one per stage, so
  /// that the stages work on different groups at once (vLLM's virtual
  /// engines): its decode step takes a group.
  int64_t decodeTokens = 0;
  /// Positions per cache block, and blocks in the cache (0: every row of
  /// the block table at the longest sequence).
  int64_t blockSize = 16;
  int64_t numBlocks = 0;
};

/// Replaces the module's forward, a causal language model over one
/// sequence of the longest length ([1, S] token ids -> [1, S, V] logits,
/// attention fused), by two entry points over a paged KV cache: `prefill`
/// of `maxTokens` tokens and `decode` of `decodeTokens` (or `maxBatch`),
/// each taking the
/// tokens' ids [1, N], positions [N], block-table rows (slots) [N], the
/// block table [maxBatch, ceil(S / blockSize)] and the indices of the
/// tokens whose logits it returns [R], and returning those logits [R, V]
/// and the updated caches (state marked graph.cache); R is maxBatch for
/// the prefill and the decode step's tokens for the decode.
/// Emits a diagnostic naming the op where the forward cannot be served so.
mlir::LogicalResult deriveGeneration(mlir::ModuleOp module,
                                     const GenerationOptions &options);

/// Gives every KV cache of the module's generation steps (state marked
/// graph.cache, as deriveGeneration makes it) `blocks` blocks: the
/// arguments, their initial values and the writes that carry them to the
/// results.
void resizeKvCache(mlir::ModuleOp module, int64_t blocks);

} // namespace pcc

#endif // PCC_TRANSFORMS_GENERATION_DERIVEGENERATION_H
