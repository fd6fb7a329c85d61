# SPDX-License-Identifier: GPL-2.0-or-later
# tagdisk - a virtual disk daemon with a 2.6-style block layer behind FUSE.
#
#   make              build tagdiskd, tagdiskctl and libtagdisk.a
#   make check        install missing Debian packages, run unit + integration tests
#   make run          serve a 1 GiB sparse tagdisk.img at ./mnt/disk in the foreground
#   make asan|tsan    unit tests (and the integration tests that fit) under sanitizers
#   make check-valgrind  unit tests and a daemon run under memcheck
#   make bench-engine / bench   benchmarks (figures and ratios, not tests)
#   make install / uninstall    PREFIX=/usr/local, DESTDIR honoured

VERSION := 0.1.0

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
MANDIR     ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions

CC      ?= cc
CFLAGS  ?= -O2 -g
LDFLAGS ?=
BUILD   ?= build
# V=1 shows the full command lines.
V ?= 0
Q := $(if $(filter 1,$(V)),,@)

# Ours, kept apart from CFLAGS so `make CFLAGS=-O0` keeps the warnings.
TD_WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wformat=2 -Wundef -Wvla -Wno-missing-field-initializers
TD_CPPFLAGS := -Iinclude -D_GNU_SOURCE -DTD_VERSION='"$(VERSION)"'
DEPFLAGS := -MMD -MP
TD_CFLAGS := -std=gnu11 -pthread $(TD_WARN) $(SAN_FLAGS)
TD_LDFLAGS := -pthread $(SAN_FLAGS)

PKG_CONFIG ?= pkg-config
FUSE_CFLAGS   ?= $(shell $(PKG_CONFIG) --cflags fuse3 2>/dev/null)
FUSE_LIBS     ?= $(shell $(PKG_CONFIG) --libs fuse3 2>/dev/null)
CMOCKA_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags cmocka 2>/dev/null)
CMOCKA_LIBS   ?= $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null)
# Debian's iniparser ships no .pc file.
INIPARSER_CFLAGS ?= -I/usr/include/iniparser
INIPARSER_LIBS   ?= -liniparser

# The engine: queue to drive. Linked by the daemon, the unit tests and the benchmarks.
ENGINE := rbtree lock log bio rangelock request queue elevator elv_noop elv_deadline \
	cdb prep tag drive drive_file drive_null drive_mem inject stats trace wcache
# Parsers and formatting shared by the daemon and the CLI (no FUSE).
COMMON := config json ctl_format blktrace
# The daemon's modules besides main(): front end, admin socket, image, notification.
DAEMON := frontend admin admin_cmd image notify

SRC_NAMES := $(basename $(notdir $(wildcard src/*.c)))
obj = $(patsubst %,$(BUILD)/src/%.o,$(filter $(SRC_NAMES),$(1)))
ENGINE_OBJS := $(call obj,$(ENGINE))
COMMON_OBJS := $(call obj,$(COMMON))
DAEMON_OBJS := $(call obj,$(DAEMON))

LIBTD     := $(BUILD)/libtagdisk.a
LIBCOMMON := $(BUILD)/libtdcommon.a
LIBDAEMON := $(BUILD)/libtddaemon.a
LIBS      := $(LIBDAEMON) $(LIBCOMMON) $(LIBTD)
EXTLIBS    = $(FUSE_LIBS) $(INIPARSER_LIBS) -lm

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
HEADERS    := $(wildcard include/tagdisk/*.h)

.PHONY: all check check-unit check-bats check-headers deps asan tsan check-valgrind \
	bench bench-engine run install uninstall clean fuzz stress

all: $(BUILD)/tagdiskd $(BUILD)/tagdiskctl $(LIBTD)

$(BUILD)/src/%.o: src/%.c
	@mkdir -p $(@D)
	@$(if $(Q),echo '  CC      $<')
	$(Q)$(CC) $(TD_CPPFLAGS) $(DEPFLAGS) $(FUSE_CFLAGS) $(INIPARSER_CFLAGS) $(TD_CFLAGS) $(CFLAGS) -c -o $@ $<

$(LIBTD): $(ENGINE_OBJS)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

$(LIBCOMMON): $(COMMON_OBJS)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

$(LIBDAEMON): $(DAEMON_OBJS)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

$(BUILD)/tagdiskd: $(BUILD)/src/tagdiskd.o $(LIBS)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(TD_LDFLAGS) $(LDFLAGS) -o $@ $< $(LIBS) $(EXTLIBS)

$(BUILD)/tagdiskctl: $(BUILD)/src/tagdiskctl.o $(LIBCOMMON) $(LIBTD)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(TD_LDFLAGS) $(LDFLAGS) -o $@ $< $(LIBCOMMON) $(LIBTD) $(INIPARSER_LIBS) -lm

$(BUILD)/tests/%.o: tests/unit/%.c
	@mkdir -p $(@D)
	@$(if $(Q),echo '  CC      $<')
	$(Q)$(CC) $(TD_CPPFLAGS) $(DEPFLAGS) -Isrc $(CMOCKA_CFLAGS) $(INIPARSER_CFLAGS) $(TD_CFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(LIBS)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(TD_LDFLAGS) $(LDFLAGS) -o $@ $< $(LIBS) $(CMOCKA_LIBS) $(EXTLIBS)

# Every public header compiles on its own.
check-headers:
	@set -e; for h in $(HEADERS); do \
		echo "#include \"$${h#include/}\"" | \
		$(CC) $(TD_CPPFLAGS) $(FUSE_CFLAGS) $(TD_CFLAGS) -fsyntax-only -x c - || \
		{ echo "header $$h is not self-contained" >&2; exit 1; }; \
	done

deps:
	@tests/deps.sh

check: deps
	@$(MAKE) --no-print-directory all unit-tests
	@tests/run-tests.sh $(BUILD) all

check-unit: all unit-tests
	@tests/run-tests.sh $(BUILD) unit

check-bats: all
	@tests/run-tests.sh $(BUILD) bats

.PHONY: unit-tests
unit-tests: check-headers $(UNIT_TESTS)

SAN_COMMON := -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -g
asan:
	@$(MAKE) --no-print-directory BUILD=build/asan \
		SAN_FLAGS="-fsanitize=address,undefined $(SAN_COMMON)" all unit-tests
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		tests/run-tests.sh build/asan sanitizer

tsan:
	@$(MAKE) --no-print-directory BUILD=build/tsan \
		SAN_FLAGS="-fsanitize=thread $(SAN_COMMON)" all unit-tests
	@TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
		tests/run-tests.sh build/tsan sanitizer

check-valgrind: all unit-tests
	@tests/run-tests.sh $(BUILD) valgrind

-include $(wildcard $(BUILD)/src/*.d $(BUILD)/tests/*.d)

clean:
	rm -rf build

# ---- benchmarks (figures, not tests) ----------------------------------------------------

$(BUILD)/bench/%.o: bench/%.c
	@mkdir -p $(@D)
	@$(if $(Q),echo '  CC      $<')
	$(Q)$(CC) $(TD_CPPFLAGS) $(DEPFLAGS) $(FUSE_CFLAGS) $(TD_CFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/bench/bench_engine: $(BUILD)/bench/bench_engine.o $(LIBTD)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(TD_LDFLAGS) $(LDFLAGS) -o $@ $< $(LIBTD) -lm

$(BUILD)/bench/tagdisk-passthrough: $(BUILD)/bench/passthrough.o $(LIBS)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(TD_LDFLAGS) $(LDFLAGS) -o $@ $< $(LIBS) $(EXTLIBS)

.PHONY: bench-tools
bench-tools: all $(BUILD)/bench/bench_engine $(BUILD)/bench/tagdisk-passthrough

# About 10 minutes on 2 cores. BENCH_ARGS=--on-disk puts the images on disk instead of tmpfs.
BENCH_ARGS ?=
bench: deps bench-tools
	@python3 bench/bench.py --build $(BUILD) $(BENCH_ARGS)

BENCH_ENGINE_SECONDS ?= 1
bench-engine: $(BUILD)/bench/bench_engine
	@$(BUILD)/bench/bench_engine $(BENCH_ENGINE_SECONDS)

# ---- fuzzing (libFuzzer; clang and libclang-rt-14-dev) -----------------------------------
#   make fuzz         every harness for FUZZ_SECONDS from its seed corpus, then its kept
#                     regression inputs; one line per harness; fails on any crash
#   make fuzz-check   the same for FUZZ_CHECK_SECONDS each, as tests/run-tests.sh counts it
# tests/fuzz/run.sh does the running (scratch corpora in /tmp, skips without libFuzzer).
# The engine is compiled again by clang with the sanitizers in FUZZ_BUILD. Its objects get
# -Wno-error there, since clang warns where gcc does not; the harnesses keep -Werror.
FUZZ_CC            ?= clang
FUZZ_BUILD         ?= build/fuzz
FUZZ_SECONDS       ?= 60
FUZZ_CHECK_SECONDS ?= 10
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
FUZZ_HARNESSES := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))

.PHONY: fuzz-check fuzz-build fuzz-harnesses
fuzz-build:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) SAN_FLAGS="$(FUZZ_SAN)" \
		CFLAGS="-O1 -g -Wno-error" fuzz-harnesses

fuzz-harnesses: $(patsubst %,$(BUILD)/%,$(FUZZ_HARNESSES))

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(wildcard tests/fuzz/*.h) $(HEADERS) $(LIBS)
	@$(if $(Q),echo '  FUZZ    $@')
	$(Q)$(CC) $(TD_CPPFLAGS) -Isrc $(INIPARSER_CFLAGS) $(TD_CFLAGS) $(CFLAGS) -Werror \
		-fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(LIBS) $(EXTLIBS)

fuzz:
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_CC=$(FUZZ_CC) tests/fuzz/run.sh $(FUZZ_SECONDS)

fuzz-check:
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_CC=$(FUZZ_CC) tests/fuzz/run.sh $(FUZZ_CHECK_SECONDS)
