"""GPU: sample(256) onto a CUDA device, and the throughput of SAC updates on it.

Measured only when ``torch.cuda.is_available()``; otherwise every case is skipped with the reason
"not measured (no CUDA device)" and the report says so.

- *sample(256) to device*: rlcore samples into pinned host memory (``sample(out=...)`` with numpy
  views of pinned torch tensors, made once) and copies with ``.to(device, non_blocking=True)``;
  "rlcore (to_torch, pageable)" samples into fresh arrays and copies them; SB3's ``ReplayBuffer(device=...)``
  returns device tensors; Tianshou samples a ``Batch`` and calls ``to_torch(device=...)``; TorchRL
  keeps its ``LazyTensorStorage`` on the device (a gather on the GPU, no host copy). Every call
  ends with ``torch.cuda.synchronize()``, so the time includes the copy.
- *SAC update*: one gradient step (sample 256 + critic, actor and temperature steps, 256x256
  MLPs, Pendulum-v1 spaces) — rlcore ``SAC.update`` on a batch sampled as above, SB3
  ``SAC.train(gradient_steps=1)``. The report turns the time per call into updates per second.

The ``make_*`` functions take the device, so the same code is exercised on CPU by the test suite.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import (
    BATCH,
    build_or_skip,
    build_rlcore,
    build_sb3,
    build_tianshou,
    require,
    stream,
    tag,
    torchrl_td,
)

GPU_SAMPLE_LIBS = ["rlcore (pinned out=)", "rlcore (to_torch, pageable)", "sb3", "tianshou", "torchrl"]
GPU_SAC_LIBS = ["rlcore", "sb3"]
SAMPLE_CAPACITY = 200_000
SAC_FILL = 10_000
FIELDS = ("obs", "act", "rew", "obs_next", "terminated", "truncated", "discount", "indices")


def cuda_or_skip() -> str:
    """``"cuda"`` when a CUDA device is usable, else skip with the report's wording."""
    torch = require("torch")
    if not torch.cuda.is_available():
        pytest.skip("not measured (no CUDA device)")
    return "cuda"


def pinned_sampler(buf: Any, batch: int, device: str, pin: bool) -> Any:
    """A zero-argument callable: ``buf.sample(batch, out=...)`` into host tensors (pinned when
    ``pin``), then an asynchronous copy to ``device``; returns a TransitionBatch of device tensors."""
    import torch
    from rlcore.batch import TransitionBatch

    proto = buf.sample(batch)
    host = {f: torch.from_numpy(np.array(getattr(proto, f))) for f in FIELDS}
    if pin:
        host = {f: t.pin_memory() for f, t in host.items()}
    out = TransitionBatch(**{f: host[f].numpy() for f in FIELDS}, weights=None, extras={})
    for f in FIELDS:  # the views share the tensors' memory
        assert getattr(out, f).__array_interface__["data"][0] == host[f].data_ptr()

    def sample() -> Any:
        buf.sample(batch, out=out)
        return TransitionBatch(
            **{f: host[f].to(device, non_blocking=True) for f in FIELDS}, weights=None, extras={}
        )

    return sample


def make_sample_to_device(lib: str, device: str) -> tuple[Any, str]:
    """(op, note): op samples 256 rows onto ``device`` and waits for the copy."""
    import torch

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    if lib.startswith("rlcore"):
        buf = build_rlcore(SAMPLE_CAPACITY)
        if lib == "rlcore (pinned out=)":
            sample = pinned_sampler(buf, BATCH, device, pin=device.startswith("cuda"))
            note = "sample(out=) into pinned host tensors, .to(device, non_blocking=True)"
        else:

            def sample() -> Any:
                return buf.sample(BATCH).to_torch(device)

            note = "sample() then to_torch(device) from pageable memory"

        def op() -> Any:
            b = sample()
            sync()
            return b

        return op, note
    if lib == "sb3":
        from stable_baselines3.common.buffers import ReplayBuffer

        host = build_sb3(SAMPLE_CAPACITY)
        buf = ReplayBuffer(SAMPLE_CAPACITY, host.observation_space, host.action_space, device=device)
        for k in ("observations", "next_observations", "actions", "rewards", "dones", "timeouts"):
            setattr(buf, k, getattr(host, k))
        buf.full, buf.pos = True, 0

        def op_sb3() -> Any:
            b = buf.sample(BATCH)
            sync()
            return b

        return op_sb3, "ReplayBuffer(device=...): numpy gather, th.tensor(...).to(device)"
    if lib == "tianshou":
        buf = build_tianshou(SAMPLE_CAPACITY)

        def op_ts() -> Any:
            b, _ = buf.sample(BATCH)
            b.to_torch_(device=device)
            sync()
            return b

        return op_ts, "sample, then Batch.to_torch_(device=...)"
    if lib == "torchrl":
        from torchrl.data import LazyTensorStorage, ReplayBuffer

        require("torchrl")
        buf = ReplayBuffer(storage=LazyTensorStorage(SAMPLE_CAPACITY, device=device), batch_size=BATCH)
        buf.extend(torchrl_td(stream(SAMPLE_CAPACITY), [SAMPLE_CAPACITY]))

        def op_trl() -> Any:
            b = buf.sample()
            sync()
            return b

        return op_trl, "LazyTensorStorage on the device: the gather runs there, no host copy"
    raise AssertionError(lib)


def pendulum_data(n: int, seed: int = 11) -> dict[str, np.ndarray]:
    """``n`` steps shaped like Pendulum-v1's (obs 3, act 1 float32), 200-step truncated episodes."""
    rng = np.random.default_rng(seed)
    all_obs = rng.uniform(-1, 1, (n + 1, 3)).astype(np.float32)
    trunc = np.zeros(n, bool)
    trunc[199::200] = True
    return {
        "obs": all_obs[:-1],
        "obs_next": all_obs[1:],
        "act": rng.uniform(-2, 2, (n, 1)).astype(np.float32),
        "rew": rng.uniform(-16, 0, n).astype(np.float32),
        "terminated": np.zeros(n, bool),
        "truncated": trunc,
    }


def make_sac_update(lib: str, device: str) -> tuple[Any, str]:
    """(op, note): op is one SAC gradient step (sample 256 included) on ``device``."""
    import gymnasium as gym
    import torch

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    env = gym.make("Pendulum-v1")
    d = pendulum_data(SAC_FILL)
    if lib == "rlcore":
        import rlcore
        from rlcore.algos.sac import SAC, SACConfig

        torch.manual_seed(0)
        sac = SAC.from_spaces(
            env.observation_space, env.action_space, SACConfig(hidden=(256, 256)), device=device
        )
        buf = rlcore.ReplayBuffer.from_arrays(
            d["obs"], d["act"], d["rew"], d["terminated"], d["truncated"], d["obs_next"], seed=0
        )
        sample = pinned_sampler(buf, BATCH, device, pin=device.startswith("cuda"))

        def op() -> Any:
            stats = sac.update(sample())
            sync()
            return stats

        return op, "SAC.update on a pinned-memory batch; 256x256 MLPs, twin critics, learned alpha"
    if lib == "sb3":
        from stable_baselines3 import SAC as SB3SAC
        from stable_baselines3.common.logger import Logger

        model = SB3SAC(
            "MlpPolicy",
            env,
            batch_size=BATCH,
            policy_kwargs={"net_arch": [256, 256]},
            device=device,
            seed=0,
            verbose=0,
        )
        model.set_logger(Logger(folder=None, output_formats=[]))
        rb = model.replay_buffer
        n = SAC_FILL
        rb.observations[:n, 0] = d["obs"]
        rb.next_observations[:n, 0] = d["obs_next"]
        rb.actions[:n, 0] = d["act"] / 2.0  # SB3 stores actions rescaled to [-1, 1]
        rb.rewards[:n, 0] = d["rew"]
        rb.dones[:n, 0] = d["truncated"]
        rb.timeouts[:n, 0] = d["truncated"]
        rb.pos = n

        def op_sb3() -> None:
            model.train(gradient_steps=1, batch_size=BATCH)
            sync()

        return op_sb3, "SAC.train(gradient_steps=1): its buffer's sample + the same update"
    raise AssertionError(lib)


@pytest.mark.parametrize("lib", GPU_SAMPLE_LIBS)
def test_gpu_sample_to_device(benchmark: Any, lib: str) -> None:
    tag(benchmark, f"GPU: sample({BATCH}) to the device", lib, capacity=SAMPLE_CAPACITY)
    device = cuda_or_skip()
    op, note = build_or_skip(lib, lambda: make_sample_to_device(lib, device))
    op()
    tag(benchmark, f"GPU: sample({BATCH}) to the device", lib, note, capacity=SAMPLE_CAPACITY)
    benchmark(op)


@pytest.mark.parametrize("lib", GPU_SAC_LIBS)
def test_gpu_sac_update(benchmark: Any, lib: str) -> None:
    tag(benchmark, f"GPU: SAC update, batch {BATCH}", lib)
    device = cuda_or_skip()
    op, note = build_or_skip(lib, lambda: make_sac_update(lib, device))
    for _ in range(5):  # cuDNN/cuBLAS handles, allocator warm-up
        op()
    tag(benchmark, f"GPU: SAC update, batch {BATCH}", lib, note)
    benchmark(op)
