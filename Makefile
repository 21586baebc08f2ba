# brig - the README's commands live here.
#
#   make up      setup, build, base template (cached), then brigd in the foreground
#   make check   setup, release and sanitized builds (warnings are errors in both), unit tests,
#                integration + security tests, brig's own Node.js (scripts/check-node), the SDKs,
#                the dashboard in headless Chromium (tests/ui)
#   make screenshots  the dashboard's screenshots in docs/img/ (from a run of tests/ui)
#
# Overridable: LISTEN, STATE_DIR, TEMPLATE_CACHE, PYTEST_ARGS, FUZZ_SECONDS.

LISTEN         ?= 127.0.0.1:7070
STATE_DIR      ?= /var/lib/brig
TEMPLATE_CACHE ?= /var/cache/brig/templates
PYTEST_ARGS    ?=
FUZZ_SECONDS   ?= 60
BUILD          := build
CHECK_BUILD    := build-check
FUZZ_BUILD     := build-fuzz
# What pytest runs in `make check`: the daemon's suites and the Python SDK, then the attack
# suite in a session of its own.  One brigd per network namespace manages sandbox networking,
# and a session's daemons live until the session ends: the attack suite's network attacks
# need a brigd with networking while no other runs.
PYTEST_DIRS     = tests/integration sdk/python/tests
PYTEST_SEC_DIRS = tests/security
C_SOURCES       = $(shell git ls-files '*.c' '*.h' 2>/dev/null || find src tests -name '*.[ch]')

.PHONY: all setup build build-check up check unit integration fuzz sdk sdk-test e2b-test node-check \
	ui-test screenshots templates format format-check bench clean

all: build

setup:
	@scripts/setup

$(BUILD)/build.ninja:
	meson setup $(BUILD) -Dsanitize=false

$(CHECK_BUILD)/build.ninja:
	meson setup $(CHECK_BUILD) -Dsanitize=true

$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Dtests=disabled

build: setup $(BUILD)/build.ninja
	ninja -C $(BUILD)

build-check: setup $(CHECK_BUILD)/build.ninja
	ninja -C $(CHECK_BUILD)

templates: build
	templates/build --cache $(TEMPLATE_CACHE) minimal >/dev/null
	templates/build --cache $(TEMPLATE_CACHE) base >/dev/null

up: build templates
	exec $(BUILD)/brigd --listen $(LISTEN) --state-dir $(STATE_DIR) --template-cache $(TEMPLATE_CACHE)

unit: build-check
	meson test -C $(CHECK_BUILD) --print-errorlogs

integration: build-check
	BRIG_BUILD=$(CURDIR)/$(CHECK_BUILD) BRIG_TEMPLATE_CACHE=$(TEMPLATE_CACHE) \
	  /usr/bin/python3 -m pytest -q $(PYTEST_DIRS) $(PYTEST_ARGS)
	BRIG_BUILD=$(CURDIR)/$(CHECK_BUILD) BRIG_TEMPLATE_CACHE=$(TEMPLATE_CACHE) \
	  /usr/bin/python3 -m pytest -q $(PYTEST_SEC_DIRS) $(PYTEST_ARGS)

# libFuzzer targets (clang): the agent's frame/request decoder and brigd's
# decoder of agent replies, FUZZ_SECONDS each from the committed corpus.
fuzz: setup $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD) fuzz/fuzz_agent fuzz/fuzz_brigd fuzz/fuzz_dns fuzz/fuzz_redact \
	  fuzz/fuzz_http
	fuzz/run $(FUZZ_BUILD) $(FUZZ_SECONDS)

# The TypeScript SDK and the MCP server (npm ci + tsc).
sdk: setup
	sdk/build

# brig's own Node.js (scripts/setup-node) as a stock Debian 12 box gets it: a fresh install, a
# refused SHA-512, and the SDK built with the system's node hidden from PATH.
node-check: setup
	scripts/check-node

sdk-test: build-check sdk
	BRIG_BUILD=$(CURDIR)/$(CHECK_BUILD) BRIG_TEMPLATE_CACHE=$(TEMPLATE_CACHE) sdk/test

# E2B compatibility (docs/e2b.md): the pinned official e2b SDK against one real brigd.
e2b-test: build-check
	BRIG_BUILD=$(CURDIR)/$(CHECK_BUILD) BRIG_TEMPLATE_CACHE=$(TEMPLATE_CACHE) tests/e2b/run

# The dashboard (docs/dashboard.md): one brigd, one headless Chromium; screenshots of each page
# in build/ui-screenshots/.
ui-test: build-check
	BRIG_BUILD=$(CURDIR)/$(CHECK_BUILD) BRIG_TEMPLATE_CACHE=$(TEMPLATE_CACHE) tests/ui/run

# The committed copies in docs/img/ that docs/dashboard.md shows.
DOC_SHOTS = signin sandboxes sandbox terminal money projects host-operator
screenshots: ui-test
	for s in $(DOC_SHOTS); do cp $(BUILD)/ui-screenshots/$$s.png docs/img/dashboard-$$s.png; done

check: build build-check format-check
	scripts/check-structure $(CHECK_BUILD)
	scripts/check-docs
	templates/build --cache $(TEMPLATE_CACHE) minimal >/dev/null
	templates/build --cache $(TEMPLATE_CACHE) base >/dev/null
	meson test -C $(CHECK_BUILD) --print-errorlogs
	$(MAKE) --no-print-directory fuzz
	BRIG_BUILD=$(CURDIR)/$(CHECK_BUILD) BRIG_TEMPLATE_CACHE=$(TEMPLATE_CACHE) \
	  /usr/bin/python3 -m pytest -q $(PYTEST_DIRS) $(PYTEST_ARGS)
	BRIG_BUILD=$(CURDIR)/$(CHECK_BUILD) BRIG_TEMPLATE_CACHE=$(TEMPLATE_CACHE) \
	  /usr/bin/python3 -m pytest -q $(PYTEST_SEC_DIRS) $(PYTEST_ARGS)
	$(MAKE) --no-print-directory node-check
	$(MAKE) --no-print-directory sdk-test
	$(MAKE) --no-print-directory e2b-test
	$(MAKE) --no-print-directory ui-test

format:
	clang-format -i $(C_SOURCES)

format-check:
	clang-format --dry-run --Werror $(C_SOURCES)

bench: build templates
	/usr/bin/python3 bench/run.py --build $(BUILD) --template-cache $(TEMPLATE_CACHE)

clean:
	rm -rf $(BUILD) $(CHECK_BUILD) $(FUZZ_BUILD)
