"""Save and load a full buffer of 1M transitions (obs 17, act 6 float32) with each library's own
save format, and the bytes it puts on disk.

rlcore: ``save(dir)`` (one ``.npy`` per array, each fsynced, manifest written atomically) and
``ReplayBuffer.load(dir)``; also pickle (``state_dict``). cpprb: ``save_transitions`` /
``load_transitions`` (numpy ``.npz``). SB3: ``save_to_pkl`` / ``load_from_pkl`` (what
``save_replay_buffer`` does). Tianshou: ``save_hdf5`` / ``load_hdf5``. TorchRL: ``dumps`` /
``loads`` (memory-mapped tensors). rlox has no save. Loading builds the buffer object too (for
cpprb and TorchRL an empty buffer that the file is loaded into). The file was just written, so
loads read from the page cache; only rlcore fsyncs on save. 3 rounds each.
"""

from __future__ import annotations

import gc
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    BATCH,
    CPPRB_ENV,
    build_cpprb,
    build_or_skip,
    build_rlcore,
    build_sb3,
    build_tianshou,
    build_torchrl,
    require,
    tag,
)

CAPACITY = 1_000_000
SAVE_LIBS = ["rlcore", "rlcore (pickle)", "rlox", "cpprb", "sb3", "tianshou", "torchrl"]
CASES = [(lib, op) for lib in SAVE_LIBS for op in ("save", "load")]
ROUNDS = 3


def disk_bytes(path: Path) -> int:
    """Total size of the regular files under ``path`` (bytes)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _ops(lib: str, root: Path) -> tuple[Any, Any, str]:
    """(save(), load(), note); save writes under ``root``, load reads what save wrote."""
    if lib == "rlcore":
        import rlcore

        buf = build_rlcore(CAPACITY)
        path = root / "buf"
        return (
            (lambda: buf.save(path)),
            (lambda: rlcore.ReplayBuffer.load(path)),
            "`save` / `load`: .npy per array, fsynced",
        )
    if lib == "rlcore (pickle)":
        buf = build_rlcore(CAPACITY)
        path = root / "buf.pkl"

        def save() -> None:
            with open(path, "wb") as f:
                pickle.dump(buf, f, protocol=pickle.HIGHEST_PROTOCOL)

        def load() -> Any:
            with open(path, "rb") as f:
                return pickle.load(f)

        return save, load, "pickle of `state_dict` (protocol 5)"
    if lib == "rlox":
        require("rlox")
        pytest.skip("rlox 1.2.0 ReplayBuffer has no save/load")
    if lib == "cpprb":
        cpprb = require("cpprb")
        buf = build_cpprb(CAPACITY)
        path = root / "buf.npz"

        def load_cpprb() -> Any:
            b = cpprb.ReplayBuffer(CAPACITY, CPPRB_ENV)
            b.load_transitions(str(path))
            return b

        return (
            (lambda: buf.save_transitions(str(path))),
            load_cpprb,
            "`save_transitions` / `load_transitions` (.npz)",
        )
    if lib == "sb3":
        require("stable_baselines3")
        from stable_baselines3.common.save_util import load_from_pkl, save_to_pkl

        buf = build_sb3(CAPACITY)
        path = root / "buf.pkl"
        return (
            (lambda: save_to_pkl(path, buf)),
            (lambda: load_from_pkl(path)),
            "`save_to_pkl` / `load_from_pkl`",
        )
    if lib == "tianshou":
        require("tianshou")
        from tianshou.data import ReplayBuffer

        buf = build_tianshou(CAPACITY)
        path = root / "buf.h5"
        return (
            (lambda: buf.save_hdf5(str(path))),
            (lambda: ReplayBuffer.load_hdf5(str(path))),
            "`save_hdf5` / `load_hdf5`",
        )
    if lib == "torchrl":
        buf = build_torchrl(CAPACITY)
        from torchrl.data import LazyTensorStorage, ReplayBuffer

        path = root / "buf"

        def save_torchrl() -> None:
            shutil.rmtree(path, ignore_errors=True)
            buf.dumps(path)

        def load_torchrl() -> Any:
            b = ReplayBuffer(storage=LazyTensorStorage(CAPACITY), batch_size=BATCH)
            b.loads(path)
            return b

        return save_torchrl, load_torchrl, "`dumps` / `loads` (memory-mapped tensors)"
    raise AssertionError(lib)


_STATE: dict[str, Any] = {}


def _prepared(lib: str) -> tuple[Any, Any, str, Path]:
    if _STATE.get("lib") != lib:
        _release()
        root = Path(tempfile.mkdtemp(prefix="rlcore-bench-save-"))
        _STATE["root"] = root
        _STATE["ops"] = build_or_skip(lib, lambda: _ops(lib, root))
        _STATE["lib"] = lib
    save, load, note = _STATE["ops"]
    return save, load, note, _STATE["root"]


def _release() -> None:
    if "root" in _STATE:
        shutil.rmtree(_STATE["root"], ignore_errors=True)
    _STATE.clear()
    gc.collect()


@pytest.mark.parametrize(("lib", "op"), CASES, ids=[f"{lib.replace(' ', '_')}-{op}" for lib, op in CASES])
def test_save_load(benchmark: Any, lib: str, op: str) -> None:
    group_op = f"{op} a buffer of 1M transitions"
    tag(benchmark, group_op, lib, unit="s")
    save, load, note, root = _prepared(lib)
    if op == "save":
        benchmark.pedantic(save, rounds=ROUNDS, iterations=1)
    else:
        if not any(root.iterdir()):
            save()
        benchmark.pedantic(load, rounds=ROUNDS, iterations=1)
    tag(benchmark, group_op, lib, note, unit="s", disk_bytes=disk_bytes(root))


def teardown_module() -> None:
    _release()
