#!/usr/bin/env python3
"""PyTorch's distributed training on the CPU, the peers of pcc's layouts:
bench/dist.sh calls it (issue 52).

usage: python dist_peers.py DIR --size LxHxN --layout ddp|fsdp2|pp
                            [--ranks R] [--threads N] [--steps K]
                            [--microbatches M] [--split S] [--timeout S]

DIR is what export_gpt2.py wrote (model.onnx, input_0.pb, state.pt); --size
is the size it was exported at (12x768x12 for GPT-2 124M). R processes
(default 2; torch.multiprocessing.start_processes, forked), each torch.set_num_threads(N)
(default 1), join one gloo process group over the loopback and train the
same model from the same weights on DIR/input_0.pb, the global batch
[B, T], with AdamW (lr 1e-3, weight decay 0.01, betas 0.9 / 0.999, eps
1e-8: pcc's defaults) on the causal-LM loss pcc's --train compiles (the mean
cross-entropy of logits[:, :-1] against input_ids[:, 1:], peers.lm_loss):
  ddp    torch.nn.parallel.DistributedDataParallel (buckets of 25 MB, its
         default); rank r trains rows [r B/R, (r + 1) B/R) of the batch.
         The mean of the ranks' losses is the whole batch's.
  fsdp2  torch.distributed.fsdp.fully_shard on every transformer block and
         then on the whole model (parameters, gradients and AdamW's state
         split over the ranks and gathered per block: ZeRO 3); the batch
         split as ddp's.
  pp     torch.distributed.pipelining: R stages, GPT-2's blocks cut into R
         runs as even as they go (or S blocks on the first stage, --split S,
         with R = 2), the embeddings on the first, the final norm and the LM
         head on the last, PipelineStage and Schedule1F1B over M
         microbatches (default 4) of the whole batch; the loss is each
         microbatch's mean and the schedule divides the gradients by M, so
         the step's gradient is the whole batch's mean, as pcc's. GPT-2's
         LM head is the word embedding (tied): the first and the last stage
         each hold a copy, and after the schedule their two gradients are
         all-reduced between those two ranks before the update (Megatron's
         embedding group, and what pcc's pipelines do), so the copies stay
         equal.

Each step is timed on every rank (zero_grad, forward, loss, backward, the
gradients' collectives and the AdamW update); the step's time is the slowest
rank's. Prints one line:
  RESULT <layout> <median ms of steps 2..K> <min ms> <loss of step 1> <loss of step K>
where a step's loss is the whole batch's (pcc prints the same for its steps).
Any failure of a rank ends all of them and exits non-zero.
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import tempfile
import time

import onnx
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from onnx import numpy_helper

from export_gpt2 import build
from peers import lm_loss


def read_ids(d):
    t = onnx.TensorProto()
    with open(os.path.join(d, "input_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    return torch.from_numpy(numpy_helper.to_array(t).copy()).long()


def vocab_of(d):
    graph = onnx.load(os.path.join(d, "model.onnx"),
                      load_external_data=False).graph
    return int(graph.output[0].type.tensor_type.shape.dim[2].dim_value)


def load_model(a):
    model = build(a.vocab, a.size)
    model.load_state_dict(torch.load(os.path.join(a.dir, "state.pt")))
    model.train()
    return model


def adamw(params):
    return torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                             weight_decay=0.01)


def causal_mask(t, dtype):
    """The additive causal mask GPT2Model passes its blocks (eager
    attention): 0 on and below the diagonal, the lowest float above."""
    return torch.full((t, t), torch.finfo(dtype).min, dtype=dtype).triu(1)[None, None]


class FirstStage(torch.nn.Module):
    """The word and position embeddings and GPT-2's first blocks."""

    def __init__(self, model, blocks):
        super().__init__()
        self.wte = model.transformer.wte
        self.wpe = model.transformer.wpe
        self.h = torch.nn.ModuleList(blocks)

    def forward(self, ids):
        t = ids.shape[1]
        h = self.wte(ids) + self.wpe(torch.arange(t, device=ids.device))[None]
        mask = causal_mask(t, h.dtype)
        for block in self.h:
            h = block(h, attention_mask=mask)
        return h


class MiddleStage(torch.nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.h = torch.nn.ModuleList(blocks)

    def forward(self, h):
        mask = causal_mask(h.shape[1], h.dtype)
        for block in self.h:
            h = block(h, attention_mask=mask)
        return h


class LastStage(MiddleStage):
    """GPT-2's last blocks, the final norm and the LM head (logits)."""

    def __init__(self, model, blocks):
        super().__init__(blocks)
        self.ln_f = model.transformer.ln_f
        self.lm_head = model.lm_head

    def forward(self, h):
        return self.lm_head(self.ln_f(super().forward(h)))


def cuts(layers, stages, split):
    if split:
        if stages != 2:
            raise SystemExit("dist_peers.py: --split needs 2 ranks")
        return [0, split, layers]
    return [layers * s // stages for s in range(stages + 1)]


def check_stages(model, ids, bounds):
    """The stages, run one after another, give the whole model's logits
    (the same mask, the same blocks): a check of the split, once."""
    blocks = list(model.transformer.h)
    with torch.no_grad():
        ref = model(ids).logits
        h = FirstStage(model, blocks[:bounds[1]])(ids)
        for s in range(1, len(bounds) - 2):
            h = MiddleStage(blocks[bounds[s]:bounds[s + 1]])(h)
        got = LastStage(model, blocks[bounds[-2]:])(h)
    diff = (got - ref).abs().max().item()
    if not diff <= 1e-4 * max(1.0, ref.abs().max().item()):
        raise SystemExit(f"dist_peers.py: the pipeline's stages differ from the "
                         f"model by {diff} in the logits")


def data_parallel_step(rank, world, model, ids):
    """The step of a data-parallel wrapper of the model (DDP, FSDP2): this
    rank's rows of the batch, AdamW; returns its share of the batch's mean
    loss."""
    opt = adamw(model.parameters())
    b = ids.shape[0] // world
    local = ids[rank * b:(rank + 1) * b]

    def step():
        opt.zero_grad(set_to_none=True)
        loss = lm_loss(model(local).logits, local)
        loss.backward()
        opt.step()
        return loss.item() / world
    return step


def setup_ddp(a, rank, world, model, ids):
    from torch.nn.parallel import DistributedDataParallel
    return data_parallel_step(rank, world, DistributedDataParallel(model), ids)


def setup_fsdp2(a, rank, world, model, ids):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,))
    for block in model.transformer.h:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return data_parallel_step(rank, world, model, ids)


def setup_pp(a, rank, world, model, ids):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B
    blocks = list(model.transformer.h)
    bounds = cuts(len(blocks), world, a.split)
    if min(bounds[s + 1] - bounds[s] for s in range(world)) < 1:
        raise SystemExit("dist_peers.py: fewer blocks than stages")
    check_stages(model, ids[:1], bounds)
    mine = blocks[bounds[rank]:bounds[rank + 1]]
    first, last = rank == 0, rank == world - 1
    if first:
        mod = FirstStage(model, mine)
    elif last:
        mod = LastStage(model, mine)
    else:
        mod = MiddleStage(mine)
    # Every rank creates the tied weight's group (new_group is collective).
    tied_group = dist.new_group([0, world - 1])
    tied = mod.wte.weight if first else mod.lm_head.weight if last else None
    stage = PipelineStage(mod, rank, world, torch.device("cpu"))
    sched = Schedule1F1B(stage, n_microbatches=a.microbatches,
                         loss_fn=lm_loss, scale_grads=True)
    opt = adamw(mod.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        losses = []
        if first:
            sched.step(ids, return_outputs=False)
        elif last:
            sched.step(target=ids, losses=losses, return_outputs=False)
        else:
            sched.step(return_outputs=False)
        if tied is not None:
            # The word embedding's gradient (first stage) and the LM head's
            # (last stage) are two parts of one tied parameter's.
            dist.all_reduce(tied.grad, group=tied_group)
        opt.step()
        return sum(l.item() for l in losses) / len(losses) if last else 0.0
    return step


SETUP = {"ddp": setup_ddp, "fsdp2": setup_fsdp2, "pp": setup_pp}


def worker(rank, a, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks,
                            timeout=datetime.timedelta(seconds=a.timeout))
    try:
        torch.manual_seed(0)
        ids = read_ids(a.dir)
        if a.layout != "pp" and ids.shape[0] % a.ranks:
            raise SystemExit(f"dist_peers.py: batch {ids.shape[0]} does not "
                             f"split over {a.ranks} ranks")
        if a.layout == "pp" and ids.shape[0] % a.microbatches:
            raise SystemExit(f"dist_peers.py: batch {ids.shape[0]} does not "
                             f"split into {a.microbatches} microbatches")
        step = SETUP[a.layout](a, rank, a.ranks, load_model(a), ids)
        times, losses = [], []
        for _ in range(a.steps):
            t = time.perf_counter()
            part = step()
            ms = (time.perf_counter() - t) * 1e3
            # After the timer: the slowest rank's time, the whole batch's loss.
            got = [torch.zeros(2, dtype=torch.float64) for _ in range(a.ranks)]
            dist.all_gather(got, torch.tensor([ms, part], dtype=torch.float64))
            times.append(max(g[0].item() for g in got))
            losses.append(sum(g[1].item() for g in got))
        if rank == 0:
            with open(out, "w") as f:
                json.dump({"times": times, "losses": losses}, f)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--size", required=True, help="LAYERSxHIDDENxHEADS or small")
    ap.add_argument("--layout", required=True, choices=sorted(SETUP))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--split", type=int, default=0,
                    help="pp: blocks on the first of 2 stages (default half)")
    ap.add_argument("--timeout", type=int, default=600,
                    help="seconds a rank may wait in one collective")
    a = ap.parse_args()
    a.dir = os.path.abspath(a.dir)
    a.vocab = vocab_of(a.dir)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    fd, out = tempfile.mkstemp(prefix="dist_peers-", suffix=".json")
    os.close(fd)
    try:
        # join=True: a rank's exception ends the others and raises here.
        # Forked, the ranks start with torch and transformers imported (the
        # parent has run no torch op, so no thread pool is copied).
        mp.start_processes(worker, args=(a, free_port(), out), nprocs=a.ranks,
                           join=True, start_method="fork")
        with open(out) as f:
            r = json.load(f)
    finally:
        os.unlink(out)
    times = r["times"][1:] or r["times"]
    print(f"RESULT {a.layout} {statistics.median(times):.1f} {min(times):.1f} "
          f"{r['losses'][0]:.6f} {r['losses'][-1]:.6f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
