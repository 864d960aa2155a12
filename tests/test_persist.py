"""The save directory (rlcore.buffers.persist; docs/replay-buffer.md, "save and load"): a save owns only
what it wrote, concurrent saves leave one complete save, corrupt or edited saves are refused
before anything is allocated, any column name round-trips, subclasses keep their class."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import pickle
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import rlcore
from rlcore.errors import SaveFileError

F32 = np.float32


def _filled(rows, seed, cls=rlcore.ReplayBuffer, obs_dim=17, **kwargs):
    """A single-env buffer of ``rows`` rows, ~90 % full of random 50-step episodes."""
    buf = cls(rows, seed=seed, **kwargs)
    rng = np.random.default_rng(seed)
    t_len = rows * 9 // 10
    obs = rng.standard_normal((t_len + 1, obs_dim)).astype(F32)
    ends = np.arange(t_len) % 50 == 49
    term = ends & (rng.random(t_len) < 0.5)
    buf.extend(
        obs[:-1],
        rng.standard_normal((t_len, 6)).astype(F32),
        rng.standard_normal(t_len),
        term,
        ends & ~term,
        obs[1:],
    )
    return buf


def _states_equal(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    if sa["config"] != sb["config"] or sa["schema"] != sb["schema"] or set(sa["arrays"]) != set(sb["arrays"]):
        return False
    return all(np.array_equal(sa["arrays"][k], sb["arrays"][k]) for k in sa["arrays"])


def _reseal(m):
    """``m`` with a valid manifest checksum: what a faulty writer would leave. (The code before
    manifest checksums has nothing to reseal, so these tests also run against it.)"""
    try:
        from rlcore.buffers.persist import seal
    except ImportError:
        return m
    m = {k: v for k, v in m.items() if k != "checksum"}
    return {**m, "checksum": seal(m)}


def _file_of(manifest, part):
    entry = manifest["files"][part]
    return entry["file"] if isinstance(entry, dict) else entry


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> sha1 of its bytes) and every folder."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = "dir" if p.is_dir() else hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def _user_files(root: Path) -> dict[str, str]:
    """Files and folders a user keeps in a save directory, some named like rlcore's own."""
    (root / "data-raw").mkdir(parents=True)
    (root / "data-raw" / "x.csv").write_text("a,b\n1,2\n")
    (root / "data-0123456789abcdef").mkdir()  # our name pattern, but no rlcore marker
    (root / "data-0123456789abcdef" / "000.npy").write_bytes(b"mine")
    (root / "data-fedcba9876543210").mkdir()  # a marker that names another folder
    (root / "data-fedcba9876543210" / "rlcore-data.json").write_text(
        json.dumps(
            {"format": "rlcore-buffer-data", "data_dir": "data-0000000000000000", "files": ["000.npy"]}
        )
    )
    (root / "data-fedcba9876543210" / "000.npy").write_bytes(b"also mine")
    (root / "notes.txt").write_text("keep me")
    (root / "manifest.json.bak").write_text("{}")
    mine = {"data-raw", "data-0123456789abcdef", "data-fedcba9876543210", "notes.txt", "manifest.json.bak"}
    return {k: v for k, v in _tree(root).items() if k.split("/")[0] in mine}


def _rlcore_data_dirs(root: Path) -> list[str]:
    return sorted(
        p.name
        for p in root.iterdir()
        if (p / "rlcore-data.json").exists()
        and json.loads((p / "rlcore-data.json").read_text()).get("data_dir") == p.name
    )


def _run(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ,
    )


# ---------------------------------------------------------------------------------------------
# item 1: a save removes only the data folder of the manifest it replaced


def test_save_never_removes_files_or_folders_it_did_not_write(tmp_path):
    root = tmp_path / "d"
    user = _user_files(root)
    bufs = [_filled(200, seed) for seed in range(4)]
    for buf in bufs:
        buf.save(root)
        assert {k: v for k, v in _tree(root).items() if k in user} == user
        assert _states_equal(rlcore.ReplayBuffer.load(root), buf)
    # exactly one data folder of rlcore's is left: the current one
    manifest = json.loads((root / "manifest.json").read_text())
    assert _rlcore_data_dirs(root) == [manifest["data_dir"]]
    # a manifest edited to name a user's folder (and resealed) does not make it removable
    m = _reseal(
        {**manifest, "data_dir": "data-raw", "files": {"rew": {"file": "x.csv", "crc32c": "00000000"}}}
    )
    (root / "manifest.json").write_text(json.dumps(m))
    bufs[0].save(root)
    assert (root / "data-raw" / "x.csv").read_text() == "a,b\n1,2\n"
    assert _states_equal(rlcore.ReplayBuffer.load(root), bufs[0])


def test_save_keeps_a_file_a_user_put_into_the_previous_data_folder(tmp_path):
    root = tmp_path / "d"
    _filled(100, 0).save(root)
    old = root / json.loads((root / "manifest.json").read_text())["data_dir"]
    (old / "my-notes.txt").write_text("mine")
    _filled(100, 1).save(root)
    # the save's own files went, the user's file and so its folder stayed
    assert sorted(p.name for p in old.iterdir()) == ["my-notes.txt"]


def test_save_killed_before_its_manifest_is_cleaned_by_the_next_save_and_nothing_else(tmp_path):
    root = tmp_path / "d"
    first = _filled(300, 0)
    first.save(root)
    user = _user_files(root)
    # a save killed with SIGKILL just before it renames its manifest into place
    killed = _run(
        """
        import os, signal, sys, numpy as np, rlcore, rlcore.buffers.persist as p
        buf = rlcore.ReplayBuffer(300, seed=5)
        o = np.ones((10, 17), np.float32)
        buf.extend(o, np.zeros((10, 6), np.float32), np.ones(10), np.zeros(10, bool), np.zeros(10, bool), o)
        p.os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
        buf.save(sys.argv[1])
        """,
        str(root),
    )
    assert killed.returncode == -9, killed.stderr
    orphans = [
        d
        for d in _rlcore_data_dirs(root)
        if d != json.loads((root / "manifest.json").read_text())["data_dir"]
    ]
    assert len(orphans) == 1
    assert _states_equal(rlcore.ReplayBuffer.load(root), first)  # the previous save is intact
    second = _filled(300, 1)
    second.save(root)
    assert not (root / orphans[0]).exists()
    assert {k: v for k, v in _tree(root).items() if k in user} == user
    assert _rlcore_data_dirs(root) == [json.loads((root / "manifest.json").read_text())["data_dir"]]
    assert _states_equal(rlcore.ReplayBuffer.load(root), second)


# ---------------------------------------------------------------------------------------------
# item 2: concurrent saves into one directory


ROUNDS = 10


def test_two_threads_saving_into_one_directory_leave_one_complete_save(tmp_path):
    root = tmp_path / "d"
    a, b = _filled(30_000, 1), _filled(30_000, 2)
    a.save(root)
    user = _user_files(root)
    errors, bad, lost = [], [], 0
    for r in range(ROUNDS):
        start = threading.Barrier(2)

        def save(buf, start=start):
            start.wait()
            try:
                buf.save(root)
            except Exception as e:  # noqa: BLE001 - counted below
                errors.append(e)

        threads = [threading.Thread(target=save, args=(x,)) for x in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            loaded = rlcore.ReplayBuffer.load(root)
            if not (_states_equal(loaded, a) or _states_equal(loaded, b)):
                bad.append((r, "holds neither save"))
        except SaveFileError as e:
            bad.append((r, e))
        lost += {k: v for k, v in _tree(root).items() if k in user} != user
    assert not bad, f"{len(bad)} of {ROUNDS} rounds left the directory unloadable or mixed: {bad[0]}"
    assert not errors, f"{len(errors)} of {2 * ROUNDS} saves raised: {errors[0]!r}"
    assert not lost, f"the user's files were damaged in {lost} of {ROUNDS} rounds"
    assert len(_rlcore_data_dirs(root)) == 1


_PROCESS_SAVER = """
import sys, numpy as np, rlcore
sys.path.insert(0, sys.argv[3])
from test_persist import _filled
buf = _filled(30_000, int(sys.argv[2]))
print("ready", flush=True)
for line in sys.stdin:
    try:
        buf.save(sys.argv[1])
        print("ok", flush=True)
    except Exception as e:
        print("error", repr(e).replace("\\n", " "), flush=True)
"""


def test_two_processes_saving_into_one_directory_leave_one_complete_save(tmp_path):
    root = tmp_path / "d"
    a, b = _filled(30_000, 1), _filled(30_000, 2)
    a.save(root)
    user = _user_files(root)
    here = str(Path(__file__).parent)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PROCESS_SAVER, str(root), str(seed), here],
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
            assert p.stdout.readline().strip() == "ready"
        for r in range(ROUNDS):
            for p in procs:  # both start saving at (nearly) the same moment
                p.stdin.write("go\n")
                p.stdin.flush()
            for p in procs:
                line = p.stdout.readline().strip()
                if line != "ok":
                    errors.append(line)
            try:
                loaded = rlcore.ReplayBuffer.load(root)
                if not (_states_equal(loaded, a) or _states_equal(loaded, b)):
                    bad.append((r, "holds neither save"))
            except SaveFileError as e:
                bad.append((r, e))
            lost += {k: v for k, v in _tree(root).items() if k in user} != user
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=60)
            p.stdout.close()
    assert not bad, f"{len(bad)} of {ROUNDS} rounds left the directory unloadable or mixed: {bad[0]}"
    assert not errors, f"{len(errors)} of {2 * ROUNDS} saves raised: {errors[0]}"
    assert not lost, f"the user's files were damaged in {lost} of {ROUNDS} rounds"
    assert len(_rlcore_data_dirs(root)) == 1


@pytest.mark.parametrize("reader", ["load", "restore"])
def test_load_during_concurrent_saves_always_reads_one_complete_save(tmp_path, reader):
    root = tmp_path / "d"
    a, b = _filled(20_000, 1), _filled(20_000, 2)
    a.save(root)
    stop = threading.Event()

    def saver():
        k = 0
        while not stop.is_set():
            (a, b)[k % 2].save(root)
            k += 1

    th = threading.Thread(target=saver)
    th.start()
    target = rlcore.ReplayBuffer(20_000)
    failures = []
    try:
        for _ in range(15):
            try:
                if reader == "load":
                    got = rlcore.ReplayBuffer.load(root)
                else:
                    target.restore(root)
                    got = target
                if not (_states_equal(got, a) or _states_equal(got, b)):
                    failures.append("neither")
            except SaveFileError as e:
                failures.append(e)
    finally:
        stop.set()
        th.join()
    assert not failures, f"{len(failures)} of 15 reads failed: {failures[0]!r}"


# ---------------------------------------------------------------------------------------------
# item 3: a corrupt save is refused before anything is allocated


_CORRUPT_LOADER = """
import json, resource, sys, time
import rlcore
from rlcore.errors import SaveFileError

def vm_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1])

# a guard for the code under test: past 1.5 GiB more address space, allocations fail instead of
# taking the machine's memory
limit = (vm_kib() + 1536 * 1024) * 1024
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
target = rlcore.ReplayBuffer(64, seed=0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
results = {}
for path in sys.argv[1:]:
    for how in ("load", "restore"):
        t = time.perf_counter()
        try:
            rlcore.ReplayBuffer.load(path) if how == "load" else target.restore(path)
            outcome = "loaded"
        except SaveFileError as e:
            outcome = "SaveFileError: " + str(e)
        except BaseException as e:
            outcome = type(e).__name__ + ": " + str(e)
        results[path + ":" + how] = [outcome, time.perf_counter() - t]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"results": results, "peak_growth_mib": (peak - before) / 1024, "len": len(target)}))
"""


def _corrupt_saves(tmp_path: Path) -> dict[str, Path]:
    """Copies of one 64-row save, each damaged in one way."""
    src = _filled(64, 0, obs_dim=3)
    out = {}

    def variant(name, damage):
        root = tmp_path / name
        src.save(root)
        m = json.loads((root / "manifest.json").read_text())
        damage(root, m)
        out[name] = root

    def write(root, m):
        (root / "manifest.json").write_text(json.dumps(m))

    def capacity(value, sealed):
        def damage(root, m):
            m["config"]["capacity"] = value
            write(root, _reseal(m) if sealed else m)

        return damage

    def file_of(root, m, part):
        return root / m["data_dir"] / _file_of(m, part)

    def truncate(root, m):
        p = file_of(root, m, "col:obs")
        p.write_bytes(p.read_bytes()[:-5])

    def swap(root, m):  # a file of another part put in place of ep_start
        a, b = file_of(root, m, "ep_start"), file_of(root, m, "col:obs")
        data = a.read_bytes()
        a.write_bytes(b.read_bytes())
        b.write_bytes(data)

    def wrong_dtype(root, m):
        p = file_of(root, m, "ep_end")
        np.save(p, np.load(p).astype(np.float64))

    def header_claims_huge(root, m):  # a header of a 3e8-row array over 64 rows of data
        p = file_of(root, m, "ep_id")
        arr = np.load(p)
        head = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            head,
            {
                "descr": np.lib.format.dtype_to_descr(arr.dtype),
                "fortran_order": False,
                "shape": (300_000_000,),
            },
        )
        p.write_bytes(head.getvalue() + arr.tobytes())

    variant("capacity-3e8-sealed", capacity(300_000_000, True))
    variant("capacity-3e7-sealed", capacity(30_000_000, True))
    variant("capacity-3e8-edited", capacity(300_000_000, False))
    variant("truncated-file", truncate)
    variant("swapped-file", swap)
    variant("wrong-dtype-header", wrong_dtype)
    variant("header-claims-3e8-rows", header_claims_huge)
    return out


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/self/status")
def test_corrupt_save_is_refused_in_milliseconds_without_allocating(tmp_path):
    saves = _corrupt_saves(tmp_path)
    proc = _run(_CORRUPT_LOADER, *map(str, saves.values()))
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    for key, (outcome, seconds) in report["results"].items():
        assert outcome.startswith("SaveFileError"), f"{key}: {outcome}"
        assert seconds < 0.25, f"{key}: took {seconds:.3f} s"
    assert report["peak_growth_mib"] < 32, report
    assert report["len"] == 0  # restore left the target as it was


# ---------------------------------------------------------------------------------------------
# item 4: any column name, and a failed save leaves nothing behind


NAMES = ["a\\b", "../x", "x" * 300, "nul\0byte", "观测/ö", "col:obs", ".", "data-raw", "000.npy"]


def test_any_column_name_round_trips_through_save_and_load(tmp_path):
    buf = rlcore.ReplayBuffer(20, num_envs=2, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(6):
        obs = {"a/b": rng.standard_normal((2, 2)).astype(F32), "键\\..": rng.integers(0, 9, (2, 1))}
        nxt = {"a/b": rng.standard_normal((2, 2)).astype(F32), "键\\..": rng.integers(0, 9, (2, 1))}
        extras = {name: rng.integers(0, 100, (2, 3)).astype(np.int16) for name in NAMES}
        buf.add(
            obs,
            rng.standard_normal((2, 1)).astype(F32),
            rng.standard_normal(2),
            np.zeros(2, bool),
            rng.random(2) < 0.3,
            nxt,
            **extras,
        )
    before = set(os.listdir(tmp_path))
    buf.save(tmp_path / "s")
    assert set(os.listdir(tmp_path)) - before == {"s"}  # no file escaped the save directory
    loaded = rlcore.ReplayBuffer.load(tmp_path / "s")
    assert _states_equal(loaded, buf)
    for name in NAMES:
        np.testing.assert_array_equal(loaded.column(name), buf.column(name))
    target = rlcore.ReplayBuffer(20, num_envs=2)
    target.restore(tmp_path / "s")
    assert _states_equal(target, buf)


@pytest.mark.parametrize("fail_at", ["third file", "manifest rename"])
def test_a_failed_save_leaves_the_directory_exactly_as_it_was(tmp_path, monkeypatch, fail_at):
    import rlcore.buffers.persist as persist

    root = tmp_path / "d"
    first = _filled(200, 0)
    first.save(root)
    _user_files(root)
    tree = _tree(root)
    calls = []

    def fail(real):
        def f(*args, **kwargs):
            calls.append(1)
            if fail_at == "manifest rename" or len(calls) == 3:
                raise OSError(28, "No space left on device (simulated)")
            return real(*args, **kwargs)

        return f

    if fail_at == "third file":
        monkeypatch.setattr(persist, "_write_npy", fail(persist._write_npy))
    else:
        monkeypatch.setattr(persist.os, "replace", fail(persist.os.replace))
    with pytest.raises(OSError, match="No space left"):
        _filled(200, 1).save(root)
    monkeypatch.undo()
    assert _tree(root) == tree
    assert _states_equal(rlcore.ReplayBuffer.load(root), first)


def test_a_save_that_fills_the_disk_leaves_the_directory_exactly_as_it_was(tmp_path):
    """A real write error: the file size limit (RLIMIT_FSIZE) stops the save mid-file."""
    root = tmp_path / "d"
    first = _filled(200, 0)
    first.save(root)
    _user_files(root)
    tree = _tree(root)
    proc = _run(
        """
        import resource, signal, sys
        sys.path.insert(0, sys.argv[2])
        from test_persist import _filled
        buf = _filled(100_000, 1)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        try:
            buf.save(sys.argv[1])
        except OSError as e:
            print("OSError", e.errno)
        """,
        str(root),
        str(Path(__file__).parent),
    )
    assert proc.returncode == 0 and proc.stdout.startswith("OSError"), proc.stdout + proc.stderr
    assert _tree(root) == tree
    assert _states_equal(rlcore.ReplayBuffer.load(root), first)


# ---------------------------------------------------------------------------------------------
# item 5: checksums of every file and of the manifest


def _per_save(tmp_path):
    buf = _filled(400, 7, cls=rlcore.PrioritizedReplayBuffer, alpha=0.6)
    buf.update_priorities(np.arange(0, 300, 3), np.linspace(0.1, 3, 100))
    root = tmp_path / "per"
    buf.save(root)
    return buf, root, json.loads((root / "manifest.json").read_text())


def _swap(a: Path, b: Path):
    tmp = a.with_name("swap.tmp")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


@pytest.mark.parametrize("reader", ["load", "restore"])
@pytest.mark.parametrize("tamper", ["swap terminated and truncated", "edit alpha", "flip a bit of obs"])
def test_tampered_save_is_refused_naming_the_file(tmp_path, reader, tamper):
    buf, root, m = _per_save(tmp_path)
    data = root / m["data_dir"]
    if tamper == "swap terminated and truncated":
        assert not np.array_equal(buf.terminated, buf.truncated)
        _swap(data / _file_of(m, "terminated"), data / _file_of(m, "truncated"))
        named = _file_of(m, "terminated")
    elif tamper == "edit alpha":
        m["config"]["alpha"] = 0.7
        (root / "manifest.json").write_text(json.dumps(m))
        named = "manifest.json"
    else:
        p = data / _file_of(m, "col:obs")
        raw = bytearray(p.read_bytes())
        raw[len(raw) // 2] ^= 0x04
        p.write_bytes(bytes(raw))
        named = _file_of(m, "col:obs")
    target = rlcore.PrioritizedReplayBuffer(400, alpha=0.6)
    with pytest.raises(SaveFileError, match=named.replace(".", r"\.")):
        if reader == "load":
            rlcore.ReplayBuffer.load(root)
        else:
            target.restore(root)
    assert len(target) == 0


def test_every_file_and_the_manifest_carry_a_crc32c_that_matches(tmp_path):
    from rlcore._core import _crc32c
    from rlcore.buffers.persist import seal

    def crc32c(raw: bytes) -> str:
        return f"{_crc32c(np.frombuffer(raw, np.uint8)):08x}"

    assert crc32c(b"123456789") == "e3069283"  # the standard check value of CRC-32C
    _, root, m = _per_save(tmp_path)
    assert m["checksum"] == seal(m)
    body = {k: v for k, v in m.items() if k != "checksum"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert m["checksum"] == "crc32c:" + crc32c(canon.encode())
    for part, entry in m["files"].items():
        assert entry["crc32c"] == crc32c((root / m["data_dir"] / entry["file"]).read_bytes()), part


# ---------------------------------------------------------------------------------------------
# item 10: subclasses keep their class


class MyReplay(rlcore.ReplayBuffer):
    pass


class MyPrioritized(rlcore.PrioritizedReplayBuffer):
    __slots__ = ("tag",)


class MyHER(rlcore.HERReplayBuffer):
    pass


def _her_filled(cls):
    buf = cls(60, num_envs=2, seed=1, distance_threshold=0.05, strategy="final", future_k=2)
    rng = np.random.default_rng(0)
    for t in range(12):

        def o():
            return {
                k: rng.standard_normal((2, 3)).astype(F32)
                for k in ("observation", "achieved_goal", "desired_goal")
            }

        buf.add(
            o(),
            rng.standard_normal((2, 2)).astype(F32),
            rng.standard_normal(2),
            np.zeros(2, bool),
            np.full(2, t % 5 == 4),
            o(),
        )
    return buf


def _sub(kind):
    if kind == "replay":
        buf = _filled(100, 0, cls=MyReplay)
        buf.note = "attribute"  # noqa: B010 - a subclass without __slots__ has a __dict__
        return buf
    if kind == "prioritized":
        buf = _filled(100, 0, cls=MyPrioritized, alpha=0.5)
        buf.tag = ("slot", 1)
        return buf
    return _her_filled(MyHER)


@pytest.mark.parametrize("kind", ["replay", "prioritized", "her"])
@pytest.mark.parametrize("how", ["pickle", "copy", "deepcopy", "save/load", "save/restore"])
def test_subclass_keeps_its_class_and_state_through_pickle_copy_and_save(tmp_path, kind, how):
    buf = _sub(kind)
    if how == "pickle":
        twin = pickle.loads(pickle.dumps(buf))
    elif how == "copy":
        twin = copy.copy(buf)
    elif how == "deepcopy":
        twin = copy.deepcopy(buf)
    elif how == "save/load":
        buf.save(tmp_path / "s")
        twin = type(buf).load(tmp_path / "s")
    else:
        buf.save(tmp_path / "s")
        twin = type(buf).__new__(
            type(buf),
            100 if kind != "her" else 60,
            num_envs=buf.num_envs,
            **(
                {"distance_threshold": 0.05, "strategy": "final", "future_k": 2}
                if kind == "her"
                else {"alpha": 0.5}
                if kind == "prioritized"
                else {}
            ),
        )
        twin.restore(tmp_path / "s")
    assert type(twin) is type(buf)
    assert _states_equal(twin, buf)
    assert twin.sample(8).obs is not None
    if how in ("pickle", "copy", "deepcopy"):
        if kind == "replay":
            assert twin.note == "attribute"
        if kind == "prioritized":
            assert twin.tag == ("slot", 1)


def test_loading_a_subclass_save_runs_no_code_named_in_it(tmp_path):
    buf = _filled(100, 0, cls=MyReplay)
    buf.save(tmp_path / "s")
    assert json.loads((tmp_path / "s" / "manifest.json").read_text())["class"] == "MyReplay"
    # through the base class: the base class (the name in the manifest is never imported)
    assert type(rlcore.ReplayBuffer.load(tmp_path / "s")) is rlcore.ReplayBuffer
    # a subclass of another kind refuses it
    with pytest.raises(SaveFileError, match="not a MyPrioritized"):
        MyPrioritized.load(tmp_path / "s")
