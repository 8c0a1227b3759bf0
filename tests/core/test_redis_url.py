"""`redis+sentinel://` store URLs: what each part means, the errors naming what is wrong
with a bad one, and every password redacted wherever the URL is shown."""

from __future__ import annotations

import pytest

from voicehub.core.store.choice import StoreChoice, describe_store
from voicehub.core.store.redis import RedisStore
from voicehub.core.store.redis_url import SentinelURL, parse_sentinel_url, shown_url
from voicehub.errors import ConfigError, StoreError
from voicehub.workers.settings import WorkerSettings


def test_a_full_url_reads_as_its_parts() -> None:
    url = (
        "redis+sentinel://app:s3cret@10.0.0.5,10.0.0.6:26380,[::1]:26381/voicehub/2"
        "?sentinel_username=watch&sentinel_password=s3ntinel&wait_replicas=1"
    )
    assert parse_sentinel_url(url) == SentinelURL(
        sentinels=(("10.0.0.5", 26379), ("10.0.0.6", 26380), ("::1", 26381)),
        service_name="voicehub",
        db=2,
        username="app",
        password="s3cret",
        sentinel_username="watch",
        sentinel_password="s3ntinel",
        wait_replicas=1,
    )


def test_the_defaults_are_port_26379_database_0_no_credentials_no_waiting() -> None:
    assert parse_sentinel_url("REDIS+SENTINEL://sentinel/my%20primary") == SentinelURL(
        sentinels=(("sentinel", 26379),), service_name="my primary"
    )


@pytest.mark.parametrize(
    ("userinfo", "username", "password"),
    [
        (":pw", None, "pw"),
        ("user:", "user", ""),
        ("user", "user", None),
        (":p%40ss", None, "p@ss"),
        (":p@ss/word", None, "p@ss/word"),  # up to the last @ before the query: no escaping
        (":a:b", None, "a:b"),
    ],
)
def test_the_user_info_is_the_servers_credentials(
    userinfo: str, username: str | None, password: str | None
) -> None:
    parsed = parse_sentinel_url(f"redis+sentinel://{userinfo}@h/svc")
    assert (parsed.username, parsed.password) == (username, password)
    assert parsed.sentinels == (("h", 26379),)


@pytest.mark.parametrize(
    ("url", "what"),
    [
        ("redis://h/svc", "it does not start with redis+sentinel://"),
        ("redis+sentinel://h", "it names no service"),
        ("redis+sentinel://h/", "it names no service"),
        ("redis+sentinel:///svc", "a Sentinel host is empty"),
        ("redis+sentinel://h1,,h2/svc", "a Sentinel host is empty"),
        ("redis+sentinel://:26379/svc", "a Sentinel address is empty in ':26379'"),
        ("redis+sentinel://h:0/svc", "the port '0' of Sentinel 'h' is not a port number"),
        ("redis+sentinel://h:99999/svc", "the port '99999' of Sentinel 'h' is not a port"),
        ("redis+sentinel://h:ab/svc", "the port 'ab' of Sentinel 'h' is not a port number"),
        ("redis+sentinel://[::1/svc", "the Sentinel address '[::1' is not [ipv6]:port"),
        ("redis+sentinel://[::1]x/svc", "the Sentinel address '[::1]x' is not [ipv6]:port"),
        ("redis+sentinel://h/svc/one", "the database 'one' is not a number"),
        ("redis+sentinel://h/svc/1/x", "'x' follows the database number"),
        ("redis+sentinel://h/svc?db=1", "unknown option 'db' (known: sentinel_password, "),
        ("redis+sentinel://h/svc?wait_replicas=all", "wait_replicas='all' is not a number"),
        ("redis+sentinel://h/svc?wait_replicas=1&wait_replicas=2", "wait_replicas is given twice"),
        ("redis+sentinel://h/svc?sentinel_username=u", "sentinel_username is given without"),
    ],
)
def test_a_bad_url_is_refused_naming_what_is_wrong(url: str, what: str) -> None:
    with pytest.raises(ValueError, match="is not a Sentinel store URL") as caught:
        parse_sentinel_url(url)
    assert what in str(caught.value)
    assert "the form is redis+sentinel://" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis+sentinel://:pw@h/svc", "redis+sentinel://:[redacted]@h/svc"),
        ("redis+sentinel://app:pw@h,g:1/svc/1", "redis+sentinel://app:[redacted]@h,g:1/svc/1"),
        ("redis+sentinel://app@h/svc", "redis+sentinel://app@h/svc"),
        ("redis+sentinel://:p@ss/w%3Frd@h/svc", "redis+sentinel://:[redacted]@h/svc"),
        (
            "redis+sentinel://h/svc?sentinel_username=u&sentinel_password=pw&wait_replicas=1",
            "redis+sentinel://h/svc?sentinel_username=u&sentinel_password=[redacted]"
            "&wait_replicas=1",
        ),
        # an option it does not know may be a secret too: its value is not shown
        ("redis+sentinel://h/svc?password=pw", "redis+sentinel://h/svc?password=[redacted]"),
        ("redis://:pw@h:6379/0", "redis://:[redacted]@h:6379/0"),
    ],
)
def test_shown_urls_redact_every_password(url: str, shown: str) -> None:
    assert shown_url(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://:hunter22@[::1/svc",  # a bad IPv6 literal (urlsplit refuses it)
        "redis+sentinel://:hunter22@h:99999/svc",
        "redis+sentinel://:hunter22@h/svc?sentinel_password=hunter22&bogus=1",
        "redis+sentinel://:hunter22@h",
    ],
)
def test_an_error_about_a_bad_url_never_shows_its_passwords(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_sentinel_url(url)
    assert "hunter22" not in str(caught.value)
    assert "[redacted]" in str(caught.value)
    with pytest.raises(StoreError) as refused:
        RedisStore(url)
    assert "hunter22" not in str(refused.value)


def test_the_store_choice_takes_a_sentinel_url_and_describes_it_without_passwords() -> None:
    url = "redis+sentinel://:hunter22@h1,h2/voicehub?sentinel_password=hunter22"
    choice = StoreChoice(store=url)
    assert choice.store == url
    assert describe_store(choice) == "redis+sentinel://h1,h2/voicehub?sentinel_password=[redacted]"


def test_a_bad_sentinel_store_setting_names_its_variable_and_hides_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOICEHUB_STORE", "redis+sentinel://:hunter22@h:0/voicehub")
    with pytest.raises(ConfigError) as caught:
        WorkerSettings.from_env()
    message = str(caught.value)
    assert (
        "VOICEHUB_STORE: 'redis+sentinel://:[redacted]@h:0/voicehub' is not a Sentinel" in message
    )
    assert "the port '0' of Sentinel 'h' is not a port number" in message
    assert "hunter22" not in message
