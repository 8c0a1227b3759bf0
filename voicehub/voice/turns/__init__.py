"""The pipeline engine's turn-taking policy (docs/turn-taking.md), pure pieces the engine's
state machine calls, and the end-of-turn model they weigh:

- `policy`: when a caller's turn ends (`decide`: silence, words, the model, the ceiling);
- `words`: whether the words so far end mid-request (`ends_open`);
- `overlap`: caller speech over the agent's: backchannel, stop, turn (`classify_overlap`);
- `noise`: whether a short burst of sound is noise, not speech (`is_noise_burst`);
- `repair`: a turn the caller goes on with before the reply was heard (`resumes_turn`);
- `model` (the interface) and `smart_turn` (Smart Turn v3.2, batched across calls);
- `setup`: a desk's `turn` settings and model, VAD-only where the model cannot load.
"""
