"""Zeus's Pipeline Frequency Optimizer client API on libergon: change one import line.

    # from zeus.optimizer.pipeline_frequency import PipelineFrequencyOptimizer
    from ergon.zeus import PipelineFrequencyOptimizer

Same constructor arguments and methods as Zeus's `PipelineFrequencyOptimizer`
(docs/zeus-protocol.md section 7): rank 0 registers the job (`POST /register_job`), the id
is broadcast with `torch.distributed`, every rank registers (`POST
/register_rank/{job_id}`) with its GPU's supported SM clocks (descending) and fetches its
schedule once (`GET /schedule/{job_id}?rank=R`): one ("forward"|"backward"|..., clock) pair
per announced instruction of an iteration. `on_instruction_begin(name)` synchronises the
device (as Zeus does), checks the name against the schedule and hands the clock to
libergon's clock thread (asynchronous; unchanged clocks cost nothing), `on_step_end()`
checks that the iteration used the whole schedule and rewinds it.

Differences from Zeus, all on ergon's side of the API: HTTP goes through libergon's server
client (a lost connection or a restarting server is retried with exponential backoff, so
`ergon serve` restarting from its SQLite state is invisible); clocks are set by libergon's
client, which restores them when the process ends, also on SIGINT/SIGTERM and, through its
watchdog, on SIGKILL or a crash (Zeus's controller restores them only at a normal exit).
The GPU back-end is `ERGON_GPU` ("nvml" by default; "daemon:/run/ergond/ergond.sock" for
the privileged daemon, "sim:a100" for tests).
"""

from __future__ import annotations

import atexit
import json
import os
from typing import Optional

from ._lib import CLIENT_LOCK_MEMORY
from .client import Client
from .gpu import Gpu
from .server_client import ServerClient

__all__ = ["PipelineFrequencyOptimizer"]


def _dist():
    try:
        import torch.distributed as dist  # noqa: PLC0415
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


class PipelineFrequencyOptimizer:
    """Pipeline frequency optimizer (Zeus PFO's client API, backed by libergon)."""

    def __init__(
        self,
        rank: int,
        dp_rank: int,
        pp_rank: int,
        tp_rank: int,
        device_id: int,
        dp_degree: int,
        pp_degree: int,
        tp_degree: int,
        world_size: int,
        server_url: str,
        job_metadata: Optional[str] = None,
    ) -> None:
        dist = _dist()
        if dist is None and world_size > 1:
            raise RuntimeError("Instantiate `PipelineFrequencyOptimizer` after `init_process_group`.")
        self.server_url = server_url
        self.rank = rank
        self.dp_rank = dp_rank
        self.pp_rank = pp_rank
        self.tp_rank = tp_rank
        self.device_id = device_id
        self._torch = None
        try:
            import torch  # noqa: PLC0415

            if torch.cuda.is_available():
                torch.cuda.set_device(device_id)
                self._torch = torch
        except ImportError:
            pass

        # Schedule requests wait at the server's barrier without limit (as Zeus's client
        # does); lost connections are retried with backoff.
        self._http = ServerClient(server_url, request_timeout_s=86400.0, max_retries=8,
                                  backoff_initial_s=0.2, backoff_max_s=10.0)

        job_id = None
        if rank == 0:
            job_info = {"job_id": "", "pp_degree": pp_degree, "dp_degree": dp_degree,
                        "tp_degree": tp_degree, "world_size": world_size,
                        "job_metadata": job_metadata}
            code, text = self._http.request("POST", "/register_job",
                                            json.dumps(job_info, separators=(",", ":")))
            if code != 200:
                raise RuntimeError(f"PFO server returned status code {code}: {text}")
            job_id = json.loads(text)
            if not isinstance(job_id, str):
                raise RuntimeError(f"PFO server returned a strange job ID: {job_id=}")
        if dist is not None:
            objects = [job_id]
            dist.broadcast_object_list(objects, src=0)
            job_id = objects[0]
        self.job_id = job_id
        if self.job_id is None:
            raise RuntimeError("Failed to broadcast job ID to all ranks")

        self._gpu = Gpu(os.environ.get("ERGON_GPU", "nvml"))
        freqs = sorted(self._gpu.sm_clocks(device_id), reverse=True)
        rank_info = {"rank": rank, "dp_rank": dp_rank, "pp_rank": pp_rank, "tp_rank": tp_rank,
                     "available_frequencies": freqs}
        code, text = self._http.request("POST", f"/register_rank/{self.job_id}",
                                        json.dumps(rank_info, separators=(",", ":")))
        if code != 200:
            raise RuntimeError(f"PFO server returned status code {code}: {text}")

        # libergon's client owns the clocks: it starts at the maximum (as Zeus's
        # FrequencyController) and restores them when the process ends, however it ends.
        self._client = Client(self._gpu, device=device_id, rank=pp_rank,
                              flags=CLIENT_LOCK_MEMORY)  # memory clock at its maximum, like Zeus
        self._client.set_uniform_clock(freqs[0])
        atexit.register(self.close)

        self.freq_schedule = self._get_frequency_schedule()
        self.freq_schedule_iter = iter(self.freq_schedule)

    def _get_frequency_schedule(self) -> list[tuple[str, int]]:
        code, text = self._http.request("GET", f"/schedule/{self.job_id}?rank={self.rank}")
        if code != 200:
            raise RuntimeError(f"PFO server returned status code {code}: {text}")
        schedule = json.loads(text)
        if schedule.get("rank") != self.rank:
            raise RuntimeError(
                f"PFO server returned a schedule for rank {schedule.get('rank')} to rank {self.rank}")
        return [(str(name), int(freq)) for name, freq in schedule["frequencies"]]

    def on_step_begin(self) -> None:
        """Mark the beginning of a step (nothing to do, as in Zeus)."""

    def on_step_end(self) -> None:
        """Mark the end of a step: the whole schedule must have been used."""
        item = next(self.freq_schedule_iter, None)
        if item is not None:
            raise RuntimeError(
                "PFO server returned more frequencies than expected. "
                f"Next expected instruction and frequency is {item}")
        self.freq_schedule_iter = iter(self.freq_schedule)

    def on_instruction_begin(self, name: str) -> None:
        """Set the clock of the next instruction, which must be `name`."""
        if self._torch is not None:
            self._torch.cuda.synchronize(self.device_id)
        item = next(self.freq_schedule_iter, None)
        if item is None:
            raise RuntimeError("PFO server returned fewer frequencies than expected")
        instruction, frequency = item
        if instruction != name:
            raise RuntimeError(f"The next expected instruction is not {name}: {instruction}")
        if frequency != 0:
            self._client.set_uniform_clock(frequency)

    def on_instruction_end(self, name: str) -> None:
        """Mark the end of an instruction (nothing to do, as in Zeus)."""

    def close(self) -> None:
        """Restore the clocks and release the GPU (also at exit)."""
        client = getattr(self, "_client", None)
        if client is not None:
            self._client = None
            client.close()
        gpu = getattr(self, "_gpu", None)
        if gpu is not None:
            self._gpu = None
            gpu.close()
        http = getattr(self, "_http", None)
        if http is not None:
            self._http = None
            http.close()
