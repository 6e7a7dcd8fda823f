#!/usr/bin/env python3
"""Exports greedy text-generation fixtures: tiny causal LMs with random
weights, exported to ONNX with dynamic batch and sequence, and the new tokens
that transformers' generate() picks greedily for a few prompts.

usage: python export_generation.py [NAME,NAME,...]    (NAME: a key of MODELS:
       gpt2, llama, mistral, mistral-sw, gemma3, qwen2, phi3, gemma, gemma2,
       neox, gptj, opt, falcon, codegen, bloom, olmo-clip, apertus, minicpm3,
       xglm, mixtral, qwen3-moe, gptneo, deepseek-v3, phimoe, gpt-oss, qwen3,
       olmo2, cohere, bigcode, smollm3, openai-gpt,
       qwen3_5-attn, falcon-alibi; default all)

Needs PyTorch (with the TorchScript and dynamo ONNX exporters, onnxscript),
transformers and onnx; onnxruntime, if installed, checks every export (see
README.md for the versions that made the archives). For each model NAME the
exports of EXPORTS[NAME] (gpt2, llama and mixtral: both; the others: dyn only) are
made into WORK/NAME-EXP (WORK is $WORK or /tmp/pcc-generation) and packed as
NAME-EXP.tar.gz beside this script:

  NAME-dyn/model.onnx     torch.onnx.export(dynamo=True, optimize=False),
                          dynamic_shapes: batch and seq symbolic
  NAME-ts/model.onnx      TorchScript exporter, opset 17, dynamic_axes on
                          batch and seq
  NAME-EXP/generate.json  {"max_new_tokens": 12, "prompts": [[id, ...], ...],
                           "tokens": [[id, ...], ...], ...}: tokens[i] are the
                          new tokens only of
                          model.generate(torch.tensor([prompts[i]]),
                          max_new_tokens=12, min_new_tokens=12, do_sample=False,
                          use_cache=True, pad_token_id=0, eos_token_id=None),
                          batch 1, no padding (same file for both exports)

Both exports take one input input_ids (int64 [batch, seq]) and give one
output logits (float32 [batch, seq, vocab]): the model is wrapped so that its
forward(input_ids) is model(input_ids=input_ids, use_cache=False).logits (no
attention mask, no past key / values). Every parameter gets 0.02 * randn
noise before export (as export_variants.py does), so that no two are equal
and none is all zeros or all ones. Seeds are fixed and PyTorch runs on one
thread: the same packages give the same files.

The generated tokens are checked against a plain greedy loop (argmax of the
last position's logits of the whole sequence, no cache), and, with
onnxruntime, against the ONNX model's argmax over prompt + tokens; the
smallest gap between the best and second-best logit over all steps is stored
as "min_margin": the prompts are drawn (seed "prompt_seed") until it is at
least MIN_MARGIN, so that a compiled model's rounding cannot flip a token, and
until every prompt's new tokens hold at least MIN_DISTINCT different ids.
"""
import contextlib
import gzip
import json
import os
import shutil
import sys
import tarfile
import zlib

import numpy as np
import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.environ.get("WORK", "/tmp/pcc-generation")
MAX_NEW = 12
PROMPT_LENS = (1, 3, 8, 17, 30)
VOCAB = 384
MIN_MARGIN = 1e-3
MIN_DISTINCT = 3


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    # initializer_range 0.2 (GPT-2's default is 0.02): with weights that small
    # the residual stream stays close to the last token's embedding and the
    # tied head picks one token again and again (12 equal tokens per prompt).
    c = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=128,
                   initializer_range=0.2, bos_token_id=None, eos_token_id=None, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                   attn_implementation="eager")
    return GPT2LMHeadModel(c)


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    c = LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                    num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                    max_position_embeddings=128, tie_word_embeddings=False,
                    attention_dropout=0.0, attn_implementation="eager")
    return LlamaForCausalLM(c)


# ---- dynamo-only fixtures of other architectures (exported as NAME-dyn only)
# The decoders have no padding_idx (pad_token_id=None where the config sets
# one: Phi-3's 32000 is outside the vocabulary) and no dropout. The models
# with a tied head get a larger initializer_range (OPT: init_std) than the
# default 0.02, as GPT-2 does: with the default each of their prompts gets
# one or two different new tokens.

def mistral():
    from transformers import MistralConfig, MistralForCausalLM
    c = MistralConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      vocab_size=VOCAB, max_position_embeddings=128,
                      tie_word_embeddings=False, sliding_window=None,
                      attention_dropout=0.0, attn_implementation="eager")
    return MistralForCausalLM(c)


def mistral_sw():
    # A sliding window shorter than the prompts and their new tokens: every
    # layer's query attends to its 6 latest keys.
    from transformers import MistralConfig, MistralForCausalLM
    c = MistralConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      vocab_size=VOCAB, max_position_embeddings=128,
                      tie_word_embeddings=False, sliding_window=6,
                      attention_dropout=0.0, attn_implementation="eager")
    return MistralForCausalLM(c)


def gemma3():
    # Gemma 3's layers in turn: a sliding window of 6 keys, then causal over
    # the whole sequence. Untied, as Gemma 2.
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    c = Gemma3TextConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         vocab_size=VOCAB, max_position_embeddings=128, sliding_window=6,
                         layer_types=["sliding_attention", "full_attention"],
                         tie_word_embeddings=False, pad_token_id=None,
                         initializer_range=0.3, attention_dropout=0.0,
                         attn_implementation="eager")
    return Gemma3ForCausalLM(c)


def qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    c = Qwen2Config(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                    num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                    max_position_embeddings=128, tie_word_embeddings=True,
                    initializer_range=0.2, attention_dropout=0.0,
                    attn_implementation="eager")
    return Qwen2ForCausalLM(c)


def phi3():
    from transformers import Phi3Config, Phi3ForCausalLM
    c = Phi3Config(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                   num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                   max_position_embeddings=128, original_max_position_embeddings=128,
                   tie_word_embeddings=False, pad_token_id=None, bos_token_id=None,
                   eos_token_id=None, resid_pdrop=0.0,
                   embd_pdrop=0.0, attention_dropout=0.0, attn_implementation="eager")
    return Phi3ForCausalLM(c)


def gemma():
    from transformers import GemmaConfig, GemmaForCausalLM
    c = GemmaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                    num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                    vocab_size=VOCAB, max_position_embeddings=128,
                    tie_word_embeddings=True, pad_token_id=None, initializer_range=0.3,
                    attention_dropout=0.0, attn_implementation="eager")
    return GemmaForCausalLM(c)


def gemma2():
    # A cap small enough for the random weights' scores to reach it (the
    # attention's soft-capping, tanh), and the final logits' cap. Untied: a
    # tied head with Gemma's sqrt(d)-scaled embedding repeats one token.
    from transformers import Gemma2Config, Gemma2ForCausalLM
    c = Gemma2Config(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                     vocab_size=VOCAB, max_position_embeddings=128,
                     attn_logit_softcapping=2.0, final_logit_softcapping=30.0,
                     tie_word_embeddings=False, pad_token_id=None, initializer_range=0.3,
                     attention_dropout=0.0, attn_implementation="eager")
    return Gemma2ForCausalLM(c)


def neox():
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    c = GPTNeoXConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                      num_attention_heads=4, vocab_size=VOCAB, max_position_embeddings=128,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                       "partial_rotary_factor": 0.25},
                      use_parallel_residual=True, tie_word_embeddings=False,
                      attention_dropout=0.0, hidden_dropout=0.0,
                      attn_implementation="eager")
    return GPTNeoXForCausalLM(c)


def gptj():
    from transformers import GPTJConfig, GPTJForCausalLM
    c = GPTJConfig(n_layer=2, n_embd=64, n_head=4, rotary_dim=8, vocab_size=VOCAB,
                   n_positions=128, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                   bos_token_id=None, eos_token_id=None, tie_word_embeddings=False,
                   attn_implementation="eager")
    return GPTJForCausalLM(c)


def opt():
    from transformers import OPTConfig, OPTForCausalLM
    c = OPTConfig(num_hidden_layers=2, hidden_size=64, ffn_dim=128, num_attention_heads=4,
                  vocab_size=VOCAB, max_position_embeddings=128, word_embed_proj_dim=64,
                  dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                  layerdrop=0.0, pad_token_id=None, init_std=0.2,
                  attn_implementation="eager")
    return OPTForCausalLM(c)


def falcon():
    from transformers import FalconConfig, FalconForCausalLM
    c = FalconConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                     num_kv_heads=2, new_decoder_architecture=True, bias=False,
                     alibi=False, vocab_size=VOCAB, max_position_embeddings=128,
                     initializer_range=0.2, hidden_dropout=0.0, attention_dropout=0.0,
                     attn_implementation="eager")
    return FalconForCausalLM(c)


def codegen():
    from transformers import CodeGenConfig, CodeGenForCausalLM
    c = CodeGenConfig(n_layer=2, n_embd=64, n_head=4, rotary_dim=8, vocab_size=VOCAB,
                      n_positions=128, n_ctx=128, resid_pdrop=0.0, embd_pdrop=0.0,
                      attn_pdrop=0.0, bos_token_id=None, eos_token_id=None,
                      tie_word_embeddings=False, attn_implementation="eager")
    return CodeGenForCausalLM(c)


def bloom():
    from transformers import BloomConfig, BloomForCausalLM
    c = BloomConfig(n_layer=2, hidden_size=64, n_head=4, vocab_size=VOCAB,
                    initializer_range=0.3, hidden_dropout=0.0, attention_dropout=0.0,
                    attn_implementation="eager")
    return BloomForCausalLM(c)


def olmo_clip():
    # OLMo clamps its query, key and value projections (ONNX Clip).
    from transformers import OlmoConfig, OlmoForCausalLM
    c = OlmoConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                   num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                   max_position_embeddings=128, clip_qkv=0.5, pad_token_id=None,
                   bos_token_id=None, eos_token_id=None, tie_word_embeddings=False,
                   attention_dropout=0.0, attn_implementation="eager")
    return OlmoForCausalLM(c)


def apertus():
    # xIELU's activation, of trainable slopes through Softplus.
    from transformers import ApertusConfig, ApertusForCausalLM
    c = ApertusConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                      max_position_embeddings=128, pad_token_id=None,
                      bos_token_id=None, eos_token_id=None, tie_word_embeddings=False,
                      attention_dropout=0.0, attn_implementation="eager")
    return ApertusForCausalLM(c)


def minicpm3():
    # Multi-head latent attention (MLA): low-rank queries and keys/values,
    # each head's query and key the concatenation of a rotary part and a
    # plain one, assigned into a tensor by slices (ScatterND).
    from transformers import MiniCPM3Config, MiniCPM3ForCausalLM
    c = MiniCPM3Config(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                       num_attention_heads=4, num_key_value_heads=4, vocab_size=VOCAB,
                       max_position_embeddings=128, qk_nope_head_dim=16,
                       qk_rope_head_dim=8, v_head_dim=16, kv_lora_rank=32,
                       q_lora_rank=48, pad_token_id=None, bos_token_id=None,
                       eos_token_id=None, tie_word_embeddings=False,
                       attention_dropout=0.0, attn_implementation="eager")
    return MiniCPM3ForCausalLM(c)


def xglm():
    # BART's decoder attention: the scores clamped from below to the lowest
    # float, split to [B, H, Tq, Tk] for the mask and merged for a softmax
    # of rank 3; sinusoidal positions offset by 2, a scaled embedding (the
    # head untied: tied to it, every prompt repeats one token).
    from transformers import XGLMConfig, XGLMForCausalLM
    c = XGLMConfig(num_layers=2, d_model=64, ffn_dim=128, attention_heads=4,
                   vocab_size=VOCAB, max_position_embeddings=128, dropout=0.0,
                   attention_dropout=0.0, activation_dropout=0.0, layerdrop=0.0,
                   init_std=0.2, pad_token_id=None, bos_token_id=None,
                   eos_token_id=None, tie_word_embeddings=False,
                   attn_implementation="eager")
    return XGLMForCausalLM(c)


def deepseek_v3():
    # DeepSeek-V3: multi-head latent attention with interleaved rotary
    # halves, a dense first layer, then 8 routed experts in 2 groups (the
    # best group by its top-2 scores kept: TopK, ScatterElements of a group
    # mask), the top 2 experts of it by sigmoid scores, and a shared expert.
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM
    c = DeepseekV3Config(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                         moe_intermediate_size=32, num_attention_heads=4,
                         num_key_value_heads=4, vocab_size=VOCAB, max_position_embeddings=128,
                         n_routed_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1,
                         n_shared_experts=1, first_k_dense_replace=1, q_lora_rank=32,
                         kv_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16,
                         v_head_dim=16, rope_interleave=True, tie_word_embeddings=False,
                         attention_dropout=0.0, pad_token_id=None, bos_token_id=None,
                         eos_token_id=None, attn_implementation="eager",
                         experts_implementation="batched_mm")
    return DeepseekV3ForCausalLM(c)


def gptneo():
    # GPT-Neo: global then local attention (a band of 6 keys), each layer's
    # mask sliced from a constant [1, 1, 128, 128] buffer by the sequence's
    # length and added to transformers' causal mask; unscaled scores, tied
    # head.
    from transformers import GPTNeoConfig, GPTNeoForCausalLM
    c = GPTNeoConfig(num_layers=2, hidden_size=64, num_heads=4, vocab_size=VOCAB,
                     max_position_embeddings=128, attention_types=[[["global", "local"], 1]],
                     window_size=6, embed_dropout=0.0, attention_dropout=0.0,
                     resid_dropout=0.0, initializer_range=0.2, bos_token_id=None,
                     eos_token_id=None, attn_implementation="eager")
    return GPTNeoForCausalLM(c)


def mixtral():
    # A sparse mixture of experts: a router's softmax over 4 experts, the
    # top 2 per token (TopK), their weights gathered per token-expert pair
    # and applied as batched products. transformers' default experts loop
    # over the experts a batch hits (NonZero: not exportable); its
    # "batched_mm" experts are the exportable form.
    from transformers import MixtralConfig, MixtralForCausalLM
    c = MixtralConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=96,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                      max_position_embeddings=128, num_local_experts=4,
                      num_experts_per_tok=2, sliding_window=None,
                      tie_word_embeddings=False, router_jitter_noise=0.0,
                      attention_dropout=0.0, attn_implementation="eager",
                      experts_implementation="batched_mm")
    return MixtralForCausalLM(c)


def qwen3_moe():
    # Qwen3's experts: 8, the top 3 per token with their weights renormalized
    # (norm_topk_prob), and a dense MLP in every other layer.
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    c = Qwen3MoeConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                       moe_intermediate_size=48, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=16, vocab_size=VOCAB,
                       max_position_embeddings=128, num_experts=8,
                       num_experts_per_tok=3, norm_topk_prob=True,
                       decoder_sparse_step=1, mlp_only_layers=[1],
                       tie_word_embeddings=False, attention_dropout=0.0,
                       attn_implementation="eager", experts_implementation="batched_mm")
    return Qwen3MoeForCausalLM(c)


def phimoe():
    # PhiMoE's sparsemixer router picks each token's experts with ArgMax
    # (imported as a TopK of one) and masks scores with Where, Abs and a
    # ScatterElements write (a selection, exact over -inf).
    from transformers import PhimoeConfig, PhimoeForCausalLM
    c = PhimoeConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=96,
                     num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                     max_position_embeddings=128, num_local_experts=4,
                     num_experts_per_tok=2, router_jitter_noise=0.0,
                     input_jitter_noise=0.0, sliding_window=None,
                     tie_word_embeddings=False, attention_dropout=0.0,
                     attn_implementation="eager", experts_implementation="batched_mm")
    return PhimoeForCausalLM(c)


def gpt_oss():
    # GPT-OSS: attention sinks (a learned logit per head, concatenated to the
    # scores before the softmax and sliced off after it), sliding windows in
    # every other layer, YaRN's rotary scaling and clamped SwiGLU experts.
    from transformers import GptOssConfig, GptOssForCausalLM
    c = GptOssConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=48,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                     vocab_size=VOCAB, max_position_embeddings=128,
                     num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
                     layer_types=["sliding_attention", "full_attention"],
                     tie_word_embeddings=False, attention_dropout=0.0,
                     attn_implementation="eager", experts_implementation="batched_mm")
    m = GptOssForCausalLM(c)
    with torch.no_grad():
        # Sinks of either sign and size (they start at zero).
        for layer in m.model.layers:
            layer.self_attn.sinks.normal_(0.0, 1.0)
    return m


# Architectures whose layers differ from the ones above in where they
# normalize, how they position and how many key/value heads they share.
# Untied, with initializer_range 0.3 (Qwen3's q/k norms with the default
# 0.02 gave one new token, the same for every step, at every prompt seed).

def _decoder(**kw):
    """The configuration keywords of the decoders below: 2 layers, d = 64,
    4 query heads, MLP 128, untied, no padding token, initializer_range
    0.3; `kw` adds to them or replaces them."""
    base = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                num_attention_heads=4, vocab_size=VOCAB, max_position_embeddings=128,
                tie_word_embeddings=False, pad_token_id=None, initializer_range=0.3,
                attention_dropout=0.0, attn_implementation="eager")
    base.update(kw)
    return base


def qwen3():
    # Qwen3: an RMSNorm over each head's 16 features of the queries and of
    # the keys, before the rotary embedding.
    from transformers import Qwen3Config, Qwen3ForCausalLM
    return Qwen3ForCausalLM(Qwen3Config(**_decoder(num_key_value_heads=2, head_dim=16)))


def olmo2():
    # OLMo 2: an RMSNorm over the whole query and key projections (across
    # the heads: under tensor parallelism its mean spans every rank's
    # heads), and norms after the attention and the MLP instead of before.
    from transformers import Olmo2Config, Olmo2ForCausalLM
    return Olmo2ForCausalLM(Olmo2Config(**_decoder(num_key_value_heads=4)))


def cohere():
    # Cohere (Command R): attention and MLP side by side from one LayerNorm
    # without bias, the rotary embedding on interleaved pairs of features
    # (2i, 2i + 1), and the logits scaled (logit_scale 0.5).
    from transformers import CohereConfig, CohereForCausalLM
    return CohereForCausalLM(CohereConfig(**_decoder(
        num_key_value_heads=2, logit_scale=0.5, use_qk_norm=False,
        bos_token_id=None, eos_token_id=None)))


def bigcode():
    # GPT-BigCode (StarCoder 1): multi-query attention, one key/value head
    # of 16 features in the fused c_attn projection (64 + 2 x 16 columns),
    # learned positions, a tied head.
    from transformers import GPTBigCodeConfig, GPTBigCodeForCausalLM
    c = GPTBigCodeConfig(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB,
                         n_positions=128, multi_query=True,
                         initializer_range=0.3, bos_token_id=None,
                         eos_token_id=None, resid_pdrop=0.0, embd_pdrop=0.0,
                         attn_pdrop=0.0, attn_implementation="eager")
    return GPTBigCodeForCausalLM(c)


def smollm3():
    # SmolLM3: no positional embedding at all in every other layer
    # (no_rope_layer_interval 2: the second layer's attention is NoPE).
    from transformers import SmolLM3Config, SmolLM3ForCausalLM
    return SmolLM3ForCausalLM(SmolLM3Config(**_decoder(
        num_key_value_heads=2, no_rope_layer_interval=2, bos_token_id=None,
        eos_token_id=None)))


def openai_gpt():
    # OpenAI GPT (GPT-1): post-LayerNorm blocks, learned positions, the
    # scores masked as s * b + -1e4 * (1 - b) with b a slice of the layer's
    # triangle buffer, an untied head.
    from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel
    c = OpenAIGPTConfig(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB,
                        n_positions=128, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, initializer_range=0.3,
                        tie_word_embeddings=False,
                        attn_implementation="eager")
    return OpenAIGPTLMHeadModel(c)


def qwen3_5_attn():
    # Qwen3.5's attention layers alone (its Gated DeltaNet layers are not
    # attention): a sigmoid gate on each head's output, rotary on a quarter
    # of each head's 16 features, in multimodal sections interleaved along
    # them (written by a strided slice assignment: a ScatterND of run-time
    # values), q/k RMSNorms, 4 query / 2 KV heads.
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    return Qwen3_5ForCausalLM(Qwen3_5TextConfig(**_decoder(
        num_key_value_heads=2, head_dim=16, layer_types=["full_attention"] * 2,
        bos_token_id=None, eos_token_id=None)))


def falcon_alibi():
    # Falcon-RW's layout: ALiBi instead of rotary, multi-query attention,
    # attention and MLP in parallel. The scores plus ALiBi are scaled, and
    # the export folds ALiBi and the causal mask into one constant.
    from transformers import FalconConfig, FalconForCausalLM
    c = FalconConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                     new_decoder_architecture=False, multi_query=True,
                     parallel_attn=True, bias=True, alibi=True, vocab_size=VOCAB,
                     max_position_embeddings=128, initializer_range=0.3,
                     hidden_dropout=0.0, attention_dropout=0.0,
                     bos_token_id=None, eos_token_id=None,
                     tie_word_embeddings=False, attn_implementation="eager")
    return FalconForCausalLM(c)


MODELS = {"gpt2": gpt2, "llama": llama, "mistral": mistral, "mistral-sw": mistral_sw,
          "gemma3": gemma3, "qwen2": qwen2,
          "phi3": phi3, "gemma": gemma, "gemma2": gemma2, "neox": neox,
          "gptj": gptj, "opt": opt, "falcon": falcon, "codegen": codegen, "bloom": bloom,
          "olmo-clip": olmo_clip, "apertus": apertus, "minicpm3": minicpm3,
          "xglm": xglm, "mixtral": mixtral, "qwen3-moe": qwen3_moe,
          "gptneo": gptneo, "deepseek-v3": deepseek_v3, "phimoe": phimoe,
          "gpt-oss": gpt_oss, "qwen3": qwen3, "olmo2": olmo2, "cohere": cohere,
          "bigcode": bigcode, "smollm3": smollm3, "openai-gpt": openai_gpt,
          "qwen3_5-attn": qwen3_5_attn, "falcon-alibi": falcon_alibi}
# Models whose exports onnxruntime cannot run, and why; their tokens are
# still checked against the plain greedy loop in PyTorch.
NO_ONNXRUNTIME = {"falcon-alibi": "Falcon computes ALiBi in bfloat16, and "
                                  "onnxruntime's CPU provider has no bfloat16 Mul"}
# The exports of each model; the others get only "dyn".
EXPORTS = {"gpt2": ("dyn", "ts"), "llama": ("dyn", "ts"), "mixtral": ("dyn", "ts")}


class Logits(torch.nn.Module):
    """forward(input_ids) -> logits: no attention mask, no cache."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False).logits


@contextlib.contextmanager
def _no_packed_sequences():
    """As in export_variants.py: transformers looks for packed sequences in
    position_ids with torch.diff when no attention mask is given, which the
    TorchScript exporter cannot trace (no symbolic for aten::diff); our
    positions are a plain arange, for which the check finds nothing."""
    try:
        import transformers.masking_utils as mu
    except ImportError:
        yield
        return
    saved = mu.find_packed_sequence_indices
    mu.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        mu.find_packed_sequence_indices = saved


def _all_nodes(g):
    for n in g.node:
        yield n
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _all_nodes(sub)


def export(wrapper, exp, path):
    example = torch.randint(0, VOCAB, (2, 20), generator=torch.Generator().manual_seed(1))
    kw = dict(input_names=["input_ids"], output_names=["logits"])
    if exp == "dyn":
        Dim = torch.export.Dim
        shapes = {"input_ids": {0: Dim("batch", min=1, max=64),
                                1: Dim("seq", min=1, max=128)}}
        prog = torch.onnx.export(wrapper, (example,), dynamo=True, optimize=False,
                                 dynamic_shapes=shapes, **kw)
        prog.save(path)
    else:
        with _no_packed_sequences():
            torch.onnx.export(wrapper, (example,), path, dynamo=False, opset_version=17,
                              dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                            "logits": {0: "batch", 1: "seq"}}, **kw)
    # One self-contained model.onnx; the dynamo exporter's per-node stack
    # traces (this script's lines and paths) are dropped.
    m = onnx.load(path)
    for g in [m.graph] + list(m.functions):
        for n in _all_nodes(g):
            keep = [p for p in n.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
            del n.metadata_props[:]
            n.metadata_props.extend(keep)
    onnx.save(m, path)
    for f in set(os.listdir(os.path.dirname(path))) - {"model.onnx"}:
        os.remove(os.path.join(os.path.dirname(path), f))
    return m


def describe(m):
    inits = {i.name for i in m.graph.initializer}

    def dims(vi):
        return [d.dim_param if d.HasField("dim_param") else
                (d.dim_value if d.HasField("dim_value") else "?")
                for d in vi.type.tensor_type.shape.dim]
    ins = [(i.name, dims(i)) for i in m.graph.input if i.name not in inits]
    outs = [(o.name, dims(o)) for o in m.graph.output]
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    return ins, outs, opset


def greedy(model, prompt):
    """The plain greedy loop: whole sequence each step, no cache."""
    ids = list(prompt)
    margin = float("inf")
    for _ in range(MAX_NEW):
        with torch.no_grad():
            last = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]
        top = torch.topk(last, 2).values
        margin = min(margin, (top[0] - top[1]).item())
        ids.append(int(last.argmax()))
    return ids[len(prompt):], margin


def ort_check(path, wrapper, prompts, tokens):
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime not installed"
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    x = torch.randint(0, VOCAB, (1, 20), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = wrapper(x).numpy()
    got = s.run(["logits"], {"input_ids": x.numpy()})[0]
    diff = float(np.abs(got - ref).max())
    assert got.shape == ref.shape and diff < 1e-4, (got.shape, ref.shape, diff)
    # Other shapes: the dims really are dynamic.
    diff3 = 0.0
    for i, shape in enumerate([(3, 7), (1, 1), (2, 128)]):
        x3 = torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(3 + i))
        with torch.no_grad():
            ref3 = wrapper(x3).numpy()
        got3 = s.run(["logits"], {"input_ids": x3.numpy()})[0]
        d3 = float(np.abs(got3 - ref3).max())
        assert got3.shape == ref3.shape and d3 < 1e-4, (shape, got3.shape, d3)
        diff3 = max(diff3, d3)
    # The ONNX model's greedy choices over prompt + tokens are the tokens.
    for p, t in zip(prompts, tokens):
        seq = np.array([p + t], dtype=np.int64)
        lg = s.run(["logits"], {"input_ids": seq})[0][0]
        picks = lg[len(p) - 1:-1].argmax(-1).tolist()
        assert picks == t, (p, t, picks)
    return "ok: max |diff| %.2e at [1, 20], %.2e at [3, 7], [1, 1], [2, 128]; greedy tokens match" % (
        diff, diff3)


def _reproducible(info):
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack(folder, tag):
    """Packs `folder` as HERE/tag.tar.gz (unpacking to tag/), the same bytes
    from the same files; returns the archive's path."""
    tgz = os.path.join(HERE, tag + ".tar.gz")
    with open(tgz, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w") as t:
        t.add(folder, arcname=tag, filter=_reproducible)
    return tgz


def build(name):
    """The model NAME of the archives: seeded by its name, every parameter
    perturbed, without end-of-sequence token."""
    torch.manual_seed(zlib.crc32(name.encode()) % 1000)
    model = MODELS[name]()
    with torch.no_grad():
        for p in model.parameters():  # tied parameters are listed once
            p.add_(0.02 * torch.randn_like(p))
    model.eval()
    # No end-of-sequence token: generate() runs every step, and no logits
    # processor (min_new_tokens suppresses the EOS token) changes the logits.
    for c in (model.config, model.generation_config):
        c.eos_token_id = c.bos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def make(name):
    model = build(name)

    # Prompts whose greedy steps all have a clear winner and whose new tokens
    # vary: the first seed (counting up from the name's) whose smallest gap
    # between the best and second-best logit is at least MIN_MARGIN, so that
    # a compiled model's rounding cannot flip a token, and where each prompt
    # gets at least MIN_DISTINCT different new tokens.
    seed = zlib.crc32((name + "-prompts").encode())
    while True:
        g = torch.Generator().manual_seed(seed)
        prompts = [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in PROMPT_LENS]
        runs = [greedy(model, p) for p in prompts]
        margin = min(m for _, m in runs)
        distinct = min(len(set(t)) for t, _ in runs)
        if margin >= MIN_MARGIN and distinct >= MIN_DISTINCT:
            break
        print(name, "prompt seed", seed, "margin %.3g, distinct %d: next" % (margin, distinct),
              flush=True)
        seed += 1
    tokens = []
    for p in prompts:
        # An all-ones attention mask: without one generate() masks out the
        # prompt's tokens that equal pad_token_id (0).
        x = torch.tensor([p])
        with torch.no_grad():
            out = model.generate(x, attention_mask=torch.ones_like(x),
                                 max_new_tokens=MAX_NEW, do_sample=False, use_cache=True,
                                 pad_token_id=0, eos_token_id=None, min_new_tokens=MAX_NEW)
        assert out.shape == (1, len(p) + MAX_NEW), out.shape
        assert out[0, :len(p)].tolist() == p
        new = out[0, len(p):].tolist()
        plain, _ = greedy(model, p)
        assert new == plain, (name, p, new, plain)
        tokens.append(new)
    ref = {"max_new_tokens": MAX_NEW, "prompts": prompts, "tokens": tokens,
           "min_margin": margin, "prompt_seed": seed}
    print(name, "min top-1/top-2 logit margin %.3g" % margin, flush=True)

    wrapper = Logits(model).eval()
    for exp in EXPORTS.get(name, ("dyn",)):
        tag = "%s-%s" % (name, exp)
        d = os.path.join(WORK, tag)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        path = os.path.join(d, "model.onnx")
        m = export(wrapper, exp, path)
        onnx.checker.check_model(m)
        ins, outs, opset = describe(m)
        seq_sym = isinstance(ins[0][1][1], str) and isinstance(outs[0][1][1], str)
        print(tag, "opset", opset, "inputs", ins, "outputs", outs,
              "seq symbolic:", seq_sym, flush=True)
        assert seq_sym and isinstance(ins[0][1][0], str), (ins, outs)
        if name in NO_ONNXRUNTIME:
            print(tag, "onnxruntime skipped:", NO_ONNXRUNTIME[name], flush=True)
        else:
            print(tag, "onnxruntime", ort_check(path, wrapper, prompts, tokens),
                  flush=True)
        with open(os.path.join(d, "generate.json"), "w") as f:
            json.dump(ref, f, indent=1)
        tgz = pack(d, tag)
        print(tag, os.path.getsize(tgz), "bytes,", len(m.graph.node), "nodes", flush=True)


def main(argv):
    torch.set_num_threads(1)
    for name in (argv[1].split(",") if len(argv) > 1 else list(MODELS)):
        make(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
