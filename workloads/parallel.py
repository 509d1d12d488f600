"""DDP and FSDP wrappers whose collectives are blocking and timed as the step's "comm" phase.

comm_s in steps/*.jsonl is the time a rank spends inside gradient and parameter collectives,
waiting for its peers included (the BUNDLE.md definition: time blocked on collectives).
To make that time attributable, the collectives run synchronously where the framework would
overlap them with compute: DDP's bucket all-reduce (a comm hook) and FSDP's parameter
all-gather and gradient reduce-scatter (custom comms). The overlap this gives up is small
for a model this size and keeps comm_s an exact measurement rather than an estimate.
"""

# No `from __future__ import annotations`: DDP checks the comm hook's annotations as live objects.
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Literal

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FSDPModule, fully_shard

# The comm interfaces FSDPModule.set_custom_all_gather/_reduce_scatter accept; torch is pinned.
from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter
from torch.nn.parallel import DistributedDataParallel

from workloads.steps import Phase

Strategy = Literal["ddp", "fsdp"]
STRATEGIES: tuple[Strategy, ...] = ("ddp", "fsdp")
# StepTimer.phase: the collectives below run inside phase("comm").
PhaseClock = Callable[[Phase], AbstractContextManager[None]]


def distribute(model: nn.Module, strategy: Strategy, phase: PhaseClock, device: torch.device) -> nn.Module:
    """`model` (already on `device`) wrapped for data-parallel training in the current process group."""
    if strategy == "ddp":
        ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        ddp.register_comm_hook(phase, _timed_all_reduce)
        return ddp
    # One FSDP unit for the whole model: it is tiny, and one unit means one all-gather and one
    # reduce-scatter per step, both timed by the comms below.
    sharded = fully_shard(model)
    assert isinstance(sharded, FSDPModule)
    sharded.set_custom_all_gather(_TimedAllGather(phase))
    sharded.set_custom_reduce_scatter(_TimedReduceScatter(phase))
    return model


def _timed_all_reduce(phase: PhaseClock, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP's default averaging all-reduce of one gradient bucket, run to completion inside the comm phase."""
    gradients = bucket.buffer().div_(dist.get_world_size())
    with phase("comm"):
        dist.all_reduce(gradients)
    done: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    done.set_result(gradients)
    return done


def _empty(size: Sequence[int | torch.SymInt], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.empty(*size, dtype=dtype, device=device)


class _TimedAllGather(AllGather):
    def __init__(self, phase: PhaseClock) -> None:
        self._phase = phase

    def allocate(self, size: Sequence[int | torch.SymInt], *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return _empty(size, dtype, device)

    def __call__(
        self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: dist.ProcessGroup, async_op: bool = False
    ) -> dist.Work | None:
        # Blocking even when FSDP asks for async_op (prefetch): no Work returned means "already done".
        with self._phase("comm"):
            dist.all_gather_single(output_tensor, input_tensor, group=group)
        return None


class _TimedReduceScatter(ReduceScatter):
    def __init__(self, phase: PhaseClock) -> None:
        self._phase = phase

    def allocate(self, size: Sequence[int | torch.SymInt], *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return _empty(size, dtype, device)

    def __call__(
        self,
        output_tensor: torch.Tensor,
        input_tensor: torch.Tensor,
        group: dist.ProcessGroup,
        op: object,
        async_op: bool = False,
    ) -> dist.Work | None:
        with self._phase("comm"):
            dist.reduce_scatter_single(output_tensor, input_tensor, op=op, group=group)
        return None
