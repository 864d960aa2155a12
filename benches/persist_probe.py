"""Figures of the save directory (issue 14, items 2, 3 and 5): concurrent saves, corrupt saves,
the cost of checksums.

    nice python benches/persist_probe.py race --rows 250000 --rounds 10
    nice python benches/persist_probe.py corrupt
    nice python benches/persist_probe.py checksum --rows 1000000 --repeats 5

``race``: over a good save, two threads (then two processes) each save a different buffer of
``rows`` rows (obs 17, act 6 float32) into one directory at the same moment, ``rounds`` times;
after each round the directory is loaded and compared with both states. Prints the rounds that
stayed loadable and the saves that raised.

``corrupt``: a 64-row save with ``config.capacity`` edited to 3e8 and 3e7 (with the manifest's
checksum recomputed, as a faulty writer would leave it, and without); each is loaded in a fresh
process (address space capped at +6 GiB so that code without the checks fails instead of taking
the machine's memory). Prints the outcome, the load time and the peak RSS growth.

``checksum``: saves and loads a full buffer of ``rows`` rows ``repeats`` times, alternately with
real checksums and with every checksum 0 (``rlcore.buffers.persist._checksum`` replaced); prints the
median times and the difference as a share of the save and load time.

Uses the public API only, so the same script measures older code (``PYTHONPATH=...``). Not part
of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import rlcore
from rlcore.errors import SaveFileError


def filled(rows: int, seed: int) -> rlcore.ReplayBuffer:
    """A single-env buffer of ``rows`` rows, ~90 % full of random 50-step episodes."""
    buf = rlcore.ReplayBuffer(rows, seed=seed)
    rng = np.random.default_rng(seed)
    t_len = rows * 9 // 10
    obs = rng.standard_normal((t_len + 1, 17)).astype(np.float32)
    ends = np.arange(t_len) % 50 == 49
    act = rng.standard_normal((t_len, 6)).astype(np.float32)
    buf.extend(obs[:-1], act, rng.standard_normal(t_len), np.zeros(t_len, bool), ends, obs[1:])
    return buf


def same(a: rlcore.ReplayBuffer, b: rlcore.ReplayBuffer) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa["schema"] == sb["schema"] and all(
        np.array_equal(sa["arrays"][k], sb["arrays"][k]) for k in sa["arrays"]
    )


def check_round(root: Path, a: rlcore.ReplayBuffer, b: rlcore.ReplayBuffer) -> str:
    try:
        got = rlcore.ReplayBuffer.load(root)
    except SaveFileError as e:
        return f"unloadable: {e}"
    return "ok" if same(got, a) or same(got, b) else "holds neither save"


def _save_at(buf: rlcore.ReplayBuffer, root: Path, start: threading.Barrier, errors: list[str]) -> None:
    start.wait()
    try:
        buf.save(root)
    except Exception as e:  # noqa: BLE001 - counted
        errors.append(repr(e)[:300])


_WORKER = """
import sys
sys.path.insert(0, sys.argv[3])
from persist_probe import filled
buf = filled(int(sys.argv[4]), int(sys.argv[2]))
print("ready", flush=True)
for line in sys.stdin:
    try:
        buf.save(sys.argv[1])
        print("ok", flush=True)
    except Exception as e:
        print("error", repr(e).replace("\\n", " ")[:300], flush=True)
"""


def race(rows: int, rounds: int) -> None:
    a, b = filled(rows, 1), filled(rows, 2)
    for mode in ("threads", "processes"):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d) / "save"
            a.save(root)
            outcomes, errors = [], []
            if mode == "threads":
                for _ in range(rounds):
                    start = threading.Barrier(2)
                    ths = [threading.Thread(target=_save_at, args=(x, root, start, errors)) for x in (a, b)]
                    for t in ths:
                        t.start()
                    for t in ths:
                        t.join()
                    outcomes.append(check_round(root, a, b))
            else:
                here = str(Path(__file__).parent)
                procs = [
                    subprocess.Popen(
                        [sys.executable, "-c", _WORKER, str(root), str(seed), here, str(rows)],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                    for seed in (1, 2)
                ]
                for p in procs:
                    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
                for _ in range(rounds):
                    for p in procs:
                        assert p.stdin is not None
                        p.stdin.write("go\n")
                        p.stdin.flush()
                    for p in procs:
                        assert p.stdout is not None
                        line = p.stdout.readline().strip()
                        if line != "ok":
                            errors.append(line)
                    outcomes.append(check_round(root, a, b))
                for p in procs:
                    assert p.stdin is not None and p.stdout is not None
                    p.stdin.close()
                    p.wait()
                    p.stdout.close()
            ok = sum(o == "ok" for o in outcomes)
            print(
                f"{mode}: {ok} of {rounds} rounds loadable as one of the two saves; "
                f"{len(errors)} of {2 * rounds} saves raised"
            )
            for o in {o for o in outcomes if o != "ok"}:
                print("   ", o[:200])
            for e in sorted(set(errors))[:3]:
                print("    raised:", e[:200])


_LOADER = """
import json, resource, sys, time
import rlcore
def vm_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1])
limit = (vm_kib() + 6 * 1024 * 1024) * 1024
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
try:
    rlcore.ReplayBuffer.load(sys.argv[1])
    outcome = "loaded"
except BaseException as e:
    outcome = type(e).__name__ + ": " + str(e)
dt = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps([outcome, dt, (peak - before) / 1024]))
"""


def corrupt() -> None:
    try:
        from rlcore.buffers.persist import seal
    except ImportError:  # the code before checksums

        def seal(body: dict) -> str:
            return ""

    with tempfile.TemporaryDirectory() as d:
        for capacity in (300_000_000, 30_000_000):
            for sealed in (True, False):
                root = Path(d) / f"c{capacity}-{sealed}"
                filled(64, 0).save(root)
                m = json.loads((root / "manifest.json").read_text())
                m["config"]["capacity"] = capacity
                if sealed and "checksum" in m:
                    m["checksum"] = seal(m)
                (root / "manifest.json").write_text(json.dumps(m))
                out = subprocess.run(
                    [sys.executable, "-c", textwrap.dedent(_LOADER), str(root)],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                if out.returncode != 0:
                    print(
                        f"capacity {capacity:.0e} ({'checksum recomputed' if sealed else 'edited only'}): "
                        f"process died (rc {out.returncode}) {out.stderr[-200:]}"
                    )
                    continue
                outcome, dt, mib = json.loads(out.stdout)
                print(
                    f"capacity {capacity:.0e} ({'checksum recomputed' if sealed else 'edited only'}): "
                    f"{dt * 1e3:.1f} ms, peak RSS +{mib:.1f} MiB, {outcome[:150]}"
                )


def checksum(rows: int, repeats: int) -> None:
    try:
        import rlcore.buffers.persist as persist
    except ImportError:
        print("no rlcore.buffers.persist: this code computes no checksums")
        return
    real = persist._checksum
    buf = filled(rows, 0)
    times: dict[str, list[float]] = {
        f"{op} {how}": [] for op in ("save", "load") for how in ("crc", "no crc")
    }
    alone = []
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "save"
        for _ in range(repeats):  # interleaved, so that other load on the machine hits both alike
            for how in ("crc", "no crc"):
                persist._checksum = real if how == "crc" else (lambda data, value=0: 0)  # type: ignore[assignment]
                t = time.perf_counter()
                buf.save(root)
                times[f"save {how}"].append(time.perf_counter() - t)
                t = time.perf_counter()
                rlcore.ReplayBuffer.load(root)
                times[f"load {how}"].append(time.perf_counter() - t)
            persist._checksum = real  # type: ignore[assignment]
            parts = buf._state_parts()
            t = time.perf_counter()
            for _, a in parts:
                real(a)
            alone.append(time.perf_counter() - t)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{rows} rows, {size / 2**20:.1f} MiB on disk, median of {repeats} (interleaved):")
    print(f"  CRC-32C of every array, one thread, alone: {statistics.median(alone) * 1e3:.1f} ms")
    for op in ("save", "load"):
        with_, without = med[f"{op} crc"], med[f"{op} no crc"]
        print(
            f"  {op}: {with_:.3f} s with checksums, {without:.3f} s with every checksum 0: "
            f"cost {with_ - without:+.3f} s = {(with_ - without) / with_:+.1%} of the {op} time"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("race")
    r.add_argument("--rows", type=int, default=250_000)
    r.add_argument("--rounds", type=int, default=10)
    sub.add_parser("corrupt")
    c = sub.add_parser("checksum")
    c.add_argument("--rows", type=int, default=1_000_000)
    c.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"rlcore from {os.path.dirname(rlcore.__file__)}")
    if args.what == "race":
        race(args.rows, args.rounds)
    elif args.what == "corrupt":
        corrupt()
    else:
        checksum(args.rows, args.repeats)


if __name__ == "__main__":
    main()
