"""Stable-Baselines3 2.9 replay buffers backed by the rlcore core.

Swap one class, keep the algorithm::

    from stable_baselines3 import SAC
    from rlcore.compat.sb3 import ReplayBuffer

    model = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=ReplayBuffer)

    from rlcore.compat.sb3 import HerReplayBuffer
    model = SAC("MultiInputPolicy", "FetchReach-v4", replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"})

Each class subclasses the SB3 class of the same name (SB3's ``isinstance``/``issubclass`` checks
pass), takes the constructor arguments SB3's off-policy algorithms pass, and keeps SB3's
attributes (``buffer_size`` per env, ``n_envs``, ``pos``, ``full``, ``size()``, ``device``,
``observation_space``, ``action_space``, ``handle_timeout_termination``), but allocates none of
SB3's numpy arrays: the steps live in an :class:`rlcore.ReplayBuffer` (``buffer.core``), which
stores every observation once and keeps the true final observation of every episode.

Semantics (identical to SB3's buffers unless listed under "Differences"):

- ``add(obs, next_obs, action, reward, done, infos)``: a step with ``done`` and
  ``infos[i]["TimeLimit.truncated"]`` is stored as *truncated* (when
  ``handle_timeout_termination``; otherwise as terminated, like SB3), any other ``done`` as
  *terminated*. ``next_obs`` must already hold ``infos[i]["terminal_observation"]`` at done
  steps — SB3's ``OffPolicyAlgorithm._store_transition`` puts it there (un-normalized), exactly
  as SB3's own buffers expect.
- ``sample(batch_size, env)`` returns ``ReplayBufferSamples`` / ``DictReplayBufferSamples`` of
  torch tensors on ``device``: ``observations``/``next_observations`` ``[B, *O]`` (dtype of the
  observation space; normalized by ``env.normalize_obs`` when ``env`` is a VecNormalize),
  ``actions`` ``[B, A]`` (float64 action spaces stored as float32, like SB3), ``rewards``
  ``[B, 1]`` float32 (``env.normalize_reward`` applied), ``dones`` ``[B, 1]`` float32, 1 only
  for true terminations, so SB3's target ``r + (1 - dones) * gamma * Q'(s')`` bootstraps through
  time limits. ``NStepReplayBuffer`` adds ``discounts`` ``[B, 1]`` float32 = gamma^m.

Differences from SB3's buffers (deliberate):

- Capacity: rows are allocated for ``buffer_size`` transitions plus ``extra_rows`` (one row per
  episode holds its final observation); with the default ``buffer_size // 8 + 2`` extra rows
  per env at least ``buffer_size`` transitions fit when episodes average >= 8 steps.
- Randomness: the core owns its generator (seed ``seed``, or derived from NumPy's global state
  without consuming it, so ``set_random_seed`` in SB3 makes runs repeatable). SB3's
  ``np.random`` stream is not used by sampling.
- ``HerReplayBuffer`` samples as SB3's by default (``exact_parity=True``): only transitions of
  finished episodes whole in the ring (a ``RuntimeError`` before the first episode ends) and
  exactly ``int(B * k / (k + 1))`` relabeled samples placed last in the batch.
  (One difference remains: an episode longer than ``buffer_size`` is never whole in the ring,
  so it is not sampled; SB3 2.9 samples it with episode bounds taken modulo its buffer.)
  ``exact_parity=False`` gives rlcore's own HER sampling: running episodes are sampled too
  (relabeling from their stored part) and each sample is relabeled independently with
  probability k / (k + 1).
- ``NStepReplayBuffer`` with ``VecNormalize(norm_reward=True)``: the n-step sum is normalized
  once (``normalize_reward(sum)``); SB3 normalizes (and clips) each reward of the window
  before summing. Equal unless the clip is reached.
- ``size()``, ``full`` and ``pos`` report what ``sample`` can draw from (``size() =
  min(len(core) // n_envs, buffer_size)``, so SB3's ``size() == (buffer_size if full else pos)``
  holds); they equal SB3's unless short episodes wrap the ring (see :meth:`ReplayBuffer.size`).
- ``optimize_memory_usage=True`` is refused (every observation is stored once anyway), and
  ``copy_info_dict=True`` (HER) is refused: the core does not hand the relabeled rows to the
  reward callable, so stored infos cannot be matched to transitions.
- SB3's raw arrays (``observations``, ``dones``, ``timeouts``, ...) do not exist; read the
  stored data through ``buffer.core`` (:meth:`rlcore.ReplayBuffer.column`).

Pickling (``model.save_replay_buffer`` / ``load_replay_buffer``) saves the core's full state
(``state_dict``); HER drops the env like SB3 (call ``set_env`` after loading, which
``load_replay_buffer`` does).
"""

from __future__ import annotations

from rlcore.compat import _missing

try:
    import stable_baselines3  # noqa: F401 - the peer must be importable before its subclasses are built
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise _missing("stable-baselines3", "sb3", _err) from _err

from rlcore.compat.sb3.buffers import DictReplayBuffer, NStepReplayBuffer, ReplayBuffer
from rlcore.compat.sb3.her import HerReplayBuffer

__all__ = ["DictReplayBuffer", "HerReplayBuffer", "NStepReplayBuffer", "ReplayBuffer"]
