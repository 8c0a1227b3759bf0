# Two entry points: `make run` serves the example desks on the embedded offline stack,
# `make test` runs lint, types, the docs build and the whole test suite. Both install what they
# need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
export HF_HUB_OFFLINE := 1

.PHONY: run test lint docs bench install browser redis flite screenshot libopus

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev,voice,server,openai,realtime,twilio,redis,webrtc,deepgram,console,otel]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

run: install libopus
	$(BIN)/voicehub serve

lint: install
	$(BIN)/ruff check voicehub tests
	$(BIN)/ruff format --check voicehub tests
	$(BIN)/mypy voicehub
	$(BIN)/check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml
	$(BIN)/hadolint Dockerfile

# The documentation site (docs/, mkdocs.yml) into .venv/site; --strict: a broken link or a
# reference the hooks cannot render fails the build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The browser test drives Debian's chromium; without it that test fails, naming the command.
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
				|| echo "note: could not install chromium; the browser test will fail"; \
		else \
			echo "note: no /usr/bin/chromium (install Debian's chromium as root);" \
				"the browser test will fail"; \
		fi; \
	fi

# WebRTC encodes agent audio through the system's libopus where it is installed (half the
# CPU of PyAV's path, which is the fallback); its tests fail without it, naming the package.
libopus:
	@if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libopus\.so\.0'; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopus0 \
				|| echo "note: could not install libopus0; the libopus tests will fail"; \
		else \
			echo "note: no libopus (install Debian's libopus0 as root); its tests will fail"; \
		fi; \
	fi

# The Redis tests start Debian's redis-server on a free port; without it they fail, naming it.
redis:
	@if ! command -v redis-server >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server \
				|| echo "note: could not install redis-server; the Redis tests will fail"; \
		else \
			echo "note: no redis-server (install Debian's redis-server as root);" \
				"the Redis tests will fail"; \
		fi; \
	fi

# Two workers (pytest-xdist), a test file each at a time: most of the suite waits on real-time
# audio, not the CPU, so two files overlap well on 2 cores; a file's module fixtures (models,
# servers) load once. `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= 2
test: lint docs browser redis libopus
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15

# The phone and turns benches speak in Debian's flite voices too (slt, awb, rms) when it is
# installed; without it they use Piper and eSpeak NG only, and say so by the voices listed.
flite:
	@if ! command -v flite >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq flite \
				|| echo "note: could not install flite; the benches use fewer voices"; \
		else \
			echo "note: no flite (install Debian's flite as root); the benches use fewer voices"; \
		fi; \
	fi

bench: install flite
	$(BIN)/voicehub bench --json bench.json

# The console timeline screenshot the README shows, from a real Chromium call over WebRTC.
screenshot: install browser
	VOICEHUB_SCREENSHOT=docs/console-timeline.png $(BIN)/python -m pytest -q tests/server/test_browser_webrtc.py
