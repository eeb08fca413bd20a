"""Data-parallel helpers over torch.distributed; plain single-process when not launched
by torchrun (no WORLD_SIZE in the environment)."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def is_main() -> bool:
    return rank() == 0


def setup() -> None:
    """Join the process group when launched by torchrun: NCCL on CUDA, gloo on CPU."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)


def shard(batches: list) -> list:
    """This rank's share of an epoch's batches (every rank gets the same count)."""
    n = world_size()
    if n == 1:
        return batches
    usable = len(batches) - len(batches) % n
    return batches[rank():usable:n]


def all_sum(value: int) -> int:
    if world_size() == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.long)
    dist.all_reduce(tensor)
    return int(tensor.item())


def wrap(model: nn.Module) -> nn.Module:
    """DistributedDataParallel around `model` when running under torchrun."""
    if world_size() == 1:
        return model
    return nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
