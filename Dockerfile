# voicehub: `voicehub serve` (default command) and `voicehub worker` from one image.
# Checked by hadolint in `make test` (tests/test_deploy_checks.py), and its RUN and CMD command
# lines are run there in a fresh virtual environment (tests/test_dockerfile_commands.py).
# The offline models ship inside pip packages (PocketSphinx's English model, the Piper voice,
# Silero VAD, eSpeak NG data), so the image needs nothing at run time; HF_HUB_OFFLINE keeps
# any library from trying to download.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1

# libopus: WebRTC encodes the agent's audio through it (half the CPU of PyAV's path).
# DL3008 (pin apt versions): bookworm's libopus0 is the one the base image's apt offers.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libopus0 \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin voicehub \
    && mkdir -p /data \
    && chown voicehub:voicehub /data

WORKDIR /app
# The image installs from the deploy lock (exact versions with hashes, no resolution: the
# same versions `make test` ran), then voicehub itself, built by the locked hatchling.
COPY locks/deploy.txt ./locks/
COPY pyproject.toml README.md ./
COPY voicehub ./voicehub
COPY channels ./channels
# Every extra an example desk uses (Deepgram and OpenAI Realtime too: a desk without its key
# loads and refuses calls with the reason), so no desk of channels/ fails to import.
RUN pip install --require-hashes --no-deps -r locks/deploy.txt \
    && pip install --no-deps --no-build-isolation . \
    && voicehub channels --channels /app/channels

# numeric, so the runtime can tell it is not root without reading /etc/passwd
USER 10001
ENV VOICEHUB_CHANNELS=/app/channels \
    VOICEHUB_DB=/data/voicehub.db
VOLUME ["/data"]
EXPOSE 8080 8081

# `serve` answers /health on 8080; the worker's compose service checks livekit's port 8081.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/health', timeout=4)"]

# On 0.0.0.0 `serve` needs an access token: docker-compose.yml sets VOICEHUB_TOKEN; with
# `docker run`, pass -e VOICEHUB_TOKEN=... (16+ characters).
CMD ["voicehub", "serve", "--host", "0.0.0.0", "--port", "8080"]
