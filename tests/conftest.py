"""Suite-wide settings."""

import signal
import warnings
from collections.abc import Iterator

import pytest
from hypothesis import settings

# Property tests are deterministic (same examples every run) and never fail on time: the
# machine may be busy, and a test asserts behaviour, not speed.
settings.register_profile("voicehub", derandomize=True, database=None, deadline=None)
settings.load_profile("voicehub")


@pytest.fixture(autouse=True)
def _ctrl_c_left_as_found() -> Iterator[None]:
    """A test that leaves SIGINT ignored in this process is named, and the handler put
    back: an ignored SIGINT is inherited by every child started after it, so a later test's
    Ctrl-C to its child would go unheard (both Ctrl-C tests once hung this way)."""
    before = signal.getsignal(signal.SIGINT)
    yield
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN and before is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, before)
        warnings.warn("this test left SIGINT ignored (handler restored)", stacklevel=1)
