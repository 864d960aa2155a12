"""A trained agent from its run directory: :func:`load_policy` and the :class:`TrainedPolicy` it returns.

Three lines act with the policy that ``rlcore train`` saved (``RUN_DIR/config.json`` says which
algorithm, env and configuration; ``RUN_DIR/checkpoint`` holds the weights)::

    policy = rlcore.load_policy("runs/CartPole-v1-ppo-s0")
    obs, _ = env.reset(seed=0)
    act = policy(obs)                      # one observation in, one action out (numpy)

Acting is the evaluation protocol of the trainers: the deterministic policy (greedy Q-values, the
Gaussian's mean, the categorical's mode). ``rlcore enjoy RUN_DIR`` runs it on the env for N
episodes (:mod:`rlcore.collect.evaluate`) and can record videos. Nothing from the run directory
runs as code: the checkpoint's ``trainer.pt`` is read with ``torch.load(weights_only=True)``
(:mod:`rlcore.trainers.checkpoint`); its env snapshot is never read.

A policy travels without its run directory as one small file of weights
(:meth:`TrainedPolicy.save`, ``rlcore export-policy RUN_DIR FILE.npz``): a NumPy ``.npz`` of the
acting networks only (no critic, no optimizer, no buffer: a MuJoCo SAC actor is ~0.3 MB) and the
run's configuration as JSON text; ``load_policy("FILE.npz")`` reads it with ``allow_pickle=False``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlcore.errors import ApiUsageError
from rlcore.trainers import checkpoint as ckpt_format

__all__ = ["POLICY_FILE_VERSION", "TrainedPolicy", "load_policy", "make_eval_envs", "run_info"]

_ON_POLICY = ("vpg", "a2c", "ppo")

ACTING_PARTS = ("encoder", "actor", "q_net", "policy")
"""The networks an algorithm acts with, by attribute name (each algorithm has the ones it uses:
SAC/TD3/DDPG ``encoder`` and ``actor``, DQN/R2D2 ``encoder`` and ``q_net``, PPO/A2C/VPG/BC
``policy``); a policy file holds these and nothing else."""

POLICY_FILE_VERSION = 1
"""Format version of a policy file (:meth:`TrainedPolicy.save`)."""

_META_KEY = "__rlcore_policy__"


def run_info(run_dir: str | Path) -> dict[str, Any]:
    """``RUN_DIR/config.json`` of a run of ``rlcore train``, checked to come with a checkpoint.

    Raises:
        FileNotFoundError: ``run_dir`` holds no ``config.json`` or no checkpoint (``checkpoint/``).
    """
    run_dir = Path(run_dir)
    cfg_path, ckpt_dir = run_dir / "config.json", run_dir / "checkpoint"
    if not cfg_path.is_file() or not ckpt_format.is_checkpoint(ckpt_dir):
        missing = cfg_path if not cfg_path.is_file() else ckpt_dir
        raise FileNotFoundError(f"{run_dir} is not a run directory of `rlcore train` ({missing} is missing)")
    info: dict[str, Any] = json.loads(cfg_path.read_text())
    return info


def make_eval_envs(
    env_id: str, num_envs: int = 1, *, render_mode: str | None = None, wrappers: tuple[Any, ...] = ()
) -> gym.vector.VectorEnv:
    """The evaluation envs of a run on ``env_id``, as the trainers build them: gymnasium's
    ``SyncVectorEnv`` of ``num_envs`` envs (:func:`rlcore.envs.make_vec`; the robotics ids
    registered on demand); an Atari game with DQN's preprocessing, whole games and the raw score
    (:func:`rlcore.envs.atari.make_atari_vec`). ``render_mode`` and ``wrappers`` (applied to each
    sub-env, e.g. gymnasium's ``RecordVideo``) are for gymnasium ids that are not Atari games.

    Raises:
        ApiUsageError: an unknown id, a missing optional dependency, or ``render_mode``/``wrappers``
            with an Atari game.
    """
    from rlcore.envs.atari import is_atari, make_atari_vec
    from rlcore.envs.make import make_vec

    if is_atari(env_id):
        if render_mode is not None or wrappers:
            raise ApiUsageError(f"{env_id}: rendering and videos are for non-Atari envs")
        return make_atari_vec(env_id, num_envs, clip_reward=False, terminal_on_life_loss=False)
    kwargs = {"render_mode": render_mode} if render_mode is not None else None
    envs = make_vec(env_id, num_envs, wrappers=wrappers, make_kwargs=kwargs)
    assert isinstance(envs, gym.vector.VectorEnv)
    return envs


def _single_obs(obs: Any, space: gym.Space) -> bool:
    """Whether ``obs`` is one observation of ``space`` (rather than a batch of them)."""
    if isinstance(space, gym.spaces.Dict):
        key = next(iter(space.spaces))
        return _single_obs(obs[key], space.spaces[key])
    shape = space.shape if space.shape is not None else ()
    return np.ndim(obs) == len(shape)


class TrainedPolicy:
    """The deterministic policy of a trained run (:func:`load_policy`): ``policy(obs) -> act``.

    ``obs`` is one observation of the env (shape ``O``, or a dict of arrays for goal envs) or a
    batch of N of them (``[N, *O]``); the action is one action (an int64 scalar for ``Discrete``,
    float32 ``[A]`` for ``Box``) or N of them (int64 ``[N]``, float32 ``[N, A]``), numpy in and
    out, on whichever device the networks live. ``Box`` actions are clipped to the action space's
    bounds. A recurrent policy (R2D2) carries its state from call to call for a batch of the same
    size: call :meth:`reset` before each new episode.

    Attributes:
        algorithm: the algorithm object (``rlcore.algos``), with its networks on ``device``.
        algo: the algorithm's name as ``rlcore train --algo`` takes it.
        env_id: the gymnasium id the run trained on.
        observation_space: one env's observation space.
        action_space: one env's action space.
    """

    def __init__(
        self,
        algorithm: Any,
        *,
        algo: str,
        env_id: str,
        observation_space: gym.Space,
        action_space: gym.Space,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        self.algorithm = algorithm
        self.algo = algo
        self.env_id = env_id
        self.observation_space = observation_space
        self.action_space = action_space
        self._info = dict(info or {})
        self._state: np.ndarray | None = None

    @property
    def recurrent(self) -> bool:
        """Whether the policy carries a state between calls (R2D2)."""
        return self.algo == "r2d2"

    def reset(self) -> None:
        """Forget a recurrent policy's state: the next call starts an episode (no-op otherwise)."""
        self._state = None

    def __call__(self, obs: Any) -> np.ndarray:
        single = _single_obs(obs, self.observation_space)
        if single:
            obs = (
                {k: np.asarray(v)[None] for k, v in obs.items()}
                if isinstance(obs, Mapping)
                else np.asarray(obs)[None]
            )
        if self.recurrent:
            n = len(np.asarray(obs))
            if self._state is None or len(self._state) != n:
                self._state = self.algorithm.initial_state(n)
            act, self._state = self.algorithm.act(obs, self._state, deterministic=True)
        else:
            act = self.algorithm.act(obs, deterministic=True)
        act = np.asarray(act)
        if isinstance(self.action_space, gym.spaces.Box):
            act = np.clip(act, self.action_space.low, self.action_space.high).astype(np.float32)
        return act[0] if single else act

    def save(
        self, path: str | Path, *, overwrite: bool = False, meta: Mapping[str, Any] | None = None
    ) -> Path:
        """Write the acting networks to one ``.npz`` file that :func:`load_policy` reads back.

        The file holds each network of :data:`ACTING_PARTS` the algorithm has, as float arrays named
        ``PART/PARAM`` (``actor/net.0.weight``, ...; observation normalisers' statistics included),
        and under ``__rlcore_policy__`` a JSON text: the format version, the algorithm, the env id,
        the algorithm's configuration (to rebuild the networks' shapes) and ``meta``. It is written
        to a temporary file beside ``path`` and renamed over it, so a failed save leaves no partial
        file and whatever was there before.

        Args:
            path: the file to write (``.npz`` is appended when missing).
            overwrite: replace an existing file (default: refuse).
            meta: JSON-able facts to keep with the weights (e.g. steps, eval return, command).

        Returns:
            the path written.

        Raises:
            FileExistsError: ``path`` exists and ``overwrite`` is false.
            ValueError: the algorithm has none of :data:`ACTING_PARTS`, or ``meta`` is not JSON-able.
        """
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_name(path.name + ".npz")
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} exists (pass overwrite=True to replace it)")
        arrays = {
            f"{part}/{key}": tensor.detach().cpu().numpy()
            for part, module in _acting_modules(self.algorithm).items()
            for key, tensor in module.state_dict().items()
        }
        if not arrays:
            raise ValueError(
                f"{type(self.algorithm).__name__} has none of the acting networks {ACTING_PARTS}"
            )
        header = {
            "version": POLICY_FILE_VERSION,
            "algo": self.algo,
            "env_id": self.env_id,
            "info": self._info,
            "meta": dict(meta or {}),
        }
        try:
            text = json.dumps(header)
        except TypeError as e:
            raise ValueError(f"meta is not JSON-able: {e}") from e
        arrays[_META_KEY] = np.array(text)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    def __repr__(self) -> str:
        return (
            f"TrainedPolicy({self.algo} on {self.env_id}, device={getattr(self.algorithm, 'device', 'cpu')})"
        )


def _config(cfg_cls: Any, values: Mapping[str, Any]) -> Any:
    """A frozen algorithm config from ``config.json``'s dict (lists back to tuples, unknown keys of
    other versions left out)."""
    fields = {f.name for f in dataclasses.fields(cfg_cls)}
    return cfg_cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in fields})


def _build(
    name: str, info: Mapping[str, Any], obs_space: gym.Space, act_space: gym.Space, device: Any
) -> Any:
    """The algorithm of run ``info`` with fresh networks of the right shapes, on ``device``."""
    from rlcore import algos
    from rlcore.algos.bc import BC, BCConfig

    off_policy: dict[str, tuple[Any, Any]] = {
        "dqn": (algos.DQN, algos.DQNConfig),
        "ddpg": (algos.DDPG, algos.DDPGConfig),
        "td3": (algos.TD3, algos.TD3Config),
        "sac": (algos.SAC, algos.SACConfig),
        "r2d2": (algos.R2D2, algos.R2D2Config),
        "bc": (BC, BCConfig),
    }
    on_policy: dict[str, tuple[Any, Any]] = {
        "vpg": (algos.VPG, algos.VPGConfig),
        "a2c": (algos.A2C, algos.A2CConfig),
        "ppo": (algos.PPO, algos.PPOConfig),
    }
    if name in off_policy:
        algo_cls, cfg_cls = off_policy[name]
        return algo_cls.from_spaces(
            obs_space, act_space, _config(cfg_cls, info["algo_config"]), device=device
        )
    num_envs = int(info.get("num_envs") or 1)
    if name in on_policy:
        algo_cls, cfg_cls = on_policy[name]
        config = _config(cfg_cls, info["algo_config"])
        return algo_cls.from_spaces(obs_space, act_space, config, num_envs=num_envs, device=device)
    if name == "gail":  # the generator (a PPO) acts; the discriminator is for training only
        config = _config(algos.PPOConfig, info["ppo_config"])
        return algos.PPO.from_spaces(obs_space, act_space, config, num_envs=num_envs, device=device)
    if name == "dac":  # the generator (a SAC) acts; the discriminator is for training only
        return algos.SAC.from_spaces(obs_space, act_space, _config(algos.SACConfig, info["sac_config"]), device=device)
    raise ValueError(f"unknown algorithm {name!r} (rlcore train's algorithms: dqn ... ppo, r2d2, bc, gail, dac)")


def load_policy(source: str | Path, *, device: str = "cpu") -> TrainedPolicy:
    """The trained policy of a run directory written by ``rlcore train`` (any algorithm), or of a
    policy file written by :meth:`TrainedPolicy.save` / ``rlcore export-policy``.

    From a run directory: reads ``RUN_DIR/config.json`` (algorithm, env, configuration) and the
    weights in ``RUN_DIR/checkpoint`` (the latest checkpoint: the end of the run, or where it
    stopped). From a ``.npz`` policy file: its JSON header and its acting networks, read with
    ``numpy.load(allow_pickle=False)``. The networks are built for the run's env
    (``gymnasium.make`` of its id, Atari games with their preprocessing) and loaded without running
    code from the files.

    Args:
        source: the run directory (``runs/ENV-ALGO-sSEED``, or ``--out``) or a policy file (``.npz``).
        device: torch device of the networks: ``"cpu"`` (default), ``"cuda"``, ``"cuda:1"``, or
            ``"auto"`` (cuda when available). Observations and actions stay numpy either way.

    Returns:
        a :class:`TrainedPolicy`: ``policy(obs) -> act``, one observation or a batch.

    Raises:
        FileNotFoundError: no ``config.json`` or no checkpoint in the run directory; no such file.
        CheckpointError: the checkpoint or policy file is damaged or holds more than data, or its
            weights do not fit the configuration it describes.
        ApiUsageError: the run's env is unknown here (e.g. an optional extra is missing).
        ValueError: the run's algorithm is unknown.
    """
    from rlcore.algos.common import resolve_device

    source = Path(source)
    if source.is_file():
        return _load_policy_file(source, resolve_device(device))
    run_dir = source
    info = run_info(run_dir)
    state = ckpt_format.load(run_dir / "checkpoint").part("algorithm")  # refused here unless it is data
    args = info["args"]
    name, env_id = str(args["algo"]), str(args["env"])
    obs_space, act_space = _spaces(env_id)
    algorithm = _build(name, info, obs_space, act_space, resolve_device(device))
    if name in ("gail", "dac"):  # the generator's state
        state = state["generator"]
    where = run_dir / "checkpoint"
    with _weights_fit(f"{where}: its weights do not fit the {name} that config.json describes"):
        algorithm.load_state_dict(state)
    return TrainedPolicy(
        algorithm,
        algo=name,
        env_id=env_id,
        observation_space=obs_space,
        action_space=act_space,
        info=_portable(info),
    )


def _acting_modules(algorithm: Any) -> dict[str, Any]:
    """The networks of :data:`ACTING_PARTS` that ``algorithm`` has and that hold weights or statistics
    (an identity encoder holds none)."""
    modules = {part: getattr(algorithm, part, None) for part in ACTING_PARTS}
    return {part: m for part, m in modules.items() if hasattr(m, "state_dict") and m.state_dict()}


def _portable(info: Mapping[str, Any]) -> dict[str, Any]:
    """What a policy file keeps of a run's ``config.json``: enough to rebuild the networks."""
    keys = ("algo_config", "ppo_config", "sac_config", "num_envs")
    return {
        "args": {"algo": info["args"]["algo"], "env": info["args"]["env"]},
        **{k: info[k] for k in keys if k in info},
    }


def _spaces(env_id: str) -> tuple[gym.Space[Any], gym.Space[Any]]:
    """The single observation and action spaces of ``env_id``'s evaluation env."""
    envs = make_eval_envs(env_id, 1)
    spaces = envs.single_observation_space, envs.single_action_space
    envs.close()
    return spaces


@contextlib.contextmanager
def _weights_fit(message: str) -> Iterator[None]:
    """Turn whatever loading a ``state_dict`` that does not fit raises into a ``CheckpointError``:
    ``message`` and the first line of the error."""
    from rlcore.errors import CheckpointError

    try:
        yield
    except Exception as e:  # noqa: BLE001 - whatever a state_dict that does not fit raises
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CheckpointError(f"{message}: {type(e).__name__}: {first}") from e


def _load_policy_file(path: Path, device: Any) -> TrainedPolicy:
    """:func:`load_policy` of a ``.npz`` policy file."""
    import torch

    from rlcore.errors import CheckpointError

    try:
        with open(path, "rb") as f:  # our handle: numpy leaves its own open when a zip is damaged
            loaded = np.load(f, allow_pickle=False)
            if not isinstance(loaded, np.lib.npyio.NpzFile):
                raise ValueError("a single array, not an .npz archive")
            arrays = {k: loaded[k] for k in loaded.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:  # pickled objects raise ValueError
        raise CheckpointError(f"{path}: not a policy file of rlcore ({type(e).__name__}: {e})") from e
    if _META_KEY not in arrays:
        raise CheckpointError(f"{path}: not a policy file of rlcore (no {_META_KEY} entry)")
    try:
        header = json.loads(str(arrays.pop(_META_KEY)))
        version, name, env_id, info = header["version"], header["algo"], header["env_id"], header["info"]
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: its {_META_KEY} header is damaged ({type(e).__name__}: {e})") from e
    if version != POLICY_FILE_VERSION:
        raise CheckpointError(
            f"{path}: policy file version {version!r}; this rlcore reads version {POLICY_FILE_VERSION}"
        )
    obs_space, act_space = _spaces(env_id)
    algorithm = _build(name, info, obs_space, act_space, device)
    parts: dict[str, dict[str, Any]] = {}
    for key, array in arrays.items():
        part, _, param = key.partition("/")
        parts.setdefault(part, {})[param] = torch.from_numpy(np.ascontiguousarray(array))
    expected = set(_acting_modules(algorithm))
    if set(parts) != expected:
        raise CheckpointError(
            f"{path}: holds the networks {sorted(parts)}, a {name} acts with {sorted(expected)}"
        )
    with _weights_fit(f"{path}: its weights do not fit the {name} its header describes"):
        for part, state in parts.items():
            getattr(algorithm, part).load_state_dict(state)
    return TrainedPolicy(
        algorithm, algo=name, env_id=env_id, observation_space=obs_space, action_space=act_space, info=info
    )
