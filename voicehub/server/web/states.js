// The caller's and the agent's states as the page shows them: livekit's names (passed
// through by the server, voicehub/voice/events.py) in a caller's words. A caller
// "listening" is quiet; a state not named here is shown as it is.

const CALLER = { speaking: "speaking", listening: "quiet", away: "away" };
const AGENT = { initializing: "starting", idle: "listening" };

export function callerState(state) {
  return CALLER[state] ?? state;
}

export function agentState(state) {
  return AGENT[state] ?? state;
}
