"""Suite-wide settings."""

from hypothesis import settings

# Property tests are deterministic (same examples every run) and never fail on time: the
# machine may be busy, and a test asserts behaviour, not speed.
settings.register_profile("voicehub", derandomize=True, database=None, deadline=None)
settings.load_profile("voicehub")
