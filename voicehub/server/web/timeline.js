// The call timeline: one lane per actor on one time axis (seconds since the call started),
// bars for what each did when. Lanes: caller speech, agent speech, turn latency (the
// server's end-of-speech event to first agent audio: after the VAD's silence window, so
// shorter than the voice-to-voice), tool calls, one lane per background task and one per
// result being delivered, each named by its topic. Hover a bar for its text and times; the
// legend (index.html) names the colours.
//
// `LiveTimeline` builds it from call events as they arrive; `storedTimeline` from a past
// conversation in the store (there, speech start times are estimated from the text: the
// store keeps when a line ended, not when it began).

const PX_PER_SECOND = 20;
const MIN_BAR_PX = 8; // a tool call or a task done in milliseconds stays visible and hoverable
const CHARS_PER_SECOND = 16; // a rough speaking rate, for bars rebuilt from the store
const TOPIC_CHARS = 32;
// Tools that hand work on: their tasks start while the tool runs, so the tick goes there
// (the tool_call event itself arrives once the agent's line about it has been spoken).
const DELEGATING = new Set(["delegate_workers", "delegate_loop", "delegate", "start_report"]);

export class Timeline {
  constructor(root) {
    this.root = root;
    this.lanes = new Map(); // id -> { id, label, kind, bars: [] }
    this.end = 0; // seconds: the right edge of the axis
    this.live = false;
  }

  clear() {
    this.lanes.clear();
    this.end = 0;
    this.render();
  }

  lane(id, label, kind) {
    let lane = this.lanes.get(id);
    if (!lane) {
      lane = { id, label, kind, bars: [] };
      this.lanes.set(id, lane);
    }
    return lane;
  }

  // A bar from `start`; `end` null means still going (drawn up to `this.end`).
  bar(laneId, start, state, text, end = null) {
    const bar = { start, end, state, text };
    this.lanes.get(laneId).bars.push(bar);
    this.end = Math.max(this.end, end ?? start);
    return bar;
  }

  openBar(laneId) {
    const bars = this.lanes.get(laneId)?.bars ?? [];
    const last = bars[bars.length - 1];
    return last && last.end === null ? last : null;
  }

  lastBar(laneId) {
    const bars = this.lanes.get(laneId)?.bars ?? [];
    return bars[bars.length - 1] ?? null;
  }

  close(bar, at, state) {
    if (!bar) return;
    bar.end = Math.max(bar.start, at);
    if (state) bar.state = state;
    this.end = Math.max(this.end, bar.end);
  }

  render() {
    const width = Math.ceil((this.end + 2) * PX_PER_SECOND);
    const follow = this.root.scrollLeft + this.root.clientWidth >= this.root.scrollWidth - 40;
    const axis = div("axis");
    axis.style.width = `${width}px`;
    const step = this.end > 120 ? 10 : 5;
    for (let t = 0; t <= this.end + 2; t += step) {
      const tick = div("tick");
      tick.style.left = `${t * PX_PER_SECOND}px`;
      tick.textContent = `${t}s`;
      axis.append(tick);
    }
    const rows = [...this.lanes.values()].map((lane) => {
      const row = div(`lane lane-${lane.kind}`);
      row.dataset.lane = lane.id;
      const label = div("lane-label");
      label.textContent = lane.label;
      label.title = lane.label;
      const track = div("lane-track");
      track.style.width = `${width}px`;
      for (const bar of lane.bars) track.append(this.drawBar(bar));
      row.append(label, track);
      return row;
    });
    this.root.replaceChildren(axis, ...rows);
    if (this.live && follow) this.root.scrollLeft = this.root.scrollWidth;
  }

  drawBar(bar) {
    const end = bar.end ?? this.end;
    const element = div(`bar ${bar.state}`);
    element.style.left = `${bar.start * PX_PER_SECOND}px`;
    element.style.width = `${Math.max(MIN_BAR_PX, (end - bar.start) * PX_PER_SECOND)}px`;
    element.dataset.state = bar.state;
    element.dataset.start = bar.start.toFixed(2);
    element.dataset.end = bar.end === null ? "" : bar.end.toFixed(2);
    const span = bar.end === null ? `${bar.start.toFixed(1)} s - now` : `${bar.start.toFixed(1)} - ${end.toFixed(1)} s`;
    element.title = `${STATE_WORDS[bar.state] ?? bar.state}, ${span}${bar.text ? `\n${bar.text}` : ""}`;
    if (bar.label) element.textContent = bar.label;
    return element;
  }
}

// What a bar's state means, for its hover text.
const STATE_WORDS = {
  speaking: "speaking",
  interrupted: "interrupted (cut off)",
  latency: "turn latency",
  tool: "tool call",
  running: "running",
  ok: "finished",
  failed: "failed",
  timed_out: "timed out",
  cancelled: "cancelled",
  waiting: "waiting for a quiet moment",
  delivered: "delivered",
  held: "held for the next call",
  expired: "expired",
};

export function topicOf(text) {
  const words = String(text ?? "").split("\n")[0].trim();
  return words.length > TOPIC_CHARS ? `${words.slice(0, TOPIC_CHARS - 1)}…` : words;
}

function taskLabel(agent, task) {
  return `${agent ?? "task"}: ${topicOf(task)}`;
}

function resultLabel(topic) {
  return topic ? `result: ${topicOf(topic)}` : "result";
}

function addLatency(t, from, to, estimated) {
  const bar = t.bar("latency", from, "latency", `server's end-of-speech event (after the VAD's silence) to first agent audio; not the voice-to-voice${estimated ? " (estimated)" : ""}`, to);
  bar.label = `${(to - from).toFixed(2)} s`;
}

// -- live: from the call's events --------------------------------------------------------

export class LiveTimeline {
  constructor(timeline) {
    this.t = timeline;
    this.started = performance.now();
    this.callerEnded = null; // when the caller last stopped speaking, awaiting an answer
    this.pendingDelivery = null; // lane of a result that finished but has no delivery id yet
    this.deliveries = 0;
    this.taskTopics = new Map(); // task id -> its task text
    this.unclaimedTaskStarts = []; // tasks started since the last tool call
    timeline.clear();
    timeline.live = true;
    addFixedLanes(timeline);
    this.timer = setInterval(() => this.tick(), 250);
  }

  now() {
    return (performance.now() - this.started) / 1000;
  }

  tick() {
    this.t.end = Math.max(this.t.end, this.now());
    this.t.render();
  }

  stop() {
    clearInterval(this.timer);
    const at = this.now();
    for (const lane of this.t.lanes.values()) this.t.close(this.t.openBar(lane.id), at);
    this.t.live = false;
    this.t.render();
  }

  onEvent(event) {
    const t = this.t;
    const at = this.now();
    switch (event.type) {
      case "user_state":
        if (event.state === "speaking") {
          if (!t.openBar("caller")) t.bar("caller", at, "speaking", "");
        } else if (t.openBar("caller")) {
          t.close(t.openBar("caller"), at);
          this.callerEnded = at;
        }
        break;
      case "agent_state":
        if (event.state === "speaking") {
          if (!t.openBar("agent")) t.bar("agent", at, "speaking", "");
          if (this.callerEnded !== null) {
            addLatency(t, this.callerEnded, at, false);
            this.callerEnded = null;
          }
        } else {
          t.close(t.openBar("agent"), at);
        }
        break;
      case "clear": {
        // the caller talked over the agent: what it was saying was cut off
        const open = t.openBar("agent");
        const last = t.lastBar("agent");
        if (open) t.close(open, at, "interrupted");
        else if (last && at - last.end < 1.0) last.state = "interrupted";
        break;
      }
      case "transcript":
        if (event.final) this.label(event.role === "user" ? "caller" : "agent", event.text);
        break;
      case "tool_call": {
        const started = this.unclaimedTaskStarts;
        const ranAt = DELEGATING.has(event.name) && started.length ? Math.min(...started) : at;
        this.unclaimedTaskStarts = [];
        t.bar("tools", ranAt, "tool", `${event.name} ${event.arguments}`, ranAt + 0.2).label = event.name;
        break;
      }
      case "task_started":
        this.taskTopics.set(event.task_id, event.task);
        this.unclaimedTaskStarts.push(at);
        t.lane(`task:${event.task_id}`, taskLabel(event.agent_id, event.task), "task");
        t.bar(`task:${event.task_id}`, at, "running", event.task);
        break;
      case "task_finished":
        t.close(t.openBar(`task:${event.task_id}`), at, event.status);
        this.labelTask(event);
        if (!this.pendingDelivery) {
          const topic = this.taskTopics.get(event.task_id);
          this.pendingDelivery = t.lane(`delivery:pending-${++this.deliveries}`, resultLabel(topic), "delivery");
          t.bar(this.pendingDelivery.id, at, "waiting", "a result is waiting for a quiet moment");
        }
        break;
      case "delivery_attempt": {
        const lane = this.deliveryLane(event);
        t.close(t.openBar(lane.id), at);
        t.bar(lane.id, at, "speaking", event.text);
        break;
      }
      case "delivery": {
        const lane = this.deliveryLane(event);
        const bar = t.openBar(lane.id);
        t.close(bar, at, event.outcome);
        if (bar) bar.text = event.text;
        if (event.outcome === "interrupted" && !event.final) {
          t.bar(lane.id, at, "waiting", "interrupted: waiting for the next quiet moment");
        }
        break;
      }
      default:
        return;
    }
    t.end = Math.max(t.end, at);
    t.render();
  }

  // The transcript of a speech arrives around its end: it labels the last bar of the lane.
  label(laneId, text) {
    const bar = this.t.lastBar(laneId);
    if (bar) bar.text = bar.text ? `${bar.text} ${text}` : text;
  }

  labelTask(event) {
    const bar = this.t.lastBar(`task:${event.task_id}`);
    if (bar) bar.text = `${bar.text}\n-> ${event.summary}`;
  }

  deliveryLane(event) {
    const key = `delivery:${event.delivery_id}`;
    let lane = this.t.lanes.get(key);
    if (!lane && this.pendingDelivery) {
      // the result that was waiting is this delivery: give its lane the delivery's id
      lane = this.pendingDelivery;
      this.t.lanes.delete(lane.id);
      lane.id = key;
      this.t.lanes.set(key, lane);
      this.pendingDelivery = null;
    }
    lane = lane ?? this.t.lane(key, resultLabel(null), "delivery");
    if (event.topic) lane.label = resultLabel(event.topic);
    return lane;
  }
}

function addFixedLanes(t) {
  t.lane("caller", "caller speech", "caller");
  t.lane("agent", "agent speech", "agent");
  t.lane("latency", "turn latency", "latency");
  t.lane("tools", "tool calls", "tools");
}

// -- a past conversation, from the store ---------------------------------------------------

export function storedTimeline(timeline, room, events, tasks, deliveries) {
  const t = timeline;
  t.clear();
  t.live = false;
  const origin = Math.min(room.created_at, ...events.map((e) => e.created_at));
  const at = (stamp) => Math.max(0, stamp - origin);
  const spoken = (text) => Math.max(0.5, text.length / CHARS_PER_SECOND);
  addFixedLanes(t);
  let callerEnded = null;
  for (const event of events) {
    const end = at(event.created_at);
    if (event.kind === "transcript") {
      const caller = event.role === "user";
      const state = event.metadata?.interrupted ? "interrupted" : "speaking";
      const start = Math.max(0, end - spoken(event.text));
      t.bar(caller ? "caller" : "agent", start, state, `${event.text}\n(start estimated)`, end);
      if (caller) callerEnded = end;
      else if (callerEnded !== null && start >= callerEnded) {
        addLatency(t, callerEnded, start, true);
        callerEnded = null;
      }
    } else if (event.kind === "tool_call") {
      const name = event.metadata?.tool ?? "tool";
      t.bar("tools", end, "tool", `${name} ${event.text}`, end + 0.2).label = name;
    }
  }
  for (const task of tasks) {
    const id = `task:${task.id}`;
    t.lane(id, taskLabel(task.agent_id, task.input), "task");
    const start = at(task.created_at ?? origin);
    const finished = task.finished_at ?? null;
    t.bar(id, start, task.status, `${task.input}\n-> ${task.output || task.reason || ""}`, finished ? at(finished) : start);
  }
  for (const delivery of deliveries) {
    const id = `delivery:${delivery.id}`;
    t.lane(id, resultLabel(delivery.metadata?.task), "delivery");
    const done = at(delivery.updated_at);
    const speaking = delivery.status === "delivered" ? Math.max(at(delivery.created_at), done - spoken(delivery.content)) : done;
    t.bar(id, at(delivery.created_at), "waiting", "waiting for a quiet moment", speaking);
    if (delivery.status === "delivered") t.bar(id, speaking, "delivered", `${delivery.content}\n(start estimated)`, done);
    else t.bar(id, done, delivery.status, delivery.content, done + 0.2);
  }
  t.render();
}

function div(className) {
  const element = document.createElement("div");
  element.className = className;
  return element;
}
