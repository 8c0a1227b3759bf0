"""Make the noise-suppression fixtures in this folder (committed; run again only to change
them): `.venv/bin/python tests/data/denoise/make_denoise_fixtures.py`.

- `request_8k.wav`: "could you look into solar panels for me" (Piper) through the phone path
  (8 kHz, 300-3400 Hz, mu-law), with half a second of silence either side.
- `request_car_0db_8k.wav`: the same with car noise under it at 0 dB SNR (noise as loud as
  the talker; `voicehub_dev.bench.noise_mix`).
- `car_8k.wav`: two seconds of that car noise alone, at the level it has in the mix.
- `babble_8k.wav`: two seconds of babble (six synthetic talkers) at -26 dBFS.

Every noise is made by `noise_mix` from a fixed seed; nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from voicehub.voice.audio import int16_to_pcm16, pcm16_to_int16, write_wav
from voicehub.voice.providers.offline import synthesize
from voicehub_dev.bench.noise_mix import active_rms, mix, noise
from voicehub_dev.bench.phone import phone_band

HERE = Path(__file__).resolve().parent
RATE = 8000
WORDS = "could you look into solar panels for me"


def main() -> None:
    speech = pcm16_to_int16(phone_band(synthesize(WORDS, voice="piper", sample_rate=16000)))
    quiet = np.zeros(RATE // 2, dtype=np.int16)
    request = np.concatenate((quiet, speech, quiet))
    car = noise("car", len(request) / RATE, RATE, seed=7)
    noisy = mix(request, car, 0.0)
    # the car noise alone, at the gain it has in the mix
    gain = active_rms(request.astype(np.float64)) / float(np.sqrt(np.mean(car**2)))
    car_alone = np.clip(np.rint(car[: 2 * RATE] * gain), -32768, 32767).astype(np.int16)
    babble = noise("babble", 2.0, RATE, seed=7) * 10 ** (-6 / 20)
    babble16 = np.clip(np.rint(babble), -32768, 32767).astype(np.int16)
    for name, samples in (
        ("request_8k.wav", request),
        ("request_car_0db_8k.wav", noisy),
        ("car_8k.wav", car_alone),
        ("babble_8k.wav", babble16),
    ):
        write_wav(HERE / name, int16_to_pcm16(samples), RATE)
        print(f"wrote {name}: {len(samples) / RATE:.2f} s")


if __name__ == "__main__":
    main()
