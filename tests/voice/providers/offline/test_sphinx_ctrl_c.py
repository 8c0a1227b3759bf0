"""Ctrl-C at the terminal of a server with PocketSphinx workers is an expected stop: the
workers, which end when the server closes their pipe, print nothing of it (before, each
raised `KeyboardInterrupt` in its `select` and printed the traceback)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.support.signals import signal_masks, terminal_ctrl_c

_SERVER = """
import sys, time
from voicehub.voice.providers.offline.sphinx_workers import SphinxWorkers
workers = SphinxWorkers(processes=1, max_decoders=1)
workers.prewarm(1)
try:  # before the print: the test's Ctrl-C may come as soon as the line is read
    print(*workers.pids, flush=True)
    while True:
        time.sleep(60)
except KeyboardInterrupt:
    workers.close()
    print("stopped", flush=True)
"""


@pytest.mark.slow
def test_ctrl_c_to_the_process_group_stops_the_workers_without_a_traceback() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group, as a server run from a terminal
        preexec_fn=terminal_ctrl_c,
    )
    try:
        assert process.stdout is not None
        worker = int(process.stdout.readline())  # the workers are up and waiting
        os.killpg(process.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            masks = f"{signal_masks(process.pid)}; worker {signal_masks(worker)}"
            raise AssertionError(f"Ctrl-C unheard: {masks}") from None
    finally:
        if process.poll() is None:
            process.kill()
    assert out.strip() == "stopped", err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert process.returncode == 0
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
