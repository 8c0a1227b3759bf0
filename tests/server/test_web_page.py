"""The console page's scripts, run in Node: both parse, the capture worklet turns the
microphone's rate into 16 kHz PCM16 frames of 640 bytes with the tone intact, and the page
comes back to a dropped call at once unless the server was busy."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from voicehub.server.app import WEB_DIR

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js to run the page scripts")

# Stubs for the AudioWorklet globals, then one second of a 440 Hz tone in 128-sample blocks.
_HARNESS = """
const fs = require("fs");
const rate = Number(process.argv[2]);
const frames = [];
globalThis.sampleRate = rate;
globalThis.AudioWorkletProcessor = class { constructor() {
  this.port = { postMessage: (message) => frames.push(message) }; } };
let Processor = null;
globalThis.registerProcessor = (name, cls) => { Processor = cls; };
eval(fs.readFileSync(process.argv[1], "utf8"));
const processor = new Processor();
for (let start = 0; start < rate; start += 128) {
  const block = new Float32Array(Math.min(128, rate - start));
  for (let i = 0; i < block.length; i++) {
    block[i] = 0.5 * Math.sin(2 * Math.PI * 440 * (start + i) / rate);
  }
  processor.process([[block]]);
}
const samples = frames.flatMap((f) => Array.from(new Int16Array(f.frame)));
let crossings = 0;
for (let i = 1; i < samples.length; i++) if ((samples[i - 1] < 0) !== (samples[i] < 0)) crossings++;
console.log(JSON.stringify({
  frames: frames.length, sizes: [...new Set(frames.map((f) => f.frame.byteLength))],
  peak: Math.max(...samples.map(Math.abs)), hertz: crossings / 2 / (samples.length / 16000),
}));
"""


@pytest.mark.parametrize(
    "name", ["app.js", "capture-worklet.js", "timeline.js", "webrtc.js", "recordings.js"]
)
def test_the_page_scripts_parse(name: str) -> None:
    assert NODE is not None
    subprocess.run([NODE, "--check", str(WEB_DIR / name)], check=True, timeout=30)


@pytest.mark.parametrize("rate", [48000, 44100, 16000])
def test_the_capture_worklet_sends_20_ms_frames_at_16_khz(rate: int) -> None:
    assert NODE is not None
    worklet = str(WEB_DIR / "capture-worklet.js")
    done = subprocess.run(
        [NODE, "-e", _HARNESS, worklet, str(rate)],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    result = json.loads(done.stdout)
    assert result["sizes"] == [640]
    assert 49 <= result["frames"] <= 50  # one second, less the resampler's last partial frame
    assert 435 < result["hertz"] < 445
    assert 14000 < result["peak"] < 17000  # half scale: the smoothing keeps the level


# The page's Reconnect (an ES module): the first waits after a drop with each close code.
_RECONNECT = """
const { Reconnect } = await import(process.argv[1]);
const waits = {};
for (const code of [1006, 1012, 1013]) {
  const backoff = new Reconnect({ first: 100, most: 400, jitter: 0 });
  waits[code] = [backoff.next(code), backoff.next(code), backoff.next(code), backoff.next(code)];
}
console.log(JSON.stringify(waits));
"""


def test_the_page_tries_again_at_once_unless_the_server_was_busy() -> None:
    assert NODE is not None
    module = (WEB_DIR / "reconnect.js").as_uri()
    done = subprocess.run(
        [NODE, "--input-type=module", "-e", _RECONNECT, module],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    waits = json.loads(done.stdout)
    assert waits["1006"] == [0, 200, 400, 400]  # the instance died: at once, then the backoff
    assert waits["1012"] == [0, 200, 400, 400]  # handed over
    assert waits["1013"] == [100, 200, 400, 400]  # busy or draining: the backoff first
