// Coming back to the same conversation when the call's line drops, as `voicehub call` does
// (voicehub/client/reconnect.py): the instance serving the call died (no close frame: 1006),
// handed the call over while draining (1012), or is busy or draining (1013). The page reconnects to the address it called (a load balancer in production)
// with the same conversation and `resume=1` (a call in progress is never refused busy): the
// first attempt at once (busy or draining: after the backoff), then after a backoff of 0.1 s
// doubling to 2 s, with jitter, for up to 30 s. Not after a hang-up, nor when the server
// ended or refused the call for good.

const RECONNECT_CODES = new Set([1006, 1012, 1013]);
const LATER = 1013; // busy or draining: the first attempt waits too

export class Reconnect {
  constructor({ first = 100, most = 2000, jitter = 0.3, giveUpAfter = 30000 } = {}) {
    Object.assign(this, { first, most, jitter, giveUpAfter });
    this.reset();
  }

  // A call went live: the next drop starts a fresh backoff.
  reset() {
    this.delay = this.first;
    this.since = null;
  }

  // Whether a line closed with `code` comes back.
  wanted(code) {
    return RECONNECT_CODES.has(code);
  }

  // Milliseconds to wait before the next attempt, or null to give up.
  next(code) {
    const now = Date.now();
    if (this.since === null) this.since = now;
    if (now - this.since > this.giveUpAfter) return null;
    if (code !== LATER && this.delay === this.first) {
      this.delay = this.first * 2;
      return 0;
    }
    const wait = this.delay * (1 - this.jitter * Math.random());
    this.delay = Math.min(this.delay * 2, this.most);
    return wait;
  }
}

// The close code the server meant: over WebRTC it announces a close as an error event
// ("closed_1012") before the data channel goes.
export function announcedClose(event) {
  const found = /^closed_(\d+)$/.exec(event?.code ?? "");
  return found ? Number(found[1]) : null;
}
