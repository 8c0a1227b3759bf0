"""The desks as a LiveKit agent worker: dispatch, load, the job entrypoint, tokens."""
