"""Data-parallel helpers over torch.distributed; plain single-process when not launched
by torchrun (no WORLD_SIZE in the environment)."""

from __future__ import annotations

import contextlib
import gc
import os

import torch
import torch.distributed as dist
from torch import nn


def cleanup() -> None:
    """Leave the process group together, so no rank exits while another still talks.

    Garbage in reference cycles (a finished trainer's DDP reducer among it) is freed
    first, while the group is alive: freed at interpreter exit instead, gloo's threads
    outlive the runtime and the rank aborts ("terminate called without an active
    exception"), about one run in twenty on two busy cores."""
    if dist.is_initialized():
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()


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


def device() -> torch.device:
    """CUDA (this rank's GPU) when available, else CPU."""
    if torch.cuda.is_available():
        index = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def native_bf16(dev: torch.device) -> bool:
    """Whether `dev` multiplies bf16 matrices natively: a GPU that does so in hardware
    (Ampere and later; torch's default check also counts emulation, which pre-Ampere
    cards such as the T4 and V100 only offer, slower than fp32), or a CPU with
    AVX512-BF16 or AMX tiles (oneDNN's bf16 kernels; elsewhere bf16 is emulated)."""
    if dev.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    cpu = getattr(torch, "cpu", None)
    return any(getattr(cpu, probe, lambda: False)()
               for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"))


def autocast(dev: torch.device, precision: str):
    """A training step's mixed precision, `precision` as resolved ("bf16" or "fp32";
    nmt.training.precision decides `auto`): bf16 autocast (weights, optimiser and loss
    stay float32), or a no-op for fp32. Validation and decoding run outside it, in fp32."""
    if precision == "bf16":
        return torch.autocast(dev.type, dtype=torch.bfloat16)
    if precision != "fp32":
        raise ValueError(f"precision {precision!r}: resolve auto first (nmt.training.precision)")
    return contextlib.nullcontext()


def shard(batches):
    """This rank's rows of every global batch (nmt.data.batching.Batches.shard): rank r
    takes sentences r, r+n, r+2n... of every batch with at least n of them.

    Every rank sees the same sequence of global batches, so N processes with a
    token budget per batch compute the same update as one process with it.
    """
    return batches.shard(rank(), world_size())


def barrier() -> None:
    if world_size() > 1:
        dist.barrier()


def broadcast(value):
    """Rank 0's Python value on every rank."""
    if world_size() == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_sums(*values: float) -> tuple[float, ...]:
    """Each value summed over the ranks (float64), in one all-reduce."""
    if world_size() == 1:
        return tuple(float(v) for v in values)
    on = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    tensor = torch.tensor(values, dtype=torch.float64, device=on)
    dist.all_reduce(tensor)
    return tuple(tensor.tolist())


def wrap(model: nn.Module) -> nn.Module:
    """DistributedDataParallel around `model` when running under torchrun."""
    if world_size() == 1:
        return model
    ids = [model_device(model).index] if model_device(model).type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids, find_unused_parameters=True)


def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device
