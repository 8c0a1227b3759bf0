// The voicehub console: call a desk with the microphone (WebRTC where the browser has it,
// else the WebSocket), hear the agent, watch the transcript, tasks, deliveries and the call
// timeline; open a past conversation's timeline from the store. Protocols:
// voicehub/transports/websocket.py and voicehub/server/webrtc.py.

import { Reconnect, announcedClose } from "./reconnect.js";
import { LiveTimeline, Timeline, storedTimeline, topicOf } from "./timeline.js";
import { showRecordings } from "./recordings.js";
import { agentState, callerState } from "./states.js";
import { startWebRTC, webrtcSupported } from "./webrtc.js";

const RATE = 16000;
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const token = params.get("token"); // when the server needs one, open /?token=...

const ui = {
  desk: $("desk"), conversation: $("conversation"), call: $("call"), hangup: $("hangup"),
  status: $("status"), userState: $("user-state"), agentState: $("agent-state"),
  transcript: $("transcript"), interim: $("interim"), tasks: $("tasks"),
  deliveries: $("deliveries"), level: $("level").firstElementChild,
  transport: $("transport"), past: $("past"), agentAudio: $("agent-audio"),
};

let call = null; // the live call: { kind, socket | rtc, context, stream, node, player, live }
const timeline = new Timeline($("timeline"));

// -- page setup --------------------------------------------------------------------------

function newConversationId() {
  const random = crypto.getRandomValues(new Uint32Array(2));
  return `web-${random[0].toString(36)}${random[1].toString(36)}`;
}

function apiHeaders() {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function loadDesks() {
  const response = await fetch("/api/desks", { headers: apiHeaders() });
  if (!response.ok) {
    setStatus(`Cannot list desks (${response.status}): open this page as /?token=...`);
    return;
  }
  const { desks } = await response.json();
  ui.desk.replaceChildren(...desks.map((desk) => {
    const option = new Option(`${desk.title} (${desk.name})`, desk.name);
    option.title = desk.description;
    return option;
  }));
  // the quickstart starts with the Research desk: the page does too, unless told otherwise
  const wanted = params.get("desk") || localStorage.getItem("voicehub.desk") || "research";
  if (desks.some((desk) => desk.name === wanted)) ui.desk.value = wanted;
}

ui.conversation.value = params.get("conversation")
  || localStorage.getItem("voicehub.conversation") || newConversationId();
$("new-conversation").addEventListener("click", () => {
  ui.conversation.value = newConversationId();
});
$("dial").addEventListener("submit", (event) => {
  event.preventDefault();
  startCall().catch((error) => {
    endCall("server", String(error));
    setStatus(`Could not start the call: ${error}`);
  });
});
ui.hangup.addEventListener("click", () => {
  if (!call) return;
  call.hungUp = true;
  if (call.rtc) call.rtc.hangup();
  else if (call.socket?.readyState === WebSocket.OPEN) call.socket.send(JSON.stringify({ type: "hangup" }));
  endCall("caller");
});
if (!webrtcSupported()) {
  ui.transport.querySelector('option[value="webrtc"]').disabled = true;
  ui.transport.value = "websocket";
} else {
  ui.transport.value = params.get("transport") || localStorage.getItem("voicehub.transport") || "webrtc";
}
$("show-past").addEventListener("click", () => {
  showPast(ui.past.value).catch((error) => setStatus(`Cannot open that conversation: ${error}`));
});
loadDesks();
loadPast();

// -- the call ----------------------------------------------------------------------------

async function startCall() {
  const desk = ui.desk.value;
  const conversation = ui.conversation.value.trim();
  if (!desk || !ui.conversation.checkValidity()) return;
  localStorage.setItem("voicehub.desk", desk);
  localStorage.setItem("voicehub.conversation", conversation);
  ui.call.disabled = true;
  ui.hangup.disabled = false;
  setStatus("Asking for the microphone...");

  // Echo cancellation keeps the agent's voice out of the microphone. No noise suppression: it
  // is tuned for human ears and garbles words for the speech recognizer ("research" came out as
  // "were search" in tests/server/test_browser.py); the server's VAD copes with room noise.
  const stream = await navigator.mediaDevices.getUserMedia({
    audio: { channelCount: 1, echoCancellation: true, noiseSuppression: false, autoGainControl: true },
  });
  const context = new AudioContext();
  await context.audioWorklet.addModule("/static/capture-worklet.js");
  const source = context.createMediaStreamSource(stream);
  const node = new AudioWorkletNode(context, "voicehub-capture");
  source.connect(node); // not connected to the speakers: no echo of the caller

  const live = new LiveTimeline(timeline);
  for (const list of [ui.transcript, ui.tasks, ui.deliveries]) list.replaceChildren();
  localStorage.setItem("voicehub.transport", ui.transport.value);
  const reconnect = new Reconnect();
  if (ui.transport.value === "webrtc") {
    call = { kind: "webrtc", rtc: null, context, stream, node, live, reconnect, closeCode: null };
    node.port.onmessage = ({ data }) => {
      ui.level.style.width = `${Math.round(Math.min(1, data.peak * 2) * 100)}%`;
    };
    setStatus(`Calling ${desk} over WebRTC...`);
    await offerWebRTC(call, desk, conversation, false);
    return;
  }
  call = { kind: "websocket", socket: null, context, stream, node, player: new Player(context, null), live, reconnect };
  const current = call;
  node.port.onmessage = ({ data }) => {
    ui.level.style.width = `${Math.round(Math.min(1, data.peak * 2) * 100)}%`;
    if (current.socket?.readyState === WebSocket.OPEN) current.socket.send(data.frame);
  };
  openSocket(current, desk, conversation, false);
}

// The call's WebSocket; opened again (same conversation, `resume=1`) when it drops.
function openSocket(current, desk, conversation, resume) {
  const query = new URLSearchParams({ conversation });
  if (token) query.set("token", token);
  if (resume) query.set("resume", "1");
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/desks/${encodeURIComponent(desk)}/call?${query}`);
  socket.binaryType = "arraybuffer";
  current.socket = socket;
  current.player.clear();
  current.player.socket = socket;
  socket.onopen = () => setStatus(`Connected to ${desk}; speak when you are ready.`);
  socket.onmessage = ({ data }) => {
    if (data instanceof ArrayBuffer) current.player.enqueue(data);
    else onEvent(JSON.parse(data));
  };
  socket.onclose = ({ code, reason }) => {
    if (call !== current || current.socket !== socket) return; // hung up, or replaced
    const wait = current.reconnect.wanted(code) ? current.reconnect.next(code) : null;
    if (wait === null) {
      if (code === 1006) endCall("lost");
      else endCall("server", code === 1000 ? "" : reason);
      return;
    }
    setStatus(`The line dropped (${code}); reconnecting to the conversation...`);
    setTimeout(() => { if (call === current) openSocket(current, desk, conversation, true); }, wait);
  };
}

// A WebRTC call: offered again (same conversation, `resume=1`) when the server hands it over
// or the connection fails.
async function offerWebRTC(current, desk, conversation, resume) {
  current.closeCode = null;
  const rtc = await startWebRTC({
    desk, conversation, token, resume, stream: current.stream, player: ui.agentAudio,
    onEvent: (event) => {
      current.closeCode = announcedClose(event) ?? current.closeCode;
      onEvent(event);
    },
    onEnd: (reason, failed) => {
      if (call !== current) return; // hung up
      const code = current.closeCode ?? (failed ? 1006 : 1000);
      const wait = current.reconnect.wanted(code) ? current.reconnect.next(code) : null;
      if (wait === null) {
        if (reason === "hung up") endCall("caller");
        else if (failed) endCall("lost");
        else endCall("server");
        return;
      }
      setStatus(`The line dropped (${reason}); reconnecting to the conversation...`);
      setTimeout(() => {
        if (call !== current) return;
        offerWebRTC(current, desk, conversation, true).catch((error) => endCall("server", String(error)));
      }, wait);
    },
  });
  if (call === current) current.rtc = rtc;
  else rtc.close("hung up");
}

// One wording for a call's end, whatever the transport: who ended it, and why.
function endCall(by, detail = "") {
  if (!call) return;
  // the server's last error event says why on every transport (the socket's reason may be cut)
  const said = call.lastError ?? detail;
  const why = {
    caller: "Call ended: you hung up.",
    server: `Call ended by the server${said ? `: ${said}` : ""}.`,
    lost: "Call ended: the connection was lost.",
  };
  setStatus(why[call.hungUp ? "caller" : by] ?? "Call ended.");
  const { socket, rtc, context, stream, player, live, roomId } = call;
  call = null;
  player?.clear();
  rtc?.close("hung up");
  live.stop();
  stream.getTracks().forEach((track) => track.stop());
  if (socket && socket.readyState <= WebSocket.OPEN) socket.close(1000, "hangup");
  context.close();
  loadPast(roomId); // the call just ended is the one to look back at
  ui.call.disabled = false;
  ui.hangup.disabled = true;
  ui.userState.textContent = ui.agentState.textContent = "-";
  ui.level.style.width = "0";
}

// -- agent audio: play in order, ack each speech mark once played --------------------------

class Player {
  constructor(context, socket) {
    this.context = context;
    this.socket = socket;
    this.cursor = 0; // context time at which queued audio ends
    this.sources = new Set();
    this.marks = new Map(); // mark id -> timer
  }

  enqueue(arrayBuffer) {
    const pcm = new Int16Array(arrayBuffer);
    const buffer = this.context.createBuffer(1, pcm.length, RATE); // resampled on playback
    const samples = buffer.getChannelData(0);
    for (let i = 0; i < pcm.length; i++) samples[i] = pcm[i] / 0x8000;
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    this.cursor = Math.max(this.cursor, this.context.currentTime + 0.05);
    source.start(this.cursor);
    this.cursor += buffer.duration;
    this.sources.add(source);
    source.onended = () => this.sources.delete(source);
  }

  mark(id) {
    // Everything queued so far ends at `cursor`: ack then, not when the bytes arrived.
    const wait = Math.max(0, this.cursor - this.context.currentTime) * 1000;
    const socket = this.socket; // an ack belongs to the line its mark came on
    const timer = setTimeout(() => {
      this.marks.delete(id);
      if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "playout", id }));
    }, wait);
    this.marks.set(id, timer);
  }

  clear() {
    // The caller barged in: stop at once; the cut audio is never acked.
    for (const source of this.sources) source.stop();
    this.sources.clear();
    for (const timer of this.marks.values()) clearTimeout(timer);
    this.marks.clear();
    this.cursor = 0;
  }
}

// -- events ------------------------------------------------------------------------------

function onEvent(event) {
  call?.live.onEvent(event);
  switch (event.type) {
    case "session":
      call?.reconnect.reset();
      if (call) call.roomId = event.room_id;
      setStatus(`Connected to ${event.title}: ${event.resumed ? "conversation resumed" : "new conversation"} (${event.room_id}); speak when you are ready.`);
      break;
    case "speech_mark": (call?.rtc ?? call?.player)?.mark(event.id); break;
    case "clear": call?.rtc ? call.rtc.clearAudio() : call?.player.clear(); break;
    case "user_state": ui.userState.textContent = callerState(event.state); break;
    case "agent_state": ui.agentState.textContent = agentState(event.state); break;
    case "transcript":
      if (event.role === "user" && !event.final) ui.interim.textContent = event.text;
      else {
        if (event.role === "user") ui.interim.textContent = "";
        add(ui.transcript, event.role === "user" ? "caller" : "agent", event.text);
      }
      break;
    case "tool_call": add(ui.transcript, "tool", `${event.name} ${event.arguments}`); break;
    case "task_started":
      taskTopics.set(event.task_id, event.task);
      upsert(ui.tasks, event.task_id, "running", `${event.agent_id}: ${event.task}`, event.task);
      break;
    case "task_finished":
      upsert(ui.tasks, event.task_id, event.status, `${event.agent_id}: ${event.summary}`, taskTopics.get(event.task_id));
      break;
    case "delivery_attempt":
      upsert(ui.deliveries, event.delivery_id, "speaking", event.text, event.topic);
      break;
    case "delivery":
      upsert(ui.deliveries, event.delivery_id, event.outcome, event.error ? `${event.text} (${event.error})` : event.text, event.topic);
      break;
    case "transfer": // handed to another desk: the same conversation goes on there
      add(ui.transcript, "system", `Transferred to the ${event.title}: call ${event.desk} to go on (conversation ${event.conversation}).`);
      break;
    case "error":
      if (call) call.lastError = event.message;
      add(ui.transcript, "error", `${event.code}: ${event.message}`);
      break;
    default: break;
  }
}

function add(list, who, text) {
  const item = document.createElement("li");
  item.className = who;
  const label = document.createElement("b");
  label.textContent = who;
  item.append(label, " ", text);
  list.append(item);
  item.scrollIntoView({ block: "nearest" });
}

const taskTopics = new Map(); // task id -> its task text, to name the task's list entry

// A list entry per task or delivery: its state, its topic, its text (full text on hover).
function upsert(list, id, state, text, topic) {
  let item = list.querySelector(`[data-id="${CSS.escape(id)}"]`);
  if (!item) {
    item = document.createElement("li");
    item.dataset.id = id;
    list.append(item);
  }
  const label = document.createElement("b");
  label.className = `badge ${state}`;
  label.textContent = state;
  const parts = [label, " "];
  const named = topic ?? item.dataset.topic;
  if (named) {
    item.dataset.topic = named;
    const heading = document.createElement("span");
    heading.className = "topic";
    heading.textContent = topicOf(named);
    parts.push(heading, " ");
  }
  item.title = text;
  item.replaceChildren(...parts, text);
}

function setStatus(text) {
  ui.status.textContent = text;
}

// -- past conversations: their timeline, from the store ------------------------------------

async function loadPast(select = null) {
  const response = await fetch("/api/rooms?limit=30", { headers: apiHeaders() });
  if (!response.ok) return;
  const { rooms } = await response.json();
  const chosen = select ?? ui.past.value;
  ui.past.replaceChildren(...rooms.map((room) => {
    const when = new Date(room.created_at * 1000).toLocaleString();
    return new Option(`${room.id} (${when}${room.live ? ", live" : ""})`, room.id);
  }));
  if (rooms.some((room) => room.id === chosen)) ui.past.value = chosen;
}

async function showPast(roomId) {
  if (!roomId) return;
  const base = `/api/rooms/${encodeURIComponent(roomId)}`;
  const [detail, stored] = await Promise.all([
    fetch(base, { headers: apiHeaders() }).then((r) => r.json()),
    fetch(`${base}/events?limit=1000`, { headers: apiHeaders() }).then((r) => r.json()),
  ]);
  storedTimeline(timeline, detail.room, stored.events, detail.tasks, detail.deliveries);
  fillPastLists(stored.events, detail.tasks, detail.deliveries);
  const box = $("recordings");
  showRecordings({ box, timeline, room: detail.room, events: stored.events, token });
  setStatus(`Timeline of ${roomId}, from the store (speech start times estimated).`);
}

// The lists below the timeline, for a past conversation: as complete as during the call.
function fillPastLists(events, tasks, deliveries) {
  for (const list of [ui.transcript, ui.tasks, ui.deliveries]) list.replaceChildren();
  ui.interim.textContent = "";
  for (const event of events) {
    if (event.kind === "transcript") {
      const who = event.role === "user" ? "caller" : "agent";
      add(ui.transcript, who, event.metadata?.interrupted ? `${event.text} (cut off)` : event.text);
    } else if (event.kind === "tool_call") {
      add(ui.transcript, "tool", `${event.metadata?.tool ?? "tool"} ${event.text}`);
    }
  }
  for (const task of tasks) {
    const said = task.output || task.reason || task.input;
    upsert(ui.tasks, task.id, task.status, `${task.agent_id}: ${said}`, task.input);
  }
  for (const delivery of deliveries) {
    const text = delivery.error ? `${delivery.content} (${delivery.error})` : delivery.content;
    upsert(ui.deliveries, delivery.id, delivery.status, text, delivery.metadata?.task);
  }
}
