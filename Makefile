# brig - the README's commands live here.
#
#   make up      setup, build, base template (cached), then brigd in the foreground
#   make check   setup, sanitized build, unit tests, integration + security tests
#
# Overridable: LISTEN, STATE_DIR, TEMPLATE_CACHE, PYTEST_ARGS.

LISTEN         ?= 127.0.0.1:7070
STATE_DIR      ?= /var/lib/brig
TEMPLATE_CACHE ?= /var/cache/brig/templates
PYTEST_ARGS    ?=
BUILD          := build
CHECK_BUILD    := build-check
C_SOURCES       = $(shell git ls-files '*.c' '*.h' 2>/dev/null || find src tests -name '*.[ch]')

.PHONY: all setup build build-check up check unit integration templates format format-check bench clean

all: build

setup:
	@scripts/setup

$(BUILD)/build.ninja:
	meson setup $(BUILD) -Dsanitize=false

$(CHECK_BUILD)/build.ninja:
	meson setup $(CHECK_BUILD) -Dsanitize=true

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
	  /usr/bin/python3 -m pytest -q tests/integration $(PYTEST_ARGS)

check: build-check format-check
	templates/build --cache $(TEMPLATE_CACHE) minimal >/dev/null
	templates/build --cache $(TEMPLATE_CACHE) base >/dev/null
	meson test -C $(CHECK_BUILD) --print-errorlogs
	BRIG_BUILD=$(CURDIR)/$(CHECK_BUILD) BRIG_TEMPLATE_CACHE=$(TEMPLATE_CACHE) \
	  /usr/bin/python3 -m pytest -q tests/integration $(PYTEST_ARGS)

format:
	clang-format -i $(C_SOURCES)

format-check:
	clang-format --dry-run --Werror $(C_SOURCES)

bench: build templates
	/usr/bin/python3 bench/run.py --build $(BUILD) --template-cache $(TEMPLATE_CACHE)

clean:
	rm -rf $(BUILD) $(CHECK_BUILD)
