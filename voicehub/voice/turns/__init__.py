"""The pipeline engine's turn-taking policy: end-of-turn model, hesitations, backchannels,
resuming after a false interruption, preemptive replies."""
