#!/usr/bin/env python3
"""train.py: Megatron-core's real pipeline schedules (get_forward_backward_func(): 1F1B, and
interleaved 1F1B with V model chunks per rank) with ergon's hooks on every forward and backward
(ergon.integration.megatron). One process per pipeline rank, gloo, on the CPU (cpu_shim: the
two CUDA allocations of Megatron's schedule path go to the CPU; see the module docstring):

    torchrun --standalone --nproc-per-node 4 train.py --schedule interleaved --microbatches 8
    torchrun ... train.py --schedule interleaved --microbatches 8 --plan plan.json

--schedule 1f1b or interleaved (V = --chunks, default 2), --microbatches M, --plan an ergon
JSON plan whose clocks the client applies (default: all at the top clock). Each rank writes the
order its hooks saw, the losses, time and energy to OUT/result-RANK.json.
The model: P*V stages of a small residual MLP language model (token embedding on the first
stage, LM head and cross-entropy on the last), activations [sequence, microbatch, hidden]
as Megatron passes them.
"""
import argparse
import datetime
import functools
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
if not os.environ.get("ERGON_LIBRARY"):     # a source tree's build, unless one is installed
    _lib = os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "libergon.so.0")
    if os.path.exists(_lib):
        os.environ["ERGON_LIBRARY"] = _lib
warnings.filterwarnings("ignore", message=".*Transformer Engine and Apex.*")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from megatron.core import parallel_state  # noqa: E402
from megatron.core.enums import ModelType  # noqa: E402
from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: E402
from megatron.core.pipeline_parallel import get_forward_backward_func  # noqa: E402

import ergon  # noqa: E402
from ergon.integration.megatron import MegatronHooks  # noqa: E402

VOCAB, HIDDEN, SEQ = 128, 32, 8


class StageModel(nn.Module):
    """Pipeline stage s of NS: what Megatron's schedule needs of a model chunk is
    `config`, `model_type` and set_input_tensor()."""

    def __init__(self, config, s, NS, seed):
        super().__init__()
        torch.manual_seed(seed * 1000 + s)
        self.config, self.model_type = config, ModelType.encoder_or_decoder
        self.first, self.last = s == 0, s == NS - 1
        if self.first:
            self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.fc1, self.fc2 = nn.Linear(HIDDEN, 2 * HIDDEN), nn.Linear(2 * HIDDEN, HIDDEN)
        if self.last:
            self.head = nn.Linear(HIDDEN, VOCAB)
        self.input_tensor = None

    def set_input_tensor(self, t):
        self.input_tensor = t[0] if isinstance(t, (list, tuple)) else t

    def forward(self, ids):
        x = self.embed(ids).transpose(0, 1).contiguous() if self.first else self.input_tensor
        x = x + self.fc2(F.gelu(self.fc1(x)))
        return self.head(x) if self.last else x


class Data:
    """Microbatch n of the run on its n-th call (the same on every rank and chunk)."""

    def __init__(self, mbs, seed):
        self.mbs, self.seed, self.n = mbs, seed, 0

    def __iter__(self):
        return self

    def __next__(self):
        g = torch.Generator().manual_seed(self.seed * 1000003 + self.n)
        self.n += 1
        seq = torch.randint(0, VOCAB, (self.mbs, SEQ + 1), generator=g)
        return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def loss_func(labels, logits):
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.transpose(0, 1).reshape(-1))
    return loss, {"lm loss": loss.detach()}


def forward_step_func(data_iterator, model):
    ids, labels = next(data_iterator)
    return model(ids), functools.partial(loss_func, labels)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--schedule", default="1f1b", choices=["1f1b", "interleaved"])
    p.add_argument("--microbatches", type=int, default=4, help="M")
    p.add_argument("--plan", default="", help="an ergon JSON plan: its clocks")
    p.add_argument("--chunks", type=int, default=2, help="V of the interleaved schedule")
    p.add_argument("--microbatch-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--p2p-timeout", type=float, default=5.0)
    p.add_argument("--sim-model", default="bert-large")
    p.add_argument("--out", default="", help="directory for result-RANK.json")
    p.add_argument("--log-dir", default=None, help="the ergon client logs (instructions-R.csv: "
                   "the clock each instruction ran at; each waits for its clock at begin)")
    return p.parse_args(argv)


def build_pipeline(args, P, rank, V):
    """Megatron's model-parallel state for P ranks with V chunks each, this rank's chunks and
    Megatron's forward-backward function for them."""
    vp = None if V == 1 else V
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=1, pipeline_model_parallel_size=P,
        virtual_pipeline_model_parallel_size=vp)
    config = TransformerConfig(
        num_layers=P * V, hidden_size=HIDDEN, num_attention_heads=1,
        pipeline_model_parallel_size=P, virtual_pipeline_model_parallel_size=vp,
        pipeline_dtype=torch.float32, batch_p2p_comm=False,
        deallocate_pipeline_outputs=False)
    if "microbatch_group_size_per_vp_stage" in config.__dict__ and vp:
        config.microbatch_group_size_per_vp_stage = P
    model = [StageModel(config, c * P + rank, P * V, args.seed) for c in range(V)]
    return model, get_forward_backward_func(pp_size=P, vp_size=vp)


def train(args, client, hooks, fb, model, M, plan, top):
    """args.steps batches of M microbatches through fb (hooks.wrap of Megatron's function) at
    the plan's clocks (or all at top): what the hooks saw, the losses (on every rank)."""
    V, P = len(model), dist.get_world_size()
    params = [q for m in model for q in m.parameters()]
    opt = torch.optim.SGD(params, lr=args.lr)
    if plan:
        client.load_plan(plan, dist.get_rank())
    else:
        client.set_uniform_clock(top)
    client.sync(10.0)
    data = [Data(args.microbatch_size, args.seed) for _ in range(V)]
    changes0 = client.clock_changes
    orders, losses, steps, waits = [], [], [], []
    for _ in range(args.steps):
        out = fb(forward_step_func=forward_step_func,
                 data_iterator=data if V > 1 else data[0],
                 model=model if V > 1 else model[0], num_microbatches=M,
                 seq_length=SEQ, micro_batch_size=args.microbatch_size,
                 forward_only=False)
        opt.step()
        opt.zero_grad(set_to_none=True)
        orders.append(hooks.last_order)
        waits.append(sum(sum(v) for v in (hooks.last_waits or {}).values()))
        steps.append(hooks.last_step)
        if out:                 # the last stage: one dict per microbatch
            tot = torch.zeros((), dtype=torch.float32)
            for d in out:
                tot = tot + d["lm loss"]
            losses.append(float(tot))
    client.sync(10.0)
    changes = client.clock_changes - changes0
    box = [losses]
    dist.broadcast_object_list(box, src=P - 1)
    losses = box[0]
    if dist.get_rank() == 0:
        print("megatron %-11s V=%d M=%d %-6s losses %s" % (
            "1f1b" if V == 1 else "interleaved", V, M, "plan" if plan else "max",
            " ".join("%.6f" % x for x in losses)), flush=True)
    return dict(M=M, plan=plan, V=V, orders=orders, losses=losses,
                loss_hex=[x.hex() for x in losses], steps=steps, clock_changes=changes,
                recv_wait_s=waits)


def run_train(args, client, gpu, rank, P):
    V = 1 if args.schedule == "1f1b" else args.chunks
    model, fb = build_pipeline(args, P, rank, V)
    hooks = MegatronHooks(client)
    r = train(args, client, hooks, hooks.wrap(fb), model, args.microbatches, args.plan,
              max(gpu.sm_clocks(rank)))
    parallel_state.destroy_model_parallel()
    return dict(r, rank=rank, P=P, schedule=args.schedule)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.p2p_timeout))
    rank, P = dist.get_rank(), dist.get_world_size()
    gpu = ergon.Gpu("sim:a100:%s:%d" % (args.sim_model, P))
    # The simulated GPU computes on the CPU: each instruction starts once its clock is set
    # (CLIENT_WAIT_CLOCK), and the log records that clock (freq_run).
    client = ergon.Client(gpu, device=rank, rank=rank, log_dir=args.log_dir,
                          flags=ergon.CLIENT_WAIT_CLOCK)
    try:
        res = run_train(args, client, gpu, rank, P)
    finally:
        client.close()
        gpu.close()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "result-%d.json" % rank), "w") as f:
            json.dump(res, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
