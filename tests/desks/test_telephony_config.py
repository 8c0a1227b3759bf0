"""The desk-file keys of telephony (`[transfer]`, `[delivery] hold_for`/`fallback`,
`[phone] voicemail`): what they build, and every broken one refused at load with the file
and the field named."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicehub.desks.durations import parse_duration
from voicehub.desks.loading import load_desk_file, load_desk_folder
from voicehub.errors import ConfigError
from voicehub.tools.call_control import CallControlError, TransferPlan, TransferTarget

DESK = """\
name = "phones"

[[agents]]
id = "desk"
tools = ["transfer_call", "send_dtmf"]

[[agents.scripted.rules]]
match = "leave a message"
tool = "take_message"
arguments = {{ message = "{{message}}" }}

[delivery]
{delivery}

[phone]
{phone}

[transfer]
{transfer}

[transfer.targets]
{targets}
"""


def write(tmp_path: Path, **parts: str) -> Path:
    values = {"delivery": "", "phone": "", "transfer": "", "targets": 'billing = "+15550100300"'}
    values.update(parts)
    path = tmp_path / "phones.toml"
    path.write_text(DESK.format(**values))
    return path


def test_the_keys_build_the_tools_plan_and_follow_up(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        delivery='hold_for = "1h30m"\nfallback = "sms"',
        transfer='mode = "cold"\nring_timeout = 15\nallow = ["+1555*"]',
        targets='billing = "+15550100300"\npbx = "sip:sales@pbx.example.com"',
    )
    config = load_desk_file(path)
    assert config.delivery.hold_for == 5400.0 and config.delivery.fallback == "sms"
    assert config.transfer is not None
    plan = config.transfer.plan()
    assert plan.mode == "cold" and plan.ring_timeout == 15.0
    assert plan.resolve("PBX") == TransferTarget(name="pbx", phone="sip:sales@pbx.example.com")
    assert plan.resolve("+1 555 010 9999").phone == "+15550109999"  # allowed by pattern
    with pytest.raises(CallControlError, match=r"does not allow transfers to \+14155550100"):
        plan.resolve("+14155550100")
    assert config.phone.voicemail.startswith("Hello, this is {desk} calling back.")


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        (
            {"targets": 'billing = "555-0100"'},
            r"transfer\.targets\.billing.*'555-0100' is neither a phone number in E\.164 form",
        ),
        ({"targets": "billing = {}"}, r"give the target a phone .*, a desk, or both"),
        ({"targets": ""}, r"transfer\.targets"),
        ({"transfer": "ring_timeout = 0"}, r"transfer\.ring_timeout"),
        (
            {"transfer": 'hold_audio = "http://example.com/hold.mp3"'},
            r"transfer\.hold_audio",
        ),
        (
            {"transfer": 'allow = ["anyone"]'},
            r"allow pattern 'anyone' must look like a number",
        ),
        (
            {"delivery": 'fallback = "sms"'},
            r"delivery\.fallback.*needs hold_for",
        ),
        (
            {"delivery": 'hold_for = "1 fortnight"\nfallback = "none"'},
            r"delivery\.hold_for.*is not a duration: write it like 24h",
        ),
        (
            {
                "delivery": 'hold_for = "24h"\nfallback = "webhook"\nwebhook = "http://hooks.example.com/x"'
            },
            r"delivery\.webhook.*'http://hooks\.example\.com/x' is not an https URL",
        ),
        (
            {"delivery": 'hold_for = "24h"\nfallback = "webhook"'},
            r"delivery\.webhook.*needs the URL",
        ),
        (
            {"delivery": 'hold_for = "24h"\nfallback = "sms"', "phone": 'conversation = "call"'},
            r"delivery\.fallback.*does not keep",
        ),
        ({"phone": 'voicemail = "Call {number}"'}, r"phone\.voicemail.*unknown placeholder"),
    ],
)
def test_broken_keys_are_refused_naming_the_field(
    tmp_path: Path, parts: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=r"phones\.toml: .*" + message):
        load_desk_file(write(tmp_path, **parts))


def test_transfer_call_without_a_transfer_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "phones.toml"
    path.write_text('name = "phones"\n\n[[agents]]\nid = "desk"\ntools = ["transfer_call"]\n')
    with pytest.raises(ConfigError, match=r"agents\[0\]\.tools\[0\]: tool 'transfer_call' needs"):
        load_desk_file(path)


def test_a_target_desk_must_be_served_with_the_desk(tmp_path: Path) -> None:
    write(tmp_path, targets='billing = { phone = "+15550100300", desk = "accounts" }')
    with pytest.raises(
        ConfigError,
        match=r"phones\.toml: transfer\.targets\.billing\.desk: no desk 'accounts' is served "
        r"with this one \(desks: phones\)",
    ):
        load_desk_folder(tmp_path)


def test_durations() -> None:
    assert [parse_duration(v) for v in ("24h", "90m", "1h30m", "45s", "2d", 30)] == [
        86400.0, 5400.0, 5400.0, 45.0, 172800.0, 30,
    ]  # fmt: skip
    for bad in ("h", "30m1h", "1h1h", "-5m", "soon"):
        with pytest.raises(ValueError, match="is not a duration"):
            parse_duration(bad)


def test_a_plan_names_its_targets_when_it_refuses() -> None:
    plan = TransferPlan(targets={"billing": TransferTarget(name="billing", phone="+15550100300")})
    with pytest.raises(CallControlError) as refused:
        plan.resolve("the manager")
    assert str(refused.value) == (
        "there is no transfer target called 'the manager'; I can put the caller through to: "
        "billing."
    )
