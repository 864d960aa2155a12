"""The committed expert policies (experts/, issue 40): the manifest describes each file as it is, and
each file loads with ``rlcore.load_policy`` and still plays its env at its recorded level."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import rlcore

EXPERTS = Path(__file__).resolve().parent.parent / "experts"
MANIFEST = json.loads((EXPERTS / "manifest.json").read_text(encoding="utf-8"))["experts"]


def test_manifest_lists_every_file_once() -> None:
    listed = sorted(e["file"] for e in MANIFEST)
    assert listed == sorted(p.name for p in EXPERTS.glob("*.npz"))
    assert len(set(listed)) == len(listed)


@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["file"])
def test_manifest_matches_the_file(entry: dict) -> None:
    path = EXPERTS / entry["file"]
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert len(data) == entry["bytes"] < 1_000_000  # the "well under 1 MB"
    with np.load(path, allow_pickle=False) as z:
        header = json.loads(str(z["__rlcore_policy__"]))
        assert not any(k.startswith("critic") for k in z.files)  # acting networks only
    meta = header["meta"]
    assert (header["env_id"], header["algo"]) == (entry["env"], entry["algo"])
    for key in ("seed", "env_steps", "eval_return_mean", "eval_return_std", "eval_episodes"):
        assert meta[key] == entry[key], key
    assert entry["run_command"] in meta["command"].replace(" --no-progress --seed", " --seed")


@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["file"])
def test_expert_plays_at_its_recorded_level(entry: dict) -> None:
    """One deterministic episode of the loaded policy on the real env returns at least 80 % of the
    mean its run's last evaluation recorded (10 episodes)."""
    pytest.importorskip("mujoco")
    policy = rlcore.load_policy(EXPERTS / entry["file"])
    env = gym.make(entry["env"])
    obs, _ = env.reset(seed=123)
    total, done = 0.0, False
    while not done:
        obs, rew, terminated, truncated, _ = env.step(policy(obs))
        total += float(rew)
        done = terminated or truncated
    env.close()
    assert total >= 0.8 * entry["eval_return_mean"], total
