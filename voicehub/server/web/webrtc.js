// A call over WebRTC: the microphone track goes out as Opus, the agent's track plays on an
// <audio> element, and the call's JSON events (the WebSocket protocol's text frames) travel
// on a data channel. Signaling: POST the offer to /desks/{desk}/webrtc (WHIP-shaped), the
// answer comes back with the call's URL in Location; DELETE it to hang up.

// The agent's audio goes out in real time and a speech mark leaves the server right after
// its last frame: ack once the jitter buffer has played that frame too.
const PLAYOUT_DELAY_MS = 200;
const GATHER_TIMEOUT_MS = 3000;

export function webrtcSupported() {
  return typeof RTCPeerConnection === "function" && "createDataChannel" in RTCPeerConnection.prototype;
}

// `onEnd(reason, failed)`: `failed` when the connection broke (the server may have died).
export async function startWebRTC({ desk, conversation, token, resume, stream, player, onEvent, onEnd }) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const pc = new RTCPeerConnection({ iceServers: [] });
  const channel = pc.createDataChannel("voicehub");
  for (const track of stream.getAudioTracks()) pc.addTrack(track, stream);
  pc.ontrack = ({ track, streams }) => {
    // Chromium plays a remote stream through WebAudio only once a media element holds it.
    player.srcObject = streams[0] ?? new MediaStream([track]);
    player.play().catch(() => {});
  };
  const marks = new Set();
  const call = {
    resource: null,
    ended: false,
    send(message) {
      if (channel.readyState === "open") channel.send(JSON.stringify(message));
    },
    clearAudio() {
      // a jitter buffer cannot be flushed; drop the acks still waiting instead
      for (const timer of marks) clearTimeout(timer);
      marks.clear();
    },
    mark(id) {
      const timer = setTimeout(() => {
        marks.delete(timer);
        call.send({ type: "playout", id });
      }, PLAYOUT_DELAY_MS);
      marks.add(timer);
    },
    async hangup() {
      call.send({ type: "hangup" });
      if (call.resource) {
        await fetch(call.resource, { method: "DELETE", headers }).catch(() => {});
      }
      call.close("hung up");
    },
    close(reason, failed = false) {
      if (call.ended) return;
      call.ended = true;
      call.clearAudio();
      pc.close();
      player.srcObject = null;
      onEnd(reason, failed);
    },
  };
  channel.onmessage = ({ data }) => onEvent(JSON.parse(data));
  channel.onclose = () => call.close("the server ended the call");
  pc.onconnectionstatechange = () => {
    if (pc.connectionState === "failed" || pc.connectionState === "disconnected") {
      call.close(`the connection ${pc.connectionState}`, true);
    }
  };

  await pc.setLocalDescription(await pc.createOffer());
  await gathered(pc);
  const query = new URLSearchParams({ conversation });
  if (token) query.set("token", token);
  if (resume) query.set("resume", "1"); // a call in progress: never refused busy
  const response = await fetch(`/desks/${encodeURIComponent(desk)}/webrtc?${query}`, {
    method: "POST",
    headers: { "Content-Type": "application/sdp", ...headers },
    body: pc.localDescription.sdp,
  });
  const body = await response.text();
  if (response.status !== 201) {
    pc.close();
    throw new Error(`refused (${response.status}): ${body}`);
  }
  call.resource = new URL(response.headers.get("Location"), location.href).href;
  await pc.setRemoteDescription({ type: "answer", sdp: body });
  return call;
}

// The server does not trickle ICE: send the offer once the candidates are in it.
function gathered(pc) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      if (pc.iceGatheringState === "complete") resolve();
    };
    pc.addEventListener("icegatheringstatechange", done);
    setTimeout(resolve, GATHER_TIMEOUT_MS);
  });
}
