"""Who had the CPUs while a commit travelled: an opt-in trace for bench/e2e_airflow.py.

A sampler thread reads, every ``interval`` seconds, the CPU time of every
process of each started process group (``/proc/<pid>/stat``: utime + stime of
all the process's threads, plus cutime + cstime of its reaped children, so a
short-lived child that a parent waited for still counts), the machine's busy
time (``/proc/stat``; what the groups did not use is reported as ``others``)
and the number of runnable tasks on the machine (``procs_running``). Afterwards,
:meth:`CpuTrace.window` says how many ms of CPU each group used between two
instants, and the most tasks that were runnable at once.

Why process groups: every process of bench/e2e_airflow.py is started in its
own session (``Procs.start``), so a group is one of serve, the Spark driver,
Airflow's scheduler, triggerer, dag-processor and api-server, with whatever
they fork. Linux only.

The kernel accounts utime/stime in clock ticks (``SC_CLK_TCK``, 10 ms here):
a window shorter than a few ticks reads as 0 or one tick. The sampler's own
cost (one ``pread`` of a kept ``/proc`` descriptor per process per sample, ~10 %
of a core for 70 processes, measured) shows as the ``bench`` group's CPU.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

TICK_SECONDS = 1.0 / os.sysconf("SC_CLK_TCK")
#: The row for every process outside the traced groups (databases, other users' work).
OTHERS = "others"
#: One tick: finer shows nothing new, coarser blurs a 50 ms round.
DEFAULT_INTERVAL_SECONDS = TICK_SECONDS


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:  # exited between the listing and the read
        return None
    # comm (field 2) may hold spaces and parentheses: split after its last ")".
    return raw[raw.rindex(")") + 2:].split()


def group_pids(pgids: Iterable[int]) -> dict[int, list[int]]:
    """Every live process of each process group, by group id."""
    wanted = {g: [] for g in pgids}  # type: dict[int, list[int]]
    for name in os.listdir("/proc"):
        if name.isdigit():
            f = _stat_fields(int(name))
            # after comm: state(0) ppid(1) pgrp(2)
            if f is not None and int(f[2]) in wanted:
                wanted[int(f[2])].append(int(name))
    return wanted


def _open(pids: list[int]) -> list[int]:
    fds = []
    for pid in pids:
        with contextlib.suppress(OSError):  # exited since the listing
            fds.append(os.open(f"/proc/{pid}/stat", os.O_RDONLY))
    return fds


def _cpu_ticks(fd: int) -> int:
    # pread at 0 on a kept descriptor re-reads the file (a fifth of open + read's cost).
    try:
        raw = os.pread(fd, 1024, 0)
    except OSError:  # the process is gone: its time no longer changes
        return 0
    f = raw[raw.rindex(b")") + 2:].split()
    # utime(11) stime(12) cutime(13) cstime(14), counted from the state field
    return int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])


def _machine() -> tuple[int, int]:
    """(busy ticks of all CPUs: user nice system irq softirq steal, procs_running)."""
    busy = running = 0
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"cpu "):
                v = [int(x) for x in line.split()[1:9]]
                busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
            elif line.startswith(b"procs_running"):
                running = int(line.split()[1])
    return busy, running


@dataclass
class CpuTrace:
    """Samples of each named group's CPU ticks, taken from :meth:`start` to :meth:`stop`."""

    groups: dict[str, int]  # name -> process group id
    interval: float = DEFAULT_INTERVAL_SECONDS
    samples: list[tuple[float, int, dict[str, int]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        by_group = group_pids(self.groups.values())
        fds = {name: _open(by_group[g]) for name, g in self.groups.items()}
        self.samples.clear()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(fds,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _run(self, fds: dict[str, list[int]]) -> None:
        try:
            while not self._stop.is_set():
                ticks = {name: sum(_cpu_ticks(fd) for fd in fs) for name, fs in fds.items()}
                # "others": the machine's busy time that none of the groups used.
                busy, running = _machine()
                ticks[OTHERS] = busy - sum(ticks.values())
                self.samples.append((time.time(), running, ticks))
                self._stop.wait(self.interval)
        finally:
            for fs in fds.values():
                for fd in fs:
                    os.close(fd)

    def window(self, start: float, end: float) -> tuple[dict[str, float], int]:
        """(ms of CPU per group in [start, end], the most runnable tasks seen in it).

        The window widens to the samples just outside it, so a tick landing
        between the last sample before ``start`` and the first after is counted.
        """
        inside = [s for s in self.samples if start <= s[0] <= end]
        before = [s for s in self.samples if s[0] < start][-1:]
        after = [s for s in self.samples if s[0] > end][:1]
        span = before + inside + after
        if len(span) < 2:
            return {}, 0
        first, last = span[0][2], span[-1][2]
        used = {n: (last[n] - first[n]) * TICK_SECONDS * 1000 for n in first}
        return used, max(s[1] for s in span)


def report(rows: list[dict[str, object]], relay: Any = None) -> None:
    """Per round: commit -> logged, runnable tasks at most, and each group's CPU ms in it;
    then the same for logged -> the later trigger's "fired" when the row has ``fired``.

    Each row needs ``trace`` (a stopped :class:`CpuTrace`, replaced here by its
    figures so the row stays JSON) and ``event`` (``revision`` = t0 in ms,
    ``timestampMs`` = logged). ``relay``: a bench/timing_relay.py ``TimingRelay``
    the driver posted through; its first byte splits the window in two.
    """
    print("\n# --trace: CPU ms each process group used between commit (t0) and logged, "
          "then between logged and the later of our two triggers' fired; "
          f"tick {TICK_SECONDS * 1000:.0f} ms; runnable = most tasks runnable at once "
          f"on {os.cpu_count()} CPUs")
    for i, r in enumerate(rows, 1):
        trace, ev = r.pop("trace"), r["event"]
        if not isinstance(trace, CpuTrace) or not isinstance(ev, dict):
            continue
        t0, logged = ev["revision"] / 1000.0, ev["timestampMs"] / 1000.0
        used, runnable = trace.window(t0, logged)
        r["cpu"] = {"ms": used, "runnable": runnable}
        busy = _busy(used)
        got = relay.got.get(int(ev["revision"]), {}) if relay is not None else {}
        split = ""
        if "first" in got:
            r["first_byte"] = got["first"]
            split = (f" = driver {(got['first'] - t0) * 1000:4.0f} + serve "
                     f"{(logged - got['first']) * 1000:3.0f}"
                     + (" (new connection)" if got.get("nth") == 1 else ""))
        print(f"round {i:<2} commit->logged {(logged - t0) * 1000:5.0f} ms{split}  runnable <= "
              f"{runnable:<2}  {busy or 'no tick'}")
        f = r.get("fired")
        if isinstance(f, dict):
            _fired_window(r, trace, logged, [f.get("sensor"), f.get("watcher")])


def _fired_window(r: dict[str, object], trace: CpuTrace, logged: float,
                  fired: list[float | None]) -> None:
    """The same for logged -> the later of the two triggers' "fired" (the triggerer's part)."""
    last = max((t for t in fired if t is not None), default=None)
    if last is None:
        return
    used, runnable = trace.window(logged, last)
    r["cpu_fired"] = {"ms": used, "runnable": runnable}
    print(f"         logged->fired  {(last - logged) * 1000:5.0f} ms  runnable <= "
          f"{runnable:<2}  {_busy(used) or 'no tick'}")


def _busy(used: dict[str, float]) -> str:
    """The groups that used CPU in a window, busiest first: "spark 40, serve 10"."""
    return ", ".join(f"{n} {ms:.0f}" for n, ms in sorted(used.items(), key=lambda x: -x[1])
                     if ms > 0)
