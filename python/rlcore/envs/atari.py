"""Atari 2600 games (the Arcade Learning Environment, ``ale-py``) set up as DQN trains on them.

One game env is built from gymnasium's own wrappers plus three small ones of rlcore's, innermost
first:

1. ``gym.make(env_id, frameskip=1)``: the raw game (ALE ids ``ALE/Breakout-v5`` etc.; the v5 ids
   repeat the previous action with probability 0.25 on every frame, "sticky actions", Machado et
   al. 2018; ``repeat_action_probability`` overrides that).
2. gymnasium's ``AtariPreprocessing``: up to ``noop_max`` random no-ops at reset, ``frame_skip``
   frames per agent step with the max of the last two frames, grayscale, resize to
   ``screen_size`` x ``screen_size``, uint8 (Mnih et al. 2015, "Methods: preprocessing").
3. :class:`FireOnLifeStart`: presses FIRE at the start of every life (reset and after a lost
   life) in games that have a FIRE action. Breakout does not launch the ball until FIRE is pressed:
   a greedy policy that never learned to press it would stand still until the 108k-frame limit.
4. :class:`EndEpisodeOnLifeLoss` (``terminal_on_life_loss=True``; training envs): a lost life ends
   the learner's episode (``terminated=True``), the game goes on. The next reset continues the
   game, it restarts only after a game over (Mnih et al. 2015, "Methods: training details").
   gymnasium's own ``AtariPreprocessing(terminal_on_life_loss=True)`` restarts the whole game at
   every lost life instead, so the agent would only ever play first lives.
5. reward clipping (``clip_reward=True``; training envs): the sign of the reward, -1, 0 or +1
   (gymnasium's ``TransformReward`` with ``numpy.sign``). Evaluation envs keep the game score.
6. gymnasium's ``FrameStackObservation``: the last ``frame_stack`` frames, uint8
   ``[frame_stack, screen_size, screen_size]``; at reset padded with copies of the reset frame.

Training and evaluation: :func:`make_atari_vec` makes N such envs through
:func:`rlcore.envs.make_vec` (gymnasium ``SyncVectorEnv``/``AsyncVectorEnv``, NEXT_STEP autoreset),
with the training settings by default; evaluation envs are ``clip_reward=False,
terminal_on_life_loss=False`` (whole games, raw score). ``backend="envpool"`` makes the same
preprocessing from EnvPool's C++ Atari envs instead (:func:`make_atari_vec` says what differs).

Needs the optional ``atari`` extra (``ale-py`` ships the ROMs; ``AtariPreprocessing``
resizes with OpenCV, ``opencv-python-headless``).
"""

from __future__ import annotations

import functools
from typing import Any, Literal, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TransformReward

from rlcore.envs.make import make_vec
from rlcore.errors import ApiUsageError, InvalidValueError

__all__ = [
    "EndEpisodeOnLifeLoss",
    "FireOnLifeStart",
    "is_atari",
    "make_atari",
    "make_atari_vec",
    "register_atari",
]


def register_atari() -> bool:
    """Register ale-py's ids (``ALE/Breakout-v5``, ``BreakoutNoFrameskip-v4``, ...) with gymnasium;
    ``False`` when ale-py is not installed."""
    try:
        import ale_py
    except ImportError:
        return False
    gym.register_envs(ale_py)
    return True


def is_atari(env_id: str) -> bool:
    """Whether ``env_id`` is an ALE game (an ``ALE/...`` id, or any id whose entry point is
    ale-py's ``AtariEnv``, e.g. ``BreakoutNoFrameskip-v4``). ``ALE/...`` ids count even when
    ale-py is missing, so that the caller can say which extra to install."""
    if env_id.startswith("ALE/"):
        return True
    if env_id not in gym.registry:
        register_atari()
    spec = gym.registry.get(env_id)
    return spec is not None and str(spec.entry_point).startswith("ale_py")


def _lives(env: gym.Env[Any, Any]) -> int:
    return int(env.unwrapped.ale.lives())  # type: ignore[attr-defined]


class FireOnLifeStart(gym.Wrapper[Any, Any, Any, Any]):
    """Press FIRE at the start of every life: once after each reset, and once after every step that
    lost a life without ending the game (that step then returns the frame after FIRE, and its
    reward includes FIRE's). Games without a FIRE action pass through unchanged.

    Wrap *outside* ``AtariPreprocessing`` (FIRE then lasts one agent step, ``frame_skip`` frames).
    The reward of the FIRE after a reset is dropped (0 in the games that need it).
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        meanings = list(env.unwrapped.get_action_meanings())  # type: ignore[attr-defined]
        self.fire_action: int | None = meanings.index("FIRE") if "FIRE" in meanings else None
        self._lives = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        if self.fire_action is not None:
            obs, _, terminated, truncated, info = self.env.step(self.fire_action)
            if terminated or truncated:  # cannot happen in a sane game; start over once
                obs, info = self.env.reset(options=options)
        self._lives = _lives(self.env)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, rew, terminated, truncated, info = self.env.step(action)
        lives = _lives(self.env)
        if self.fire_action is not None and lives < self._lives and not (terminated or truncated):
            obs, fire_rew, terminated, truncated, info = self.env.step(self.fire_action)
            rew = float(rew) + float(fire_rew)
            lives = _lives(self.env)
        self._lives = lives
        return obs, rew, terminated, truncated, info


class EndEpisodeOnLifeLoss(gym.Wrapper[Any, Any, Any, Any]):
    """A lost life ends the episode for the learner (``terminated=True``) while the game goes on.

    ``reset`` after such an end returns the last observation without touching the game (its info
    has ``"lives"``); after a game over or a truncation it resets the game. Episode returns of a
    training env with this wrapper are returns per life; evaluate on an env without it.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self._lives = 0
        self._game_over = True
        self._last_obs: Any = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if self._game_over or seed is not None:
            obs, info = self.env.reset(seed=seed, options=options)
            self._game_over = False
        else:
            obs, info = self._last_obs, {"lives": _lives(self.env)}
        self._lives = _lives(self.env)
        self._last_obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, rew, terminated, truncated, info = self.env.step(action)
        self._game_over = bool(terminated or truncated)
        lives = _lives(self.env)
        if 0 < lives < self._lives:
            terminated = True
        self._lives = lives
        self._last_obs = obs
        return obs, rew, terminated, truncated, info


def _reward_sign(rew: SupportsFloat) -> float:
    return float(np.sign(float(rew)))


def _check_options(frame_skip: int, frame_stack: int, screen_size: int, noop_max: int) -> None:
    for name, value, low in (
        ("frame_skip", frame_skip, 1),
        ("frame_stack", frame_stack, 1),
        ("screen_size", screen_size, 1),
        ("noop_max", noop_max, 0),
    ):
        if value < low:
            raise InvalidValueError(f"{name} must be >= {low}, got {value}")


def _game_kwargs(env_id: str, repeat_action_probability: float | None) -> dict[str, Any]:
    if not register_atari():
        raise ApiUsageError(f"{env_id} needs ale-py and OpenCV: pip install -e '.[atari]'")
    if env_id not in gym.registry:
        raise ApiUsageError(f"unknown Atari environment {env_id!r} (ale-py's ids: ALE/Breakout-v5, ...)")
    kwargs: dict[str, Any] = {"frameskip": 1}
    if repeat_action_probability is not None:
        if not 0.0 <= repeat_action_probability <= 1.0:
            raise InvalidValueError(
                f"repeat_action_probability must be in [0, 1], got {repeat_action_probability}"
            )
        kwargs["repeat_action_probability"] = repeat_action_probability
    return kwargs


def wrap_atari(
    env: gym.Env[Any, Any],
    *,
    frame_skip: int = 4,
    frame_stack: int = 4,
    screen_size: int = 84,
    noop_max: int = 30,
    clip_reward: bool = True,
    terminal_on_life_loss: bool = False,
    fire_on_life_start: bool = True,
) -> gym.Env[Any, Any]:
    """Wrap a raw ALE env made with ``frameskip=1`` as the module docstring lists (2-6); the
    arguments are :func:`make_atari`'s."""
    env = AtariPreprocessing(
        env, noop_max=noop_max, frame_skip=frame_skip, screen_size=screen_size, terminal_on_life_loss=False
    )
    if fire_on_life_start:
        env = FireOnLifeStart(env)
    if terminal_on_life_loss:
        env = EndEpisodeOnLifeLoss(env)
    if clip_reward:
        env = TransformReward(env, _reward_sign)
    return FrameStackObservation(env, frame_stack)


def make_atari(
    env_id: str,
    *,
    frame_skip: int = 4,
    frame_stack: int = 4,
    screen_size: int = 84,
    noop_max: int = 30,
    clip_reward: bool = True,
    terminal_on_life_loss: bool = False,
    fire_on_life_start: bool = True,
    repeat_action_probability: float | None = None,
) -> gym.Env[Any, Any]:
    """One Atari game env with DQN's preprocessing (the module docstring lists the wrappers).

    Args:
        env_id: an ale-py id, e.g. ``"ALE/Breakout-v5"`` (``"BreakoutNoFrameskip-v4"`` works too;
            any id's own frame skip is replaced by ``frameskip=1`` plus ``frame_skip`` here).
        frame_skip: emulator frames per agent step (the action is repeated; the observation is
            the max of the last two frames).
        frame_stack: frames per observation.
        screen_size: side of the square grayscale frame, in pixels.
        noop_max: at reset, a random number in ``[1, noop_max]`` of no-op agent steps (0: none).
        clip_reward: reward = sign of the game's reward (training); ``False``: the raw score
            (evaluation).
        terminal_on_life_loss: a lost life ends the episode but not the game
            (:class:`EndEpisodeOnLifeLoss`; training).
        fire_on_life_start: press FIRE after each reset and each lost life
            (:class:`FireOnLifeStart`; no effect in games without FIRE).
        repeat_action_probability: sticky-action probability; ``None`` keeps the id's
            (0.25 for the v5 ids, 0 for the NoFrameskip-v4 ids).

    Returns:
        a gymnasium env with uint8 observations ``[frame_stack, screen_size, screen_size]`` and
        the game's ``Discrete`` action space.

    Raises:
        ApiUsageError: ale-py (or OpenCV) is not installed (``pip install -e '.[atari]'``), or
            the id is unknown.
        InvalidValueError: a count below 1 (``noop_max`` below 0), a probability outside [0, 1].
    """
    _check_options(frame_skip, frame_stack, screen_size, noop_max)
    kwargs = _game_kwargs(env_id, repeat_action_probability)
    try:
        return wrap_atari(
            gym.make(env_id, **kwargs),
            frame_skip=frame_skip,
            frame_stack=frame_stack,
            screen_size=screen_size,
            noop_max=noop_max,
            clip_reward=clip_reward,
            terminal_on_life_loss=terminal_on_life_loss,
            fire_on_life_start=fire_on_life_start,
        )
    except gym.error.DependencyNotInstalled as e:
        raise ApiUsageError(f"{env_id}: {e} (pip install -e '.[atari]')") from e


def envpool_atari_id(env_id: str) -> tuple[str, float]:
    """EnvPool's id of an ale-py game id and the id's sticky-action probability:
    ``"ALE/Breakout-v5"`` -> ``("Breakout-v5", 0.25)``, ``"BreakoutNoFrameskip-v4"`` ->
    ``("Breakout-v5", 0.0)``.

    Raises:
        ApiUsageError: not an ``ALE/<Game>-v5`` or ``<Game>NoFrameskip-v4`` id.
    """
    if env_id.startswith("ALE/") and env_id.endswith("-v5"):
        return env_id[len("ALE/") :], 0.25
    if env_id.endswith("NoFrameskip-v4"):
        return env_id[: -len("NoFrameskip-v4")] + "-v5", 0.0
    raise ApiUsageError(
        f"{env_id}: the EnvPool backend takes ALE/<Game>-v5 or <Game>NoFrameskip-v4 ids"
    )


def make_atari_vec(
    env_id: str,
    num_envs: int,
    *,
    backend: Literal["gymnasium", "envpool"] = "gymnasium",
    seed: int | None = None,
    async_batch: int | None = None,
    frame_skip: int = 4,
    frame_stack: int = 4,
    screen_size: int = 84,
    noop_max: int = 30,
    clip_reward: bool = True,
    terminal_on_life_loss: bool = False,
    fire_on_life_start: bool = True,
    repeat_action_probability: float | None = None,
) -> gym.vector.VectorEnv:
    """N envs of :func:`make_atari`, made by :func:`rlcore.envs.make_vec`, on gymnasium (one
    vector env: ``async_batch`` ``None`` lock-step ``SyncVectorEnv``, ``N`` ``AsyncVectorEnv``)
    or on EnvPool (``backend="envpool"``: its C++ Atari envs stepped by its thread pool,
    ``async_batch`` B < N for partial batches). The other arguments are :func:`make_atari`'s; for
    evaluation pass ``clip_reward=False, terminal_on_life_loss=False``.

    On EnvPool the same preprocessing is EnvPool's own (its id is :func:`envpool_atari_id`'s, with
    ``frame_skip``, ``noop_max``, ``stack_num``, 84x84 grayscale, ``reward_clip``,
    ``episodic_life``, FIRE at every life start and the id's sticky actions passed as its
    options; its reset stack repeats the reset frame as ``FrameStackObservation`` does). Frames
    can differ from ale-py's in the last bits of the resize and max-pooling, and its time limit is
    27,000 agent steps (108k frames, as ale-py's v5 ids); ``fire_on_life_start=False`` is refused
    there (EnvPool presses FIRE whenever the game has it).

    Observations are uint8 ``[N, frame_stack, screen_size, screen_size]``; the autoreset mode is
    NEXT_STEP on both. Gymnasium envs are seeded by the first ``reset(seed=...)`` (the collector
    does), EnvPool's by ``seed`` (env i gets ``seed + i``).

    Raises:
        ApiUsageError, InvalidValueError: as :func:`make_atari` and :func:`rlcore.envs.make_vec`;
            an unknown backend; on EnvPool also an id :func:`envpool_atari_id` does not map,
            ``fire_on_life_start=False``, ``noop_max=0`` (EnvPool 1.2.5 segfaults with it).
    """
    _check_options(frame_skip, frame_stack, screen_size, noop_max)
    if backend not in ("gymnasium", "envpool"):
        raise InvalidValueError(f"backend must be 'gymnasium' or 'envpool', got {backend!r}")
    if backend == "envpool":
        pool_id, sticky = envpool_atari_id(env_id)
        if noop_max < 1:
            raise InvalidValueError(
                "noop_max=0: EnvPool's Atari envs need noop_max >= 1 (envpool 1.2.5 crashes the "
                "process at reset with 0); use the gymnasium backend for starts without no-ops"
            )
        if not fire_on_life_start:
            raise ApiUsageError("fire_on_life_start=False: EnvPool's Atari envs always press FIRE")
        if repeat_action_probability is not None and not 0.0 <= repeat_action_probability <= 1.0:
            raise InvalidValueError(
                f"repeat_action_probability must be in [0, 1], got {repeat_action_probability}"
            )
        options = {
            "stack_num": frame_stack,
            "frame_skip": frame_skip,
            "noop_max": noop_max,
            "img_height": screen_size,
            "img_width": screen_size,
            "gray_scale": True,
            "reward_clip": clip_reward,
            "episodic_life": terminal_on_life_loss,
            "use_fire_reset": True,
            "repeat_action_probability": sticky if repeat_action_probability is None else repeat_action_probability,
        }
        return make_vec(  # type: ignore[return-value]
            pool_id, num_envs, backend="envpool", async_batch=async_batch, seed=seed, make_kwargs=options
        )
    kwargs = _game_kwargs(env_id, repeat_action_probability)
    wrap = functools.partial(
        wrap_atari,
        frame_skip=frame_skip,
        frame_stack=frame_stack,
        screen_size=screen_size,
        noop_max=noop_max,
        clip_reward=clip_reward,
        terminal_on_life_loss=terminal_on_life_loss,
        fire_on_life_start=fire_on_life_start,
    )
    try:
        return make_vec(env_id, num_envs, async_batch=async_batch, wrappers=(wrap,), make_kwargs=kwargs)  # type: ignore[return-value]
    except gym.error.DependencyNotInstalled as e:
        raise ApiUsageError(f"{env_id}: {e} (pip install -e '.[atari]')") from e
