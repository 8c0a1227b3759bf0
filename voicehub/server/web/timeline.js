// The call timeline: one lane per actor on one time axis (seconds since the call started),
// bars for what each did when. Lanes: caller speech, agent speech, turn latency (end of
// caller speech to first agent audio), tool calls, one lane per background task, one per
// delivery (waiting, speaking, interrupted, delivered). Hover a bar for its text.
//
// `LiveTimeline` builds it from call events as they arrive; `storedTimeline` from a past
// conversation in the store (there, speech start times are estimated from the text: the
// store keeps when a line ended, not when it began).

const PX_PER_SECOND = 20;
const MIN_BAR_PX = 4;
const CHARS_PER_SECOND = 16; // a rough speaking rate, for bars rebuilt from the store

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
    const span = `${bar.start.toFixed(1)}-${bar.end === null ? "now" : `${end.toFixed(1)} s`}`;
    element.title = `${bar.state} ${span}${bar.text ? `\n${bar.text}` : ""}`;
    if (bar.label) element.textContent = bar.label;
    return element;
  }
}

// -- live: from the call's events --------------------------------------------------------

export class LiveTimeline {
  constructor(timeline) {
    this.t = timeline;
    this.started = performance.now();
    this.callerEnded = null; // when the caller last stopped speaking, awaiting an answer
    this.pendingDelivery = null; // lane of a result that finished but has no delivery id yet
    this.deliveries = 0;
    timeline.clear();
    timeline.live = true;
    timeline.lane("caller", "caller speech", "caller");
    timeline.lane("agent", "agent speech", "agent");
    timeline.lane("latency", "turn latency", "latency");
    timeline.lane("tools", "tool calls", "tools");
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
            const latency = at - this.callerEnded;
            const bar = t.bar("latency", this.callerEnded, "latency", "end of caller speech to first agent audio", at);
            bar.label = `${latency.toFixed(2)} s`;
            this.callerEnded = null;
          }
        } else {
          t.close(t.openBar("agent"), at);
        }
        break;
      case "transcript":
        if (event.final) this.label(event.role === "user" ? "caller" : "agent", event.text);
        break;
      case "tool_call":
        t.bar("tools", at, "tool", `${event.name} ${event.arguments}`, at + 0.2);
        break;
      case "task_started":
        t.lane(`task:${event.task_id}`, `task ${event.agent_id}`, "task");
        t.bar(`task:${event.task_id}`, at, "running", event.task);
        break;
      case "task_finished":
        t.close(t.openBar(`task:${event.task_id}`), at, event.status);
        this.labelTask(event);
        if (!this.pendingDelivery) {
          this.pendingDelivery = t.lane(`delivery:pending-${++this.deliveries}`, "delivery", "delivery");
          t.bar(this.pendingDelivery.id, at, "waiting", "a result is waiting for a quiet moment");
        }
        break;
      case "delivery_attempt": {
        const lane = this.deliveryLane(event.delivery_id);
        t.close(t.openBar(lane.id), at);
        t.bar(lane.id, at, "speaking", event.text);
        break;
      }
      case "delivery": {
        const lane = this.deliveryLane(event.delivery_id);
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
    const bars = this.t.lanes.get(laneId).bars;
    const bar = bars[bars.length - 1];
    if (bar) bar.text = bar.text ? `${bar.text} ${text}` : text;
  }

  labelTask(event) {
    const bars = this.t.lanes.get(`task:${event.task_id}`)?.bars ?? [];
    const bar = bars[bars.length - 1];
    if (bar) bar.text = `${bar.text}\n-> ${event.summary}`;
  }

  deliveryLane(id) {
    const key = `delivery:${id}`;
    if (this.t.lanes.has(key)) return this.t.lanes.get(key);
    let lane;
    if (this.pendingDelivery) {
      // the result that was waiting is this delivery: give its lane the delivery's id
      lane = this.pendingDelivery;
      this.t.lanes.delete(lane.id);
      lane.id = key;
      this.t.lanes.set(key, lane);
      this.pendingDelivery = null;
    } else {
      lane = this.t.lane(key, "delivery", "delivery");
    }
    lane.label = `delivery ${String(id).slice(4, 10)}`;
    return lane;
  }
}

// -- a past conversation, from the store ---------------------------------------------------

export function storedTimeline(timeline, room, events, tasks, deliveries) {
  const t = timeline;
  t.clear();
  t.live = false;
  const origin = Math.min(room.created_at, ...events.map((e) => e.created_at));
  const at = (stamp) => Math.max(0, stamp - origin);
  const spoken = (text) => Math.max(0.5, text.length / CHARS_PER_SECOND);
  t.lane("caller", "caller speech", "caller");
  t.lane("agent", "agent speech", "agent");
  t.lane("tools", "tool calls", "tools");
  for (const event of events) {
    const end = at(event.created_at);
    if (event.kind === "transcript") {
      const lane = event.role === "user" ? "caller" : "agent";
      const state = event.metadata?.interrupted ? "interrupted" : "speaking";
      t.bar(lane, Math.max(0, end - spoken(event.text)), state, `${event.text}\n(start estimated)`, end);
    } else if (event.kind === "tool_call") {
      t.bar("tools", end, "tool", `${event.metadata?.tool ?? "tool"} ${event.text}`, end + 0.2);
    }
  }
  for (const task of tasks) {
    const id = `task:${task.id}`;
    t.lane(id, `task ${task.agent_id}`, "task");
    const start = at(task.created_at ?? origin);
    const finished = task.finished_at ?? task.updated_at ?? null;
    t.bar(id, start, task.status, `${task.input}\n-> ${task.output ?? ""}`, finished ? at(finished) : start);
  }
  for (const delivery of deliveries) {
    const id = `delivery:${delivery.id}`;
    t.lane(id, `delivery ${delivery.id.slice(4, 10)}`, "delivery");
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
