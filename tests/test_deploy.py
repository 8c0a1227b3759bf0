"""The Dockerfile and docker-compose.yml, checked statically (no Docker engine runs here):
the services, their commands, environment, volumes and health checks, and that what they
set is what voicehub reads."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from voicehub.desks.loading import load_desk_folder
from voicehub.server.settings import _VARIABLES as SERVER_VARIABLES
from voicehub.server.settings import ServerSettings
from voicehub.workers.settings import ENVIRONMENT as WORKER_VARIABLES

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    parsed: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return parsed


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    assert isinstance(env, dict), "use the mapping form of environment"
    return {key: str(value) for key, value in env.items()}


def default_of(value: str) -> str:
    """`${VAR:-default}` -> default (what `docker compose up` uses with VAR unset)."""
    found = re.fullmatch(r"\$\{\w+:-(.*)\}", value)
    return found.group(1) if found else value


def test_the_four_services_are_there(compose: dict[str, Any]) -> None:
    services = compose["services"]
    default = {name for name, service in services.items() if "profiles" not in service}
    assert default == {"redis", "livekit", "serve", "worker"}
    assert {name for name in services if name not in default} == {"otel-collector", "jaeger"}


def test_the_tracing_profile_takes_serve_and_worker_traces_to_jaeger(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    collector, jaeger = services["otel-collector"], services["jaeger"]
    assert collector["profiles"] == jaeger["profiles"] == ["tracing"]
    config = yaml.safe_load(environment(collector)["OTEL_COLLECTOR_CONFIG"])
    assert collector["command"] == ["--config=env:OTEL_COLLECTOR_CONFIG"]
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["http"]["endpoint"].endswith(":4318")
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    assert config["exporters"]["otlp/jaeger"]["endpoint"] == "jaeger:4317"
    assert environment(jaeger)["COLLECTOR_OTLP_ENABLED"] == "true"
    assert config["service"]["pipelines"]["traces"]["exporters"] == ["otlp/jaeger"]
    for name in ("serve", "worker"):
        env = environment(services[name])
        # off by default; the profile's collector when the variable names it
        assert default_of(env["OTEL_EXPORTER_OTLP_ENDPOINT"]) == ""
        assert env["OTEL_SERVICE_NAME"] == f"voicehub-{name}"


def test_redis_keeps_an_append_only_file_on_a_volume(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--appendfsync") + 1] == "everysec"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
    assert "redis-cli" in redis["healthcheck"]["test"]


def test_livekit_and_the_worker_share_the_keys_and_livekit_uses_redis(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    config = yaml.safe_load(environment(services["livekit"])["LIVEKIT_CONFIG"])
    worker = environment(services["worker"])
    key, secret = worker["LIVEKIT_API_KEY"], default_of(worker["LIVEKIT_API_SECRET"])
    assert default_of(str(config["keys"][key])) == secret
    assert len(secret) >= 32  # livekit-server refuses shorter secrets outside --dev
    assert config["redis"]["address"] == "redis:6379"
    assert worker["LIVEKIT_URL"] == f"ws://livekit:{config['port']}"
    assert f"{config['port']}:{config['port']}" in services["livekit"]["ports"]


def test_serve_and_worker_run_voicehub_with_settings_it_reads(compose: dict[str, Any]) -> None:
    services = compose["services"]
    serve, worker = services["serve"], services["worker"]
    assert serve["command"][:2] == ["voicehub", "serve"] and "0.0.0.0" in serve["command"]
    assert worker["command"][:2] == ["voicehub", "worker"]
    # a public address needs a token: serve would refuse to start without one
    assert len(default_of(environment(serve)["VOICEHUB_TOKEN"])) >= 16
    keys = desk_key_variables()
    assert keys == {"OPENAI_API_KEY", "DEEPGRAM_API_KEY"}
    for service, reads in ((serve, SERVER_VARIABLES), (worker, WORKER_VARIABLES)):
        # OTEL_* are the OpenTelemetry SDK's own variables (voicehub.telemetry.setup)
        unknown = {v for v in environment(service) if not v.startswith("OTEL_")}
        unknown -= set(reads.values()) | keys
        assert not unknown, f"{service['command'][1]} does not read {sorted(unknown)}"
        assert keys <= set(environment(service)), "pass the cloud desks' keys through"


def desk_key_variables() -> set[str]:
    """The environment variables the example desks take their keys from."""
    found = set()
    for desk in load_desk_folder(ROOT / "channels").values():
        voice = desk.voice
        found |= {a.llm.api_key_env for a in desk.agents if a.llm.provider == "openai"} - {None}
        if voice.deepgram is not None:
            found.add(voice.deepgram.api_key_env)
        if voice.engine == "openai-realtime":
            found.add(voice.realtime_model.api_key_env)
    return {name for name in found if name}


def extras_the_desks_need() -> set[str]:
    """The pyproject extras the example desks import: the server and offline voice stack for
    all, and each cloud provider a desk names."""
    needed = {"server", "voice"}
    for desk in load_desk_folder(ROOT / "channels").values():
        voice = desk.voice
        needed |= {"deepgram"} if "deepgram" in (voice.stt, voice.tts) else set()
        needed |= {"realtime"} if voice.engine == "openai-realtime" else set()
        needed |= {"openai"} if any(a.llm.provider == "openai" for a in desk.agents) else set()
    return needed


def test_serve_and_worker_share_the_redis_store_apart_from_livekits_data(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    serve, worker = environment(services["serve"]), environment(services["worker"])
    store = serve["VOICEHUB_STORE"]
    assert store == worker["VOICEHUB_STORE"]
    assert re.fullmatch(r"redis://redis:6379/[1-9]\d*", store)  # livekit-server uses db 0
    livekit = yaml.safe_load(environment(services["livekit"])["LIVEKIT_CONFIG"])
    assert livekit["redis"].get("db", 0) == 0
    for name in ("serve", "worker"):
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
        assert "VOICEHUB_DB" not in environment(services[name])  # no SQLite file of its own
    assert set(compose["volumes"]) == {"redis-data"}


def test_serve_and_worker_have_health_checks_on_their_ports(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert "8080/health" in " ".join(services["serve"]["healthcheck"]["test"])
    assert "8081/" in " ".join(services["worker"]["healthcheck"]["test"])
    assert "8080:8080" in services["serve"]["ports"]


def test_serve_may_drain_for_its_whole_drain_time_before_docker_kills_it(
    compose: dict[str, Any],
) -> None:
    grace = compose["services"]["serve"]["stop_grace_period"]
    seconds = float(re.fullmatch(r"(\d+)s", grace).group(1))  # type: ignore[union-attr]
    assert seconds > ServerSettings().drain_seconds + 5  # + the time to end the calls left


def test_the_dockerfile_is_slim_non_root_offline_and_health_checked() -> None:
    lines = [
        line.strip()
        for line in (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    instructions = [line.split()[0] for line in lines]
    assert re.fullmatch(r"FROM python:3\.11-slim(-\w+)?", lines[0])
    user = lines[instructions.index("USER")]
    assert user.split()[1] not in ("root", "0")
    assert instructions.index("USER") < instructions.index("CMD")
    assert "8080/health" in lines[instructions.index("HEALTHCHECK")]
    assert any("HF_HUB_OFFLINE=1" in line for line in lines)
    install = next(line for line in lines if "pip install" in line)
    assert "--require-hashes" in install and "-r locks/deploy.txt" in install
    # the image's extras are the deploy lock's input (locks/deploy.in)
    project = (ROOT / "locks" / "deploy.in").read_text().splitlines()[0]
    extras = set(re.search(r"\.\[([a-z,]+)\]", project).group(1).split(","))  # type: ignore[union-attr]
    assert {"voice", "server", "twilio", "webrtc", "livekit", "redis"} <= extras
    assert extras_the_desks_need() <= extras, "the image lacks an extra an example desk uses"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert extras <= set(declared["optional-dependencies"])
