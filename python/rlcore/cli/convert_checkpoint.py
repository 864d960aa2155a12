"""``rlcore convert-checkpoint OLD_DIR NEW_DIR``: convert a trusted checkpoint of the old pickle
format (before 0.2) into the current one. It is the one place in rlcore that unpickles an old
checkpoint, and only on this explicit request."""


from __future__ import annotations

import argparse
import os
import pickle
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlcore.cli.common import UsageError
from rlcore.errors import CheckpointError
from rlcore.trainers.checkpoint import MANIFEST, VERSION, save


class _SaveWith:
    """An object whose ``save(path)`` calls ``write(path)`` (what :func:`save` needs of a buffer)."""

    def __init__(self, write: Callable[[Path], None]) -> None:
        self.save = write


def _no_reward(*args: Any) -> np.ndarray:
    raise RuntimeError("placeholder compute_reward of a converted checkpoint's buffer")


def _buffer_from_state(state: Mapping[str, Any]) -> Any:
    """A local rlcore buffer holding an old ``buffer.pkl`` state (to write it in the save format)."""
    import rlcore

    cfg = state["config"]
    kind, capacity, num_envs = cfg["kind"], int(cfg["capacity"]), int(cfg["num_envs"])
    buf: Any
    if kind == "replay":
        buf = rlcore.ReplayBuffer(capacity, num_envs=num_envs)
    elif kind == "prioritized":
        buf = rlcore.PrioritizedReplayBuffer(
            capacity, num_envs=num_envs, alpha=cfg["alpha"], beta=cfg["beta"], eps=cfg["eps"]
        )
    elif kind == "her":
        per = {k: cfg[k] for k in ("alpha", "beta", "eps")} if cfg.get("prioritized") else {}
        threshold = cfg.get("distance_threshold")
        buf = rlcore.HERReplayBuffer(
            capacity,
            num_envs=num_envs,
            strategy=cfg["strategy"],
            future_k=cfg["future_k"],
            # callables are never saved: the trainer's own buffer brings its compute_reward
            compute_reward=_no_reward if threshold is None else None,
            distance_threshold=threshold,
            goal_keys=tuple(cfg["goal_keys"]),
            prioritized=bool(cfg.get("prioritized")),
            **per,
        )
    else:
        raise CheckpointError(f"old buffer.pkl holds an unknown buffer kind {kind!r}")
    buf.load_state_dict(state)
    return buf


def _old_buffer(state: Mapping[str, Any]) -> _SaveWith:
    """``save(path)`` writing an old ``buffer.pkl`` state in the buffer's save format (a local
    buffer, or a sharded one as :meth:`rlcore.distributed.ShardedReplayBuffer.save` writes it)."""
    cfg = state["config"]
    if cfg.get("kind") == "sharded":
        from rlcore.distributed.shard_files import save_shard_dirs

        shards = [_buffer_from_state(s) for s in state["shards"]]
        writers = [shard.save for shard in shards]
        return _SaveWith(lambda path: save_shard_dirs(path, num_envs=int(cfg["num_envs"]), writers=writers))
    return _SaveWith(_buffer_from_state(state).save)


def _old_rng(old: Mapping[str, Any]) -> dict[str, Any]:
    rng: dict[str, Any] = {}
    if old.get("torch_rng") is not None:
        rng["torch"] = old["torch_rng"]
    if old.get("cuda_rng") is not None:
        rng["cuda"] = list(old["cuda_rng"])
    return rng


def _split_envs(part: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """A collector/sampler state of the old format without its pickled sub-envs, and those (unpickled)."""
    part = dict(part)
    blob = part.pop("envs", None)
    envs = pickle.loads(blob) if blob is not None else None  # noqa: S301 - `convert`: explicit trust
    return part, envs


def convert(old: str | os.PathLike[str], new: str | os.PathLike[str]) -> Path:
    """Convert a checkpoint of the old pickle format at ``old`` into this format at ``new``.

    This UNPICKLES ``old/trainer.pt`` and ``old/buffer.pkl`` (``torch.load(weights_only=False)``,
    ``pickle.load``), which runs any code they contain: convert only checkpoints you trust. It is
    the one place in rlcore that does so, and only on this explicit request. The env snapshot of
    the old collector/sampler state, if any, becomes ``env_state.pkl`` (still loaded only with
    ``trust_env_state=True``).

    Raises:
        CheckpointError: ``old`` is not an old-format checkpoint, or ``new`` is not empty.
        FileNotFoundError: ``old`` has no ``trainer.pt``.
    """
    old_root, new_root = Path(old), Path(new)
    if (old_root / MANIFEST).is_file():
        raise CheckpointError(f"{old_root} is already a checkpoint of format {VERSION}: nothing to convert")
    if not (old_root / "trainer.pt").is_file():
        raise FileNotFoundError(f"no old-format checkpoint in {old_root} (no trainer.pt)")
    if new_root.exists() and (not new_root.is_dir() or any(new_root.iterdir())):
        raise CheckpointError(f"{new_root} exists and is not an empty directory: choose a new one")
    trained = torch.load(old_root / "trainer.pt", weights_only=False, map_location="cpu")  # noqa: S614 - explicit trust
    if not isinstance(trained, dict) or "algorithm" not in trained:
        raise CheckpointError(f"{old_root}/trainer.pt is not an rlcore trainer checkpoint")
    buffer_state = None
    if (old_root / "buffer.pkl").is_file():
        with open(old_root / "buffer.pkl", "rb") as f:
            buffer_state = pickle.load(f)  # noqa: S301 - `convert`: explicit trust
    rng = _old_rng(trained)
    info = {"config": trained.get("config"), "converted_from": str(old_root)}
    buffer = None if buffer_state is None else _old_buffer(buffer_state)
    if "collector" in trained:
        collector, envs = _split_envs(trained["collector"])
        return save(
            new_root,
            trainer="off-policy",
            state={"algorithm": trained["algorithm"], "collector": collector, "rng": rng},
            counters={
                "iteration": int(trained["iteration"]),
                "env_steps": int(collector["env_steps"]),
                "grad_steps": int(trained["grad_steps"]),
                "grad_credit": float(trained["grad_credit"]),
                "evaluations": int(trained["evaluations"]),
                "buffer_beta": trained.get("buffer_beta"),
            },
            buffer=buffer,
            env_state=envs,
            info=info,
        )
    if "sampler" in trained:
        sampler, envs = _split_envs(trained["sampler"])
        return save(
            new_root,
            trainer="on-policy",
            state={"algorithm": trained["algorithm"], "sampler": sampler, "rng": rng},
            counters={
                "iteration": int(trained["iteration"]),
                "env_steps": int(sampler["env_steps"]),
                "grad_steps": int(trained["grad_steps"]),
                "evaluations": int(trained["evaluations"]),
            },
            env_state=envs,
            info=info,
        )
    if "dist" in trained:
        shards = (buffer_state or {}).get("shards") or [{}]
        beta = shards[0].get("config", {}).get("beta")
        return save(
            new_root,
            trainer="distributed",
            state={"algorithm": trained["algorithm"], "rng": rng},
            counters={
                "iteration": int(trained["iteration"]),
                "env_steps": int(trained["env_steps"]),
                "episodes": 0,
                "grad_steps": int(trained["grad_steps"]),
                "grad_credit": float(trained["grad_credit"]),
                "evaluations": 0,
                "buffer_beta": None if beta is None else float(beta),
            },
            buffer=buffer,
            info={**info, "dist": trained.get("dist")},
        )
    return save(
        new_root,
        trainer="offline",
        state={"algorithm": trained["algorithm"], "rng": rng},
        counters={
            "iteration": int(trained["iteration"]),
            "grad_steps": int(trained["grad_steps"]),
            "evaluations": int(trained["evaluations"]),
        },
        info=info,
    )


def convert_checkpoint_command(args: argparse.Namespace) -> int:
    """``rlcore convert-checkpoint OLD_DIR NEW_DIR``; returns the exit status."""
    print(
        f"rlcore: unpickling {args.old}/trainer.pt and buffer.pkl: this runs any code they "
        "contain; convert only checkpoints you trust",
        file=sys.stderr,
    )
    try:
        out = convert(args.old, args.new)
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise UsageError(str(e)) from e
    print(f"converted {args.old} -> {out}")
    return 0
