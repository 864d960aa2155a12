"""One save-directory mechanism (rlcore.buffers.generations; docs/replay-buffer.md, "save and load") for buffer
saves, trainer checkpoints and sharded buffer saves: saves written by older code still load and
are replaced cleanly; checkpoints and sharded saves own only what they wrote, survive concurrent
saves (threads and processes) and killed saves, and can be read while another process saves."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import rlcore
import torch
from generation_saves import ROWS, buffer, same, save
from rlcore.distributed import shard_files
from rlcore.trainers import checkpoint


def _with_user_file(folder: Path) -> dict[str, str]:
    (folder / "my-notes.txt").write_text("mine")
    return {"my-notes.txt": "mine"}


# ---------------------------------------------------------------------------------------------
# checkpoints and sharded saves: what buffer saves guarantee (tests/test_persist.py)

ROUNDS = 8
KINDS = ["checkpoint", "sharded"]
MANIFESTS = {"checkpoint": "checkpoint.json", "sharded": "sharded.json"}
PREFIXES = {"checkpoint": "gen-", "sharded": "shards-"}
MARKER_FORMATS = {"checkpoint": "rlcore-checkpoint-data", "sharded": "rlcore-sharded-data"}


def _read(kind: str, root: Path, tmp: Path) -> int:
    """The seed of the one complete save that ``root`` holds; raises (or fails an assertion) if
    it holds none, or parts of two."""
    if kind == "checkpoint":
        ckpt = checkpoint.load(root, trainer="off-policy", trust_env_state=True)
        seed = ckpt.counter("seed")
        target = rlcore.ReplayBuffer(ROWS)
        ckpt.restore_buffer(target)
        assert ckpt.env_state == {"seed": seed}
        assert torch.equal(ckpt.part("algorithm")["w"], torch.full((8,), float(seed)))
        assert same(target, buffer(seed))
        return int(seed)
    with shard_files.open_shard_dirs(root) as (_, folders):
        trees = [shard_files._read_tree(f) for f in folders]
    shards = []
    for tree in trees:
        where = tmp / f"read-{len(list(tmp.glob('read-*')))}"
        shard_files._write_tree(where, tree)
        shards.append(rlcore.ReplayBuffer.load(where))
    seed = int(shards[0].column("obs")[0, 0])
    assert len(shards) == 2 and same(shards[0], buffer(seed)) and same(shards[1], buffer(seed + 100))
    return seed


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> sha1 of its bytes) and every folder."""
    return {
        p.relative_to(root).as_posix(): "dir" if p.is_dir() else hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


def _user_files(kind: str, root: Path) -> dict[str, str]:
    """Files and folders a user keeps in a save directory, some named like rlcore's own."""
    prefix, inner = PREFIXES[kind], {"checkpoint": "trainer.pt", "sharded": "shard-000"}[kind]
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{prefix}raw").mkdir()
    (root / f"{prefix}raw" / "x.csv").write_text("a,b\n1,2\n")
    for name in (f"{prefix}0123456789abcdef", f"{prefix}0123456789ab"):  # our names, no marker
        (root / name).mkdir()
        (root / name / inner).write_bytes(b"mine")
    other = root / f"{prefix}fedcba9876543210"  # a marker that names another folder
    other.mkdir()
    (other / "rlcore-data.json").write_text(
        json.dumps(
            {"format": MARKER_FORMATS[kind], "data_dir": f"{prefix}0000000000000000", "files": [inner]}
        )
    )
    (other / inner).write_bytes(b"also mine")
    (root / "notes.txt").write_text("keep me")
    (root / f"{MANIFESTS[kind]}.bak").write_text("{}")
    mine = {f"{prefix}raw", f"{prefix}0123456789abcdef", f"{prefix}0123456789ab", other.name, "notes.txt"}
    mine.add(f"{MANIFESTS[kind]}.bak")
    return {k: v for k, v in _tree(root).items() if k.split("/")[0] in mine}


def _kept(root: Path, user: dict[str, str]) -> bool:
    return {k: v for k, v in _tree(root).items() if k in user} == user


def _generation_folders(kind: str, root: Path, user: dict[str, str]) -> list[str]:
    """The generation folders of rlcore's in ``root`` (folders named like one, not the user's)."""
    pattern = re.compile(re.escape(PREFIXES[kind]) + "[0-9a-f]+")
    return sorted(p.name for p in root.iterdir() if pattern.fullmatch(p.name) and p.name not in user)


def _current(kind: str, root: Path) -> str:
    return json.loads((root / MANIFESTS[kind]).read_text())["data_dir"]


def _run(script: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_save_never_removes_files_or_folders_it_did_not_write(kind: str, tmp_path: Path) -> None:
    root = tmp_path / "d"
    user = _user_files(kind, root)
    for seed in range(1, 4):
        save(kind, root, seed)
        assert _kept(root, user)
        assert _read(kind, root, tmp_path) == seed
        assert _generation_folders(kind, root, user) == [_current(kind, root)]
    # a file a user put into the current generation folder stays when a save replaces it
    previous = root / _current(kind, root)
    _with_user_file(previous)
    save(kind, root, 1)
    assert sorted(p.relative_to(previous).as_posix() for p in previous.rglob("*")) == ["my-notes.txt"]
    # a manifest edited to name a user's folder does not make that folder removable
    manifest = json.loads((root / MANIFESTS[kind]).read_text())
    (root / MANIFESTS[kind]).write_text(json.dumps({**manifest, "data_dir": f"{PREFIXES[kind]}raw"}))
    save(kind, root, 2)
    assert _kept(root, user) and _read(kind, root, tmp_path) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_two_threads_saving_into_one_directory_leave_one_complete_save(kind: str, tmp_path: Path) -> None:
    root = tmp_path / "d"
    user = _user_files(kind, root)
    save(kind, root, 1)
    errors: list[BaseException] = []
    bad, lost = [], 0
    for r in range(ROUNDS):
        start = threading.Barrier(2)

        def save_at(seed: int, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                save(kind, root, seed)
            except Exception as e:  # noqa: BLE001 - counted below
                errors.append(e)

        threads = [threading.Thread(target=save_at, args=(seed,)) for seed in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            _read(kind, root, tmp_path)
        except Exception as e:  # noqa: BLE001 - counted below
            bad.append((r, e))
        lost += not _kept(root, user)
    assert not bad, f"{len(bad)} of {ROUNDS} rounds left the directory unloadable or mixed: {bad[0]!r}"
    assert not errors, f"{len(errors)} of {2 * ROUNDS} saves raised: {errors[0]!r}"
    assert not lost, f"the user's files were damaged in {lost} of {ROUNDS} rounds"
    assert _generation_folders(kind, root, user) == [_current(kind, root)]


_PROCESS_SAVER = """
import sys
sys.path.insert(0, sys.argv[4])
from generation_saves import buffer, save
kind, root, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
buffer(seed), buffer(seed + 100)
if kind == "checkpoint":
    import rlcore.trainers.checkpoint  # imports torch (seconds) before the first round
print("ready", flush=True)
for line in sys.stdin:
    try:
        save(kind, root, seed)
        print("ok", flush=True)
    except Exception as e:
        print("error", repr(e).replace("\\n", " "), flush=True)
"""


@pytest.mark.parametrize("kind", KINDS)
def test_two_processes_saving_into_one_directory_leave_one_complete_save(kind: str, tmp_path: Path) -> None:
    root = tmp_path / "d"
    user = _user_files(kind, root)
    save(kind, root, 1)
    here = str(Path(__file__).parent)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PROCESS_SAVER, kind, str(root), str(seed), here],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ,
        )
        for seed in (1, 2)
    ]
    bad, errors, lost = [], [], 0
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for r in range(ROUNDS):
            for p in procs:  # both start saving at (nearly) the same moment
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            for p in procs:
                assert p.stdout is not None
                line = p.stdout.readline().strip()
                if line != "ok":
                    errors.append(line)
            try:
                _read(kind, root, tmp_path)
            except Exception as e:  # noqa: BLE001 - counted below
                bad.append((r, e))
            lost += not _kept(root, user)
    finally:
        for p in procs:
            assert p.stdin is not None and p.stdout is not None
            p.stdin.close()
            p.wait(timeout=60)
            p.stdout.close()
    assert not bad, f"{len(bad)} of {ROUNDS} rounds left the directory unloadable or mixed: {bad[0]!r}"
    assert not errors, f"{len(errors)} of {2 * ROUNDS} saves raised: {errors[0]}"
    assert not lost, f"the user's files were damaged in {lost} of {ROUNDS} rounds"
    assert _generation_folders(kind, root, user) == [_current(kind, root)]


_KILLED_SAVER = """
import os, signal, sys
sys.path.insert(0, sys.argv[4])
from generation_saves import save
kind, root, at = sys.argv[1], sys.argv[2], sys.argv[3]
real = os.replace

def replace(src, dst, *args, **kwargs):
    if os.path.basename(dst) == at:  # killed just before this manifest is renamed into place
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *args, **kwargs)

os.replace = replace
save(kind, root, 5)
"""


@pytest.mark.parametrize(
    ("kind", "at"),
    [
        ("checkpoint", "checkpoint.json"),
        ("checkpoint", "manifest.json"),  # in the middle of the checkpoint's buffer save
        ("sharded", "sharded.json"),
        ("sharded", "manifest.json"),  # in the middle of the first shard's save
    ],
)
def test_save_killed_before_its_manifest_costs_nothing_and_the_next_save_cleans_it(
    kind: str, at: str, tmp_path: Path
) -> None:
    root = tmp_path / "d"
    save(kind, root, 1)
    user = _user_files(kind, root)
    killed = _run(_KILLED_SAVER, kind, str(root), at, str(Path(__file__).parent))
    assert killed.returncode == -9, killed.stderr[-2000:]
    leftovers = [g for g in _generation_folders(kind, root, user) if g != _current(kind, root)]
    assert len(leftovers) == 1
    assert _read(kind, root, tmp_path) == 1  # the previous save is intact
    save(kind, root, 2)
    assert not (root / leftovers[0]).exists()
    assert _kept(root, user)
    assert _generation_folders(kind, root, user) == [_current(kind, root)]
    assert _read(kind, root, tmp_path) == 2


_LOOPING_SAVER = """
import os, sys
sys.path.insert(0, sys.argv[4])
from generation_saves import buffer, save
kind, root, stop = sys.argv[1], sys.argv[2], sys.argv[3]
for seed in (1, 2, 101, 102):
    buffer(seed)
if kind == "checkpoint":
    import rlcore.trainers.checkpoint  # imports torch (seconds) before the reads start
print("ready", flush=True)
k = 0
while not os.path.exists(stop):
    save(kind, root, (1, 2)[k % 2])
    k += 1
print(k, flush=True)
"""


def _shard_data(tree: dict[str, bytes]) -> dict[str, str]:
    """The data files of one shard's buffer save (read as a tree): file name -> sha1."""
    manifest = json.loads(tree["manifest.json"])
    prefix = manifest["data_dir"] + "/"
    return {
        k[len(prefix) :]: hashlib.sha1(v).hexdigest()
        for k, v in tree.items()
        if k.startswith(prefix) and k.endswith(".npy")
    }


def _quick_read(kind: str, root: Path, tmp: Path) -> Any:
    """Read ``root`` as a trainer resuming from it would (a checkpoint: load, then restore its
    buffer; a sharded save: every shard's files, as ShardedReplayBuffer.restore reads them) and
    return what identifies it (for a checkpoint, the seed it was checked to hold)."""
    if kind == "checkpoint":
        return _read(kind, root, tmp)
    with shard_files.open_shard_dirs(root) as (_, folders):
        return tuple(json.dumps(_shard_data(shard_files._read_tree(f)), sort_keys=True) for f in folders)


def _shard_data_of(seed: int, tmp: Path) -> tuple[str, ...]:
    """What :func:`_quick_read` returns for a sharded save of version ``seed``."""
    save("sharded", tmp / f"reference-{seed}", seed)
    return _quick_read("sharded", tmp / f"reference-{seed}", tmp)


@pytest.mark.parametrize("kind", KINDS)
def test_reading_while_another_process_saves_always_reads_one_complete_save(
    kind: str, tmp_path: Path
) -> None:
    root, stop = tmp_path / "d", tmp_path / "stop"
    save(kind, root, 1)
    saver = subprocess.Popen(
        [sys.executable, "-c", _LOOPING_SAVER, kind, str(root), str(stop), str(Path(__file__).parent)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    failures: list[BaseException] = []
    seen, reads = set(), 0
    try:
        assert saver.stdout is not None and saver.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            reads += 1
            try:
                seen.add(_quick_read(kind, root, tmp_path))
            except Exception as e:  # noqa: BLE001 - counted below
                failures.append(e)
    finally:
        stop.touch()
        saver.wait(timeout=120)
    assert saver.stdout is not None
    saves = int(saver.stdout.read().strip())
    saver.stdout.close()
    assert saver.returncode == 0 and saves >= 3 and reads >= 3, f"{saves} saves and {reads} reads overlapped"
    assert not failures, f"{len(failures)} of {reads} reads failed: {failures[0]!r}"
    complete = {1, 2} if kind == "checkpoint" else {_shard_data_of(1, tmp_path), _shard_data_of(2, tmp_path)}
    assert seen <= complete, "a read held neither save"


def test_a_loaded_checkpoint_restores_its_own_buffer_after_the_checkpoint_was_replaced(
    tmp_path: Path,
) -> None:
    root = tmp_path / "d"
    save("checkpoint", root, 1)
    ckpt = checkpoint.load(root, trust_env_state=True)
    save("checkpoint", root, 2)  # same process: no deadlock, the loaded generation is kept
    save("checkpoint", root, 1)
    target = rlcore.ReplayBuffer(ROWS)
    ckpt.restore_buffer(target)
    assert ckpt.counter("seed") == 1 and same(target, buffer(1))
    assert ckpt.data_dir.is_dir() and len(_generation_folders("checkpoint", root, {})) == 2
    del ckpt
    gc.collect()
    save("checkpoint", root, 2)  # once the checkpoint object is gone, its folder goes too
    assert _generation_folders("checkpoint", root, {}) == [_current("checkpoint", root)]
    assert _read("checkpoint", root, tmp_path) == 2


class _FailingBuffer:
    """A buffer whose save writes part of its files, then hits a full disk."""

    def save(self, path: Path) -> None:
        Path(path).mkdir()
        (Path(path) / "000.npy").write_bytes(b"partial")
        raise OSError(28, "No space left on device (simulated)")


@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_save_leaves_the_directory_exactly_as_it_was(kind: str, tmp_path: Path) -> None:
    root = tmp_path / "d"
    save(kind, root, 1)
    _user_files(kind, root)
    tree = _tree(root)
    with pytest.raises(OSError, match="No space left"):
        if kind == "checkpoint":
            checkpoint.save(root, trainer="off-policy", state={}, counters={}, buffer=_FailingBuffer())
        else:
            shard_files.save_shard_dirs(root, num_envs=1, writers=[buffer(1).save, _FailingBuffer().save])
    assert _tree(root) == tree
    assert _read(kind, root, tmp_path) == 1


# ---------------------------------------------------------------------------------------------
# the lock


@pytest.mark.parametrize("kind", ["buffer", "checkpoint", "sharded"])
def test_reading_a_directory_that_holds_no_save_leaves_it_unchanged(kind: str, tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    (root / "notes.txt").write_text("keep me")
    tree = _tree(root)
    if kind == "buffer":
        with pytest.raises(rlcore.errors.SaveFileError, match="no manifest.json"):
            rlcore.ReplayBuffer.load(root)
    elif kind == "checkpoint":
        with pytest.raises(FileNotFoundError, match="no checkpoint"):
            checkpoint.load(root)
    else:
        with pytest.raises(rlcore.errors.SaveFileError, match="no sharded.json"):
            with shard_files.open_shard_dirs(root):
                pass
    assert _tree(root) == tree  # no lock file either


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_a_lock_file_replaced_while_a_reader_waits_is_locked_again(tmp_path: Path) -> None:
    import fcntl

    from rlcore.buffers import generations

    root = tmp_path / "d"
    save("sharded", root, 1)
    holder = os.open(root / "rlcore.lock", os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # a save in progress
    locked, release = threading.Event(), threading.Event()

    def read() -> None:
        with generations.reading(root, "sharded.json"):
            locked.set()
            release.wait(30)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.2)
    assert not locked.is_set()  # waits for the save
    (root / "rlcore.lock.new").touch()
    os.replace(root / "rlcore.lock.new", root / "rlcore.lock")  # e.g. a user restored the directory
    os.close(holder)  # the reader now gets the old file's lock: it must lock the new file instead
    assert locked.wait(30)
    probe = os.open(root / "rlcore.lock", os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the reader holds the new file
    finally:
        os.close(probe)
        release.set()
        reader.join()


# ---------------------------------------------------------------------------------------------
# edited or damaged saves are refused (as buffer saves are: tests/test_persist.py)


def _flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _edit_counters(path: Path) -> None:
    path.write_text(path.read_text().replace('"seed": 1', '"seed": 7'))  # still valid JSON


@pytest.mark.parametrize(
    ("name", "tamper"),
    [
        ("counters.json", _edit_counters),
        ("counters.json", _flip_middle_byte),
        ("trainer.pt", _flip_middle_byte),
        ("env_state.pkl", _flip_middle_byte),
    ],
)
def test_a_checkpoint_with_a_changed_part_is_refused_naming_the_part(
    name: str, tamper: Any, tmp_path: Path
) -> None:
    root = tmp_path / "d"
    save("checkpoint", root, 1)
    tamper(root / _current("checkpoint", root) / name)
    with pytest.raises(rlcore.errors.CheckpointError, match=rf"{re.escape(name)} fails its checksum"):
        checkpoint.load(root, trust_env_state=True)


@pytest.mark.parametrize(
    ("field", "value"), [("trainer", "on-policy"), ("env_state", False), ("buffer", False)]
)
def test_an_edited_checkpoint_manifest_is_refused(field: str, value: Any, tmp_path: Path) -> None:
    root = tmp_path / "d"
    save("checkpoint", root, 1)
    manifest = json.loads((root / "checkpoint.json").read_text())
    (root / "checkpoint.json").write_text(json.dumps({**manifest, field: value}, indent=1))
    with pytest.raises(rlcore.errors.CheckpointError, match="checkpoint.json fails its checksum"):
        checkpoint.load(root)


def test_an_edited_sharded_manifest_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "d"
    save("sharded", root, 1)
    manifest = json.loads((root / "sharded.json").read_text())
    (root / "sharded.json").write_text(json.dumps({**manifest, "num_envs": 2}, indent=1))
    with pytest.raises(rlcore.errors.SaveFileError, match="sharded.json fails its checksum"):
        with shard_files.open_shard_dirs(root):
            pass


def test_a_changed_shard_file_is_refused_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "d"
    save("sharded", root, 1)
    shard = root / _current("sharded", root) / "shard-001"
    data_dir = json.loads((shard / "manifest.json").read_text())["data_dir"]
    _flip_middle_byte(shard / data_dir / "000.npy")
    with pytest.raises(rlcore.errors.SaveFileError, match=r"000\.npy .*fails its checksum"):
        _read("sharded", root, tmp_path)
