// Recordings of a past conversation (desks with [record]): a player per recorded call,
// and a playhead that walks the conversation's timeline as the recording plays.
// GET /api/rooms/{room}/recordings lists them; the files carry the page's token in the URL
// (an <audio> element sends no Authorization header).

export async function showRecordings({ box, timeline, room, events, token }) {
  box.replaceChildren();
  const query = token ? `?token=${encodeURIComponent(token)}` : "";
  const response = await fetch(
    `/api/rooms/${encodeURIComponent(room.id)}/recordings${query}`,
  );
  if (!response.ok) return;
  const { recordings } = await response.json();
  const origin = Math.min(room.created_at, ...events.map((e) => e.created_at));
  for (const recording of recordings) {
    const item = document.createElement("p");
    item.className = "recording";
    const when = new Date(recording.started_at * 1000).toLocaleString();
    item.append(`Call of ${when} (${recording.seconds.toFixed(1)} s; caller left, agent right) `);
    if (recording.audio_url) {
      const player = document.createElement("audio");
      player.controls = true;
      player.preload = "none";
      player.src = recording.audio_url + query;
      followTimeline(player, timeline, recording.started_at - origin);
      item.append(player);
    }
    if (recording.transcript_url) {
      const link = document.createElement("a");
      link.href = recording.transcript_url + query;
      link.textContent = "transcript";
      item.append(" ", link);
    }
    box.append(item);
  }
}

// A vertical line over the timeline at the recording's current time.
function followTimeline(player, timeline, offset) {
  let head = null;
  const move = () => {
    const axis = timeline.root.querySelector(".axis");
    if (!axis) return;
    if (!head || !head.isConnected) {
      head = document.createElement("div");
      head.className = "playhead";
      timeline.root.append(head);
    }
    const pxPerSecond = axis.offsetWidth / (timeline.end + 2);
    head.style.left = `${axis.offsetLeft + (offset + player.currentTime) * pxPerSecond}px`;
  };
  player.addEventListener("timeupdate", move);
  player.addEventListener("seeked", move);
  player.addEventListener("play", move);
}
