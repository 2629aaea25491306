"""torch_runtime.py: the example's model on PyTorch's own pipeline runtime
(torch.distributed.pipelining, torch >= 2.4; the venv's torch 2.15 from `make py-deps`).

Each rank wraps its pipeline stages (models.build_stages, split into P*V stages and placed as
libergon places them, which is also PyTorch's placement: loop s mod P, or V shape for zbv and
dualpipev) in `PipelineStage` objects and builds the real schedule class
(ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B, ScheduleLoopedBFS,
ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble, ScheduleDualPipeV); an iteration is one
`schedule.step(...)`; ergon's hooks (ergon.integration.torch_pipelining.TorchPipeliningHooks) wrap the
stages' forward/backward methods. Used by train.py (`--runtime torch`) and by the test
tests/e2e/torch_pipelining_check.py.
"""
import torch

import models


class TorchPipeline:
    """One rank's part of a pipeline run by torch.distributed.pipelining.

    `placement[s]` = rank of pipeline stage s (ergon.rank_order's placement); the model is
    split into len(placement) stages from one seed, so every rank and every run starts from
    the same weights. `hooks_factory(stages)` (optional) returns ergon's hooks for this
    rank's PipelineStage objects (called once per reset)."""

    def __init__(self, model, schedule_name, placement, rank, microbatch_size, seed, lr,
                 group=None):
        self.model, self.name = model, schedule_name
        self.placement = list(placement)
        self.rank = rank
        self.NS = len(self.placement)
        self.local = [s for s in range(self.NS) if self.placement[s] == rank]
        self.data = models.SyntheticData(model, microbatch_size, seed)
        self.seed, self.lr, self.group = seed, lr, group
        self.schedule = self.stages = self.hooks = None

    def reset(self, M, hooks_factory=None):
        """Fresh weights (same seed), PipelineStage objects and schedule for M microbatches."""
        from ergon.integration.torch_pipelining import schedule_class
        if self.hooks is not None:
            self.hooks.close()
            self.hooks = None
        self.M = M
        mods = models.build_stages(self.model, self.NS, self.seed)
        from torch.distributed.pipelining import PipelineStage
        self.modules = {s: mods[s] for s in self.local}
        self.stages = []
        for s in self.local:
            self.modules[s].train()
            self.stages.append(PipelineStage(self.modules[s], s, self.NS, torch.device("cpu"),
                                             group=self.group))
        self.opts = [torch.optim.SGD(self.modules[s].parameters(), lr=self.lr, momentum=0.9)
                     for s in self.local]
        cls = schedule_class(self.name)
        data = self.data

        # loss/M per microbatch and no scaling by the schedule (scale_grads=False): the
        # gradients accumulate exactly as in train.py's own loop and its one-process
        # reference, so all three give bitwise the same losses.
        def loss_fn(out, target):
            return data.loss(out, target) / M

        if cls.__name__ in ("ScheduleGPipe", "Schedule1F1B"):
            if len(self.stages) != 1:
                raise SystemExit("%s runs one stage per rank (got %d)" % (cls.__name__,
                                                                         len(self.stages)))
            self.schedule = cls(self.stages[0], n_microbatches=M, loss_fn=loss_fn,
                                scale_grads=False)
        else:
            self.schedule = cls(self.stages, n_microbatches=M, loss_fn=loss_fn,
                                scale_grads=False)
        if hooks_factory is not None:
            self.hooks = hooks_factory(self.stages)
        return self

    def run_step(self, step):
        """One iteration (schedule.step) and the optimizer step; the iteration loss (sum of
        the microbatches' loss/M, in microbatch order) on the rank holding the last stage,
        else None."""
        M = self.M
        mbs = [self.data.microbatch(step, mb, M) for mb in range(M)]
        kw = {}
        if 0 in self.local:
            kw["arg_mbs"] = [(x,) for x, _ in mbs]
        last = self.NS - 1 in self.local
        losses = [] if last else None
        if last:
            kw["target_mbs"] = [t for _, t in mbs]
        self.schedule.step(losses=losses, return_outputs=False, **kw)
        for o in self.opts:
            o.step()
            o.zero_grad(set_to_none=True)
        if not last:
            return None
        if len(losses) != M:
            raise RuntimeError("schedule returned %d losses for %d microbatches"
                               % (len(losses), M))
        total = torch.zeros((), dtype=torch.float32)
        for l in losses:
            total = total + l.detach()
        return float(total)

    def close(self):
        if self.hooks is not None:
            self.hooks.close()
            self.hooks = None
