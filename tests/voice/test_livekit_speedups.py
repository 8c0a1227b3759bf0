"""The endpointing resolver livekit's activity uses gives livekit's own answers."""

from __future__ import annotations

import pytest

from voicehub.voice.livekit_speedups import install, resolve_endpointing


@pytest.mark.parametrize("mode", [None, "vad", "stt", "manual", "realtime_llm"])
@pytest.mark.parametrize("config", [None, {}, {"min_delay": 0.3, "max_delay": 1.5}])
def test_same_options_as_livekit_for_mode_names(mode: str | None, config: dict | None) -> None:
    from livekit.agents.voice.turn import _resolve_endpointing

    expected = _resolve_endpointing(config, turn_detection=mode)  # type: ignore[arg-type]
    assert resolve_endpointing(config, turn_detection=mode) == expected  # type: ignore[arg-type]


def test_a_streaming_detector_gets_the_streaming_defaults() -> None:
    from livekit.agents.voice.turn import _STREAMING_ENDPOINTING_DEFAULTS

    class Detector:  # what livekit's runtime Protocol looks for
        model = "m"
        provider = "p"

        def stream(self, **_: object) -> None:
            return None

    options = resolve_endpointing({"max_delay": 9.0}, turn_detection=Detector())
    assert options == {**_STREAMING_ENDPOINTING_DEFAULTS, "max_delay": 9.0}


def test_installed_where_the_activity_resolves_its_options() -> None:
    from livekit.agents.voice import agent_activity

    install()
    assert agent_activity._resolve_endpointing is resolve_endpointing  # type: ignore[attr-defined]
