// Microphone capture: mono, resampled to 16 kHz, cut into 20 ms frames of PCM16 (640 bytes).
// Runs on the audio thread; posts each frame's ArrayBuffer (transferred) to the page.

const TARGET_RATE = 16000;
const FRAME_SAMPLES = 320; // 20 ms at 16 kHz

class CaptureProcessor extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / TARGET_RATE; // input samples per output sample
    this.position = 0; // where the next output sample falls, in input samples
    this.previous = 0; // last input sample of the previous block (for interpolation)
    this.frame = new Int16Array(FRAME_SAMPLES);
    this.filled = 0;
    this.peak = 0;
  }

  process(inputs) {
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true;
    const input = channels[0];
    // Average the channels and smooth over one output period (a cheap anti-alias filter).
    const mono = new Float32Array(input.length);
    for (const channel of channels) {
      for (let i = 0; i < input.length; i++) mono[i] += channel[i] / channels.length;
    }
    const width = Math.max(1, Math.floor(this.step));
    if (width > 1) {
      let sum = 0;
      const smoothed = new Float32Array(mono.length);
      for (let i = 0; i < mono.length; i++) {
        sum += mono[i];
        if (i >= width) sum -= mono[i - width];
        smoothed[i] = sum / Math.min(i + 1, width);
      }
      mono.set(smoothed);
    }
    // Linear interpolation at the output instants; position -1 is the previous block's end.
    while (this.position < mono.length) {
      const index = Math.floor(this.position);
      const fraction = this.position - index;
      const before = index - 1 < 0 ? this.previous : mono[index - 1];
      const value = before + (mono[index] - before) * fraction;
      const clipped = Math.max(-1, Math.min(1, value));
      this.peak = Math.max(this.peak, Math.abs(clipped));
      this.frame[this.filled++] = clipped < 0 ? clipped * 0x8000 : clipped * 0x7fff;
      if (this.filled === FRAME_SAMPLES) {
        const buffer = this.frame.buffer;
        this.port.postMessage({ frame: buffer, peak: this.peak }, [buffer]);
        this.frame = new Int16Array(FRAME_SAMPLES);
        this.filled = 0;
        this.peak = 0;
      }
      this.position += this.step;
    }
    this.position -= mono.length;
    this.previous = mono[mono.length - 1];
    return true;
  }
}

registerProcessor("voicehub-capture", CaptureProcessor);
