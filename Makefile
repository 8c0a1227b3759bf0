# Two entry points: `make run` serves the example desks on the embedded offline stack,
# `make test` runs lint, types, the docs build and the whole test suite. Both install what they
# need, from the lock (locks/dev.txt: exact versions with hashes; docs/development.md says why).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := $(BIN)/uv
LOCK := locks/dev.txt
STAMP := $(VENV)/.installed-$(shell cat $(LOCK) locks/uv.txt pyproject.toml devtools/pyproject.toml | sha1sum | cut -c1-12)
export HF_HUB_OFFLINE := 1
# Python caches compiled modules (and pytest its rewritten test modules) in __pycache__: an
# environment that turns that off would have every test process and every server a test
# starts compile voicehub and its dependencies from source again (livekit-agents' import
# alone: 5 s of CPU uncached, 3 s cached).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test check lint docs bench install lock browser redis flite screenshot libopus moonshine

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The installer first: uv, hash-checked (locks/uv.txt), by the venv's own pip.
$(UV): locks/uv.txt | $(BIN)/python
	$(BIN)/pip install --quiet --require-hashes --no-deps -r locks/uv.txt

# Then the venv becomes exactly the lock (hash-checked, nothing resolved), and this repo's two
# projects are installed editable, built by the locked hatchling.
$(STAMP): $(UV) $(LOCK) pyproject.toml devtools/pyproject.toml
	$(UV) pip sync --quiet --require-hashes --python $(BIN)/python $(LOCK)
	$(UV) pip install --quiet --no-deps --no-build-isolation --python $(BIN)/python \
		-e . -e ./devtools
	rm -f $(VENV)/.installed-* && touch $(STAMP)

# Re-resolve the lock after a change to pyproject.toml (or devtools/pyproject.toml): versions
# already locked are kept where they still fit; `make lock UPGRADE=1` moves every package to
# its newest allowed release. One universal resolution covers Linux x86-64 and aarch64 on
# Python 3.11-3.13; locks/deploy.txt (the image's) is the same versions, less the tools, and
# locks/uv.txt the installer's.
LOCK_OPTIONS = --universal --python-version 3.11 --generate-hashes --quiet \
	--custom-compile-command "make lock" --override locks/overrides.txt \
	$(if $(UPGRADE),--upgrade)
lock: $(UV)
	$(UV) pip compile locks/dev.in $(LOCK_OPTIONS) --no-emit-package voicehub \
		--no-emit-package voicehub-dev -o locks/dev.txt
	$(UV) pip compile locks/deploy.in $(LOCK_OPTIONS) --no-emit-package voicehub \
		-c locks/dev.txt -o locks/deploy.txt
	$(UV) pip compile locks/uv.in $(LOCK_OPTIONS) -c locks/dev.txt -o locks/uv.txt

install: $(STAMP)

# Moonshine's model converted once into ~/.cache/voicehub/moonshine (about 20 s the first
# time, a hash check after), so no test or first call waits for it.
moonshine: install
	$(BIN)/python -m voicehub.voice.providers.offline.moonshine_model

run: install libopus moonshine
	$(BIN)/voicehub serve

lint: install
	$(BIN)/ruff check voicehub devtools tests
	$(BIN)/ruff format --check voicehub devtools tests
	$(BIN)/mypy voicehub devtools/voicehub_dev
	$(BIN)/check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml
	$(BIN)/hadolint Dockerfile

# The documentation site (docs/, mkdocs.yml) into .venv/site; --strict: a broken link or a
# reference the hooks cannot render fails the build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# $(call apt-get-if-missing,CHECK,PACKAGE,WHAT FAILS WITHOUT IT): when the shell test CHECK
# fails, install Debian's PACKAGE (as root, with apt-get), else say what will not work.
define apt-get-if-missing
	@if ! $(1); then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) \
				|| echo "note: could not install $(2); $(3)"; \
		else \
			echo "note: no $(2) (install Debian's $(2) as root); $(3)"; \
		fi; \
	fi
endef

# The browser test drives Debian's chromium; without it that test fails, naming the command.
browser:
	$(call apt-get-if-missing,[ -x /usr/bin/chromium ],chromium,the browser test will fail)

# WebRTC encodes agent audio through the system's libopus where it is installed (half the
# CPU of PyAV's path, which is the fallback); its tests fail without it, naming the package.
libopus:
	$(call apt-get-if-missing,/sbin/ldconfig -p 2>/dev/null | grep -q 'libopus\.so\.0',libopus0,the libopus tests will fail)

# The Redis tests start Debian's redis-server on a free port; without it they fail, naming it.
redis:
	$(call apt-get-if-missing,command -v redis-server >/dev/null,redis-server,the Redis tests will fail)

# One worker (pytest-xdist) per core plus one, a test file each at a time: most of the suite
# waits on real-time audio and server starts, not the CPU (two workers kept under one of 2
# cores busy), so a third file overlaps the other two; a file's module fixtures (models,
# servers) load once; at most 6, as each worker holds its own models. `make test
# TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n + 1 < 6 ? n + 1 : 6 )))
test: lint docs browser redis libopus moonshine
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15

# The quick loop: everything but the real-time end-to-end calls and the slow tests (`make test`
# runs them too).
check: lint redis libopus moonshine
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not realtime and not slow"

# The phone and turns benches speak in Debian's flite voices too (slt, awb, rms) when it is
# installed; without it they use Piper and eSpeak NG only, and say so by the voices listed.
flite:
	$(call apt-get-if-missing,command -v flite >/dev/null,flite,the benches use fewer voices)

bench: install flite
	$(BIN)/voicehub bench --json bench.json

# The console timeline screenshot the README shows, from a real Chromium call over WebRTC.
screenshot: install browser
	VOICEHUB_SCREENSHOT=docs/console-timeline.png $(BIN)/python -m pytest -q tests/server/test_browser_webrtc.py
