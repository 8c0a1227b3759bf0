"""Near its memory limit a server refuses new calls busy and says so on `/ready`, while its
live calls go on; the limit is read from the process's cgroup (v2, v1) or its rlimits."""

from __future__ import annotations

import logging
import math
import resource
from pathlib import Path

import pytest

from tests.e2e_helpers import running_server
from tests.support.waiting import until
from voicehub.client.call import CallClient, CallOptions
from voicehub.desks.call_admission import CallAdmission, LoadMeter
from voicehub.desks.desk import load_desks
from voicehub.errors import VoicehubError
from voicehub.server.admission_memory import (
    MemoryGuard,
    MemoryReading,
    cgroup_reading,
    memory_verdict,
    rlimit_readings,
)
from voicehub.server.settings import ServerSettings
from voicehub.voice.events import CallError
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
MB = 1_000_000


def at(share: float, source: str = "RLIMIT_AS") -> MemoryReading:
    return MemoryReading(source, round(share * 1000 * MB), 1000 * MB)


@pytest.mark.parametrize(
    ("shares", "refusing", "refused"),
    [
        ((), False, False),  # no limit at all
        ((), True, False),
        ((0.5,), False, False),
        ((0.89,), False, False),
        ((0.9,), False, True),  # from REFUSE_AT
        ((0.87,), False, False),  # between the two: as it was
        ((0.87,), True, True),
        ((0.85,), True, True),
        ((0.84,), True, False),  # below ADMIT_BELOW: admitted again
        ((0.3, 0.95), False, True),  # the tightest limit decides
        ((0.95, 0.3), False, True),
        ((1.2,), False, True),
    ],
)
def test_the_memory_verdict(shares: tuple[float, ...], refusing: bool, refused: bool) -> None:
    readings = [at(share, f"limit {i}") for i, share in enumerate(shares)]
    now_refusing, reason = memory_verdict(readings, refusing)
    assert now_refusing is refused and (reason is not None) is refused


def test_the_reason_names_the_tightest_limit_and_its_figures() -> None:
    _, reason = memory_verdict([at(0.5, "RLIMIT_DATA"), at(0.93, "cgroup memory.max")], False)
    assert reason == "memory near its limit (930 of 1000 MB, cgroup memory.max)"


def test_a_zero_limit_counts_as_full() -> None:
    assert memory_verdict([MemoryReading("RLIMIT_AS", 0, 0)], False)[0] is True


def write(folder: Path, **files: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text)


def test_cgroup_v2_memory_max_of_the_own_cgroup(tmp_path: Path) -> None:
    (tmp_path / "self").write_text("0::/system.slice/voicehub.service\n")
    write(
        tmp_path / "root/system.slice/voicehub.service",
        memory_max="1000000000\n",
        memory_current="950000000\n",
        memory_stat="anon 800000000\ninactive_file 100000000\nactive_file 50000000\n",
    )
    reading = cgroup_reading(tmp_path / "root", tmp_path / "self")
    # the inactive page cache is not counted: the kernel takes it back first
    assert reading == MemoryReading("cgroup memory.max", 850_000_000, 1_000_000_000)


def test_cgroup_v2_without_a_limit_and_a_container_mount(tmp_path: Path) -> None:
    (tmp_path / "self").write_text("0::/kubepods/pod1/abc\n")
    # a container mounts its own cgroup at the root; the host's path is not there
    write(tmp_path / "root", memory_max="max\n", memory_current="5000\n", memory_stat="")
    assert cgroup_reading(tmp_path / "root", tmp_path / "self") is None
    write(tmp_path / "root", memory_max="4000000\n")
    assert cgroup_reading(tmp_path / "root", tmp_path / "self") == MemoryReading(
        "cgroup memory.max", 5000, 4_000_000
    )


def test_cgroup_v1_memory_controller(tmp_path: Path) -> None:
    (tmp_path / "self").write_text("5:devices:/x\n4:memory:/process_api/abc\n0::/\n")
    folder = tmp_path / "root/memory/process_api/abc"
    write(
        folder,
        memory_limit_in_bytes="9223372036854771712\n",  # v1's "no limit"
        memory_usage_in_bytes="600\n",
        memory_stat="cache 100\ntotal_inactive_file 100\n",
    )
    assert cgroup_reading(tmp_path / "root", tmp_path / "self") is None
    write(folder, memory_limit_in_bytes="1000\n")
    assert cgroup_reading(tmp_path / "root", tmp_path / "self") == MemoryReading(
        "cgroup memory.limit_in_bytes", 500, 1000
    )


def test_no_cgroup_file_no_reading(tmp_path: Path) -> None:
    assert cgroup_reading(tmp_path / "root", tmp_path / "missing") is None
    (tmp_path / "self").write_text("0::/\n")
    assert cgroup_reading(tmp_path / "root", tmp_path / "self") is None


STATUS = "Name:\tpython\nVmPeak:\t 9000 kB\nVmSize:\t 8000 kB\nVmRSS:\t 300 kB\nVmData:\t 2000 kB\n"


def test_rlimits_against_the_virtual_size_and_the_data_segment(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text(STATUS)
    limits = {resource.RLIMIT_AS: (10_000 * 1024, resource.RLIM_INFINITY)}

    def getrlimit(which: int) -> tuple[int, int]:
        return limits.get(which, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    assert rlimit_readings(getrlimit, status) == [
        MemoryReading("RLIMIT_AS", 8000 * 1024, 10_000 * 1024)
    ]
    limits[resource.RLIMIT_DATA] = (2100 * 1024, 4000 * 1024)
    assert [r.source for r in rlimit_readings(getrlimit, status)] == ["RLIMIT_AS", "RLIMIT_DATA"]
    assert rlimit_readings(lambda which: (-1, -1), status) == []


def test_the_guard_logs_each_turn(caplog: pytest.LogCaptureFixture) -> None:
    shares = [0.5, 0.92, 0.95, 0.86, 0.8, 0.8]
    guard = MemoryGuard(read=lambda: [at(shares.pop(0))])
    with caplog.at_level(logging.WARNING, "voicehub.server"):
        verdicts = [guard.busy() for _ in range(6)]
    assert [v is not None for v in verdicts] == [False, True, True, True, False, False]
    assert [r.getMessage() for r in caplog.records] == [
        "memory near its limit (920 of 1000 MB, RLIMIT_AS): new calls refused, live calls go on",
        "memory back under its limit (800 of 1000 MB): new calls admitted again",
    ]


def test_the_guard_checks_its_thresholds() -> None:
    with pytest.raises(ValueError, match=r"admit_below \(0.95\) <= refuse_at \(0.9\)"):
        MemoryGuard(read=list, refuse_at=0.9, admit_below=0.95)


def test_a_guard_refuses_a_call_without_any_load_limit() -> None:
    meter = LoadMeter(calls=lambda: 0, cpu=lambda: 0.0, now=lambda: 0.0, cpus=1)
    reasons: list[str | None] = [None, "memory near its limit (x)"]
    admission = CallAdmission(meter, max_load=None, guards=(lambda: reasons[0],))
    assert admission.admit() is None and meter.pending == 1
    reasons.pop(0)
    assert admission.admit() == "memory near its limit (x)" and meter.pending == 1


@pytest.mark.slow
async def test_near_its_memory_limit_a_server_refuses_new_calls_and_keeps_its_live_one(
    tmp_path: Path,
) -> None:
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")
    desks = {"research": load_desks(CHANNELS)["research"]}
    readings = [at(0.5)]
    stack = ScriptedStack()
    async with running_server(settings, voice=stack, desks=desks) as server:
        server.parts.memory.read = lambda: readings

        def options(conversation: str) -> CallOptions:
            return CallOptions(
                desk="research", server=server.url, conversation=conversation,
                realtime=False, playout_speed=math.inf, quiet=0.2,
            )  # fmt: skip

        async with CallClient(options("live")) as live:
            await live.wait_for_turn()
            readings[:] = [at(0.95)]
            ready = await server.get("/ready")
            assert ready.status_code == 503 and ready.json()["reason"] == "busy"
            refused = CallClient(options("new"))
            with pytest.raises(VoicehubError, match=r"refused \(1013\).*busy"):
                await refused.connect()
            await refused.close()
            [error] = refused.report.events_of(CallError)
            assert error.code == "busy" and "memory near its limit (950 of 1000" in error.message
            # the live call goes on: the caller is still heard
            await live.type_text("are you still there")
            await until(lambda: "are you still there" in stack.sessions[0].texts)
            assert not live.closed
            readings[:] = [at(0.7)]
            assert (await server.get("/ready")).status_code == 200
        async with CallClient(options("again")) as again:
            await again.wait_for_turn()
