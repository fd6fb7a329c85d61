# SPDX-License-Identifier: GPL-2.0-or-later
# tagdisk - a virtual disk daemon with a 2.6-style block layer behind FUSE.
#
# `make help` lists every target with what it needs and how long it takes. In short:
#   make              build tagdiskd, tagdiskctl, tagdisk-replay and libtagdisk.a
#   make run          serve a 1 GiB sparse tagdisk.img at ./mnt/disk in the foreground
#   make check        unit + integration tests and a short fuzz run; "N passed, N failed"
#   make install      PREFIX=/usr/local, DESTDIR honoured
#   make WITH_RBD=0 WITH_NBD=0   build without the Ceph RBD / NBD backends (no librbd, libnbd)
#
# Each target first installs (as root) or names (otherwise) the Debian packages it needs,
# through tests/deps.sh and its groups (build, run, test, bench, ...); `make` itself only
# checks, through pkg-config, and says in one line what is missing.

VERSION := 0.1.0

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
MANDIR     ?= $(PREFIX)/share/man
DOCDIR     ?= $(PREFIX)/share/doc/tagdisk
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
TD_CPPFLAGS := -Iinclude -Isrc -D_GNU_SOURCE -DTD_VERSION='"$(VERSION)"'
DEPFLAGS := -MMD -MP
TD_CFLAGS := -std=gnu11 -pthread $(TD_WARN) $(SAN_FLAGS)
TD_LDFLAGS := -pthread $(SAN_FLAGS)

PKG_CONFIG ?= pkg-config
FUSE_CFLAGS   ?= $(shell $(PKG_CONFIG) --cflags fuse3 2>/dev/null)
FUSE_LIBS     ?= $(shell $(PKG_CONFIG) --libs fuse3 2>/dev/null)
URING_CFLAGS  ?= $(shell $(PKG_CONFIG) --cflags liburing 2>/dev/null)
URING_LIBS    ?= $(shell $(PKG_CONFIG) --libs liburing 2>/dev/null || echo -luring)
CMOCKA_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags cmocka 2>/dev/null)
CMOCKA_LIBS   ?= $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null)
# Debian's iniparser ships no .pc file.
INIPARSER_CFLAGS ?= -I/usr/include/iniparser
INIPARSER_LIBS   ?= -liniparser
# json-c writes and reads the admin protocol (src/common/jsonc.c; docs/protocol.md): what
# libnvme and nvme-cli use; unlike jansson it holds uint64_t integers (counters, seeds) and
# writes a double as the text we give it, so replies stay byte for byte what they were.
JSON_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags json-c 2>/dev/null)
JSON_LIBS   ?= $(shell $(PKG_CONFIG) --libs json-c 2>/dev/null || echo -ljson-c)
# The drive's network backends: Ceph RBD (src/engine/drive_rbd.c) and NBD (drive_nbd.c),
# built by default; WITH_RBD=0 or WITH_NBD=0 leaves one out (no librbd or libnbd needed):
# src/engine/drive_absent.c then stands in, and the config refuses that backend.
WITH_RBD ?= 1
WITH_NBD ?= 1
$(foreach v,WITH_RBD WITH_NBD,$(if $(filter-out 0 1,$($(v)))$(if $(strip $($(v))),,empty),$(error $(v)=$($(v)): use 1 (build the backend) or 0 (leave it out))))
ifeq ($(WITH_RBD),1)
RBD_LIBS ?= $(shell $(PKG_CONFIG) --libs librbd librados 2>/dev/null || echo -lrbd -lrados)
endif
ifeq ($(WITH_NBD),1)
NBD_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags libnbd 2>/dev/null)
NBD_LIBS   ?= $(shell $(PKG_CONFIG) --libs libnbd 2>/dev/null || echo -lnbd)
endif
TD_CPPFLAGS += -DTD_WITH_RBD=$(WITH_RBD) -DTD_WITH_NBD=$(WITH_NBD)
ENGINE_LEFT_OUT := $(if $(filter 0,$(WITH_RBD)),src/engine/drive_rbd.c) \
	$(if $(filter 0,$(WITH_NBD)),src/engine/drive_nbd.c) \
	$(if $(filter 0,$(WITH_RBD) $(WITH_NBD)),,src/engine/drive_absent.c)
# systemd's D-Bus client (libsystemd): tagdiskd asks the service manager whether a SIGTERM
# is a restart of its unit, to leave the mount to the next daemon (src/daemon/takeover.c).
# WITH_SYSTEMD=0 builds without it (a SIGTERM is then always a stop); by default it is used
# when pkg-config finds libsystemd.
WITH_SYSTEMD ?= $(shell $(PKG_CONFIG) --exists libsystemd 2>/dev/null && echo 1 || echo 0)
ifeq ($(WITH_SYSTEMD),1)
SYSTEMD_CFLAGS ?= -DTD_WITH_SYSTEMD $(shell $(PKG_CONFIG) --cflags libsystemd 2>/dev/null)
SYSTEMD_LIBS   ?= $(shell $(PKG_CONFIG) --libs libsystemd 2>/dev/null || echo -lsystemd)
endif

# One folder per layer; includes only point down (tests/tools/check_layers.py):
#   src/common  log, locks, lists, rbtree, JSON, blktrace records   used by everyone, uses no one above it
#   src/engine  the block layer: queue to drive   libtagdisk.a (daemon, unit tests, bench)
#   src/daemon  tagdiskd: FUSE front end, admin socket, config, image
#   src/ctl     tagdiskctl: commands, printers, top, trace output
# A folder's main() (tagdiskd.c, tagdiskctl.c) is linked on its own; the rest goes in
# the folder's library.
layer_objs = $(patsubst %.c,$(BUILD)/%.o,$(filter-out $(2),$(wildcard src/$(1)/*.c)))
COMMON_OBJS := $(call layer_objs,common,)
ENGINE_OBJS := $(call layer_objs,engine,$(ENGINE_LEFT_OUT))
DAEMON_OBJS := $(call layer_objs,daemon,src/daemon/tagdiskd.c)
CTL_OBJS    := $(call layer_objs,ctl,src/ctl/tagdiskctl.c src/ctl/tagdisk_replay.c)

LIBTD     := $(BUILD)/libtagdisk.a
LIBCOMMON := $(BUILD)/libtdcommon.a
LIBDAEMON := $(BUILD)/libtddaemon.a
LIBCTL    := $(BUILD)/libtdctl.a
LIBS      := $(LIBDAEMON) $(LIBCTL) $(LIBTD) $(LIBCOMMON)
EXTLIBS    = $(FUSE_LIBS) $(URING_LIBS) $(INIPARSER_LIBS) $(JSON_LIBS) $(RBD_LIBS) $(NBD_LIBS) \
	$(SYSTEMD_LIBS) -lm

UNIT_SRCS  := $(filter-out $(if $(filter 0,$(WITH_RBD)),tests/unit/test_backend_rbd.c) \
	$(if $(filter 0,$(WITH_NBD)),tests/unit/test_backend_nbd.c),$(wildcard tests/unit/test_*.c))
UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
HEADERS    := $(wildcard include/tagdisk/*.h src/*/*.h)

.PHONY: all check unit check-unit check-bats check-headers deps asan tsan check-valgrind \
	bench bench-engine run install uninstall clean fuzz stress

all: $(BUILD)/tagdiskd $(BUILD)/tagdiskctl $(BUILD)/tagdisk-replay $(LIBTD)

# ---- what each target needs -----------------------------------------------------------
# $(call deps,GROUP...): tests/deps.sh installs (as root) or names the missing Debian
# packages of those groups, before the target's work starts.
deps = @WITH_RBD=$(WITH_RBD) WITH_NBD=$(WITH_NBD) tests/deps.sh $(1)

# Building needs a compiler and the libraries below: checked before the first compile, on
# any distribution, so a missing one is one line naming it and not a compiler error. A
# library is found through pkg-config ("pc:NAME") or, where Debian ships no .pc file, by
# its header ("h:HEADER"); one whose flags were given on the command line is not checked.
# Format: how:what:Debian package.
BUILD_PKGS := $(if $(filter file,$(origin FUSE_LIBS)),pc:fuse3:libfuse3-dev) \
	$(if $(filter file,$(origin URING_LIBS)),pc:liburing:liburing-dev) \
	$(if $(filter file,$(origin JSON_LIBS)),pc:json-c:libjson-c-dev) \
	$(if $(filter file,$(origin INIPARSER_LIBS)),h:iniparser.h:libiniparser-dev) \
	$(if $(filter 1,$(WITH_RBD)),$(if $(filter file,$(origin RBD_LIBS)),h:rbd/librbd.h:librbd-dev)) \
	$(if $(filter 1,$(WITH_NBD)),$(if $(filter file,$(origin NBD_LIBS)),pc:libnbd:libnbd-dev))

# check_pkgs: the shell that sets $$missing to the Debian packages of $(1) (as above) not found.
check_pkgs = missing=; \
	command -v $(firstword $(CC)) >/dev/null 2>&1 || missing="$$missing build-essential"; \
	command -v $(PKG_CONFIG) >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	for p in $(1); do \
		how=$${p%%:*}; rest=$${p\#*:}; what=$${rest%%:*}; pkg=$${rest\#*:}; \
		if [ $$how = pc ]; then $(PKG_CONFIG) --exists $$what 2>/dev/null; \
		else echo "\#include <$$what>" | $(CC) $(INIPARSER_CFLAGS) -E -x c - >/dev/null 2>&1; fi || \
			missing="$$missing $$pkg"; \
	done

.PHONY: check-build-deps check-unit-deps
check-build-deps:
	@$(call check_pkgs,$(BUILD_PKGS)); \
	[ -z "$$missing" ] && exit 0; \
	hint=; \
	case "$$missing" in *librbd-dev*) hint="$$hint WITH_RBD=0";; esac; \
	case "$$missing" in *libnbd-dev*) hint="$$hint WITH_NBD=0";; esac; \
	echo "make: cannot build, missing:$$missing (Debian packages; as root: tests/deps.sh build; other systems: docs/requirements.md)$${hint:+; or build without those backends: make$$hint}" >&2; \
	exit 1

check-unit-deps:
	@$(call check_pkgs,pc:cmocka:libcmocka-dev); \
	[ -z "$$missing" ] && exit 0; \
	echo "make: cannot build the unit tests, missing:$$missing (Debian packages; as root: tests/deps.sh build unit)" >&2; \
	exit 1

# Objects follow the build's features: WITH_RBD or WITH_NBD changed, everything is rebuilt.
FEATURES := WITH_RBD=$(WITH_RBD) WITH_NBD=$(WITH_NBD)
FEATURES_STAMP := $(BUILD)/features
$(FEATURES_STAMP): FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = "$(FEATURES)" ] || echo "$(FEATURES)" >$@

.PHONY: FORCE
FORCE:

$(BUILD)/src/%.o: src/%.c $(FEATURES_STAMP) | check-build-deps
	@mkdir -p $(@D)
	@$(if $(Q),echo '  CC      $<')
	$(Q)$(CC) $(TD_CPPFLAGS) $(DEPFLAGS) $(FUSE_CFLAGS) $(URING_CFLAGS) $(INIPARSER_CFLAGS) $(JSON_CFLAGS) $(NBD_CFLAGS) $(SYSTEMD_CFLAGS) $(TD_CFLAGS) $(CFLAGS) -c -o $@ $<

$(LIBTD): $(ENGINE_OBJS)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

$(LIBCOMMON): $(COMMON_OBJS)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

$(LIBDAEMON): $(DAEMON_OBJS)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

$(LIBCTL): $(CTL_OBJS)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

$(BUILD)/tagdiskd: $(BUILD)/src/daemon/tagdiskd.o $(LIBS)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(TD_LDFLAGS) $(LDFLAGS) -o $@ $< $(LIBS) $(EXTLIBS)

$(BUILD)/tagdiskctl: $(BUILD)/src/ctl/tagdiskctl.o $(LIBCTL) $(LIBCOMMON)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(TD_LDFLAGS) $(LDFLAGS) -o $@ $< $(LIBCTL) $(LIBCOMMON) $(JSON_LIBS) -lm

# tagdisk-replay: rebuilds a disk from a write log; needs no daemon (src/ctl/replay.h).
$(BUILD)/tagdisk-replay: $(BUILD)/src/ctl/tagdisk_replay.o $(LIBCTL) $(LIBCOMMON)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(TD_LDFLAGS) $(LDFLAGS) -o $@ $< $(LIBCTL) $(LIBCOMMON)

$(BUILD)/tests/%.o: tests/unit/%.c $(FEATURES_STAMP) | check-build-deps check-unit-deps
	@mkdir -p $(@D)
	@$(if $(Q),echo '  CC      $<')
	$(Q)$(CC) $(TD_CPPFLAGS) $(DEPFLAGS) $(CMOCKA_CFLAGS) $(INIPARSER_CFLAGS) $(JSON_CFLAGS) $(NBD_CFLAGS) $(TD_CFLAGS) $(CFLAGS) -c -o $@ $<

# tests/unit/unit_util.c: helpers every test binary links (not a test itself).
.SECONDARY: $(BUILD)/tests/unit_util.o
$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(BUILD)/tests/unit_util.o $(LIBS)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(TD_LDFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/tests/unit_util.o $(LIBS) $(CMOCKA_LIBS) $(EXTLIBS)

# Every public header compiles on its own.
check-headers: | check-build-deps
	@set -e; for h in $(HEADERS); do \
		echo "#include \"$${h#include/}\"" | \
		$(CC) $(TD_CPPFLAGS) $(FUSE_CFLAGS) $(INIPARSER_CFLAGS) $(JSON_CFLAGS) $(TD_CFLAGS) -fsyntax-only -x c - || \
		{ echo "header $$h is not self-contained" >&2; exit 1; }; \
	done

# Everything make check needs.
deps:
	$(call deps,build run test)

check: deps
	@$(MAKE) --no-print-directory all unit-tests
	@tests/run-tests.sh $(BUILD) all

# make unit: the unit tests alone (cmocka), counted like make check.
unit check-unit:
	$(call deps,build unit)
	@$(MAKE) --no-print-directory all unit-tests
	@tests/run-tests.sh $(BUILD) unit

check-bats:
	$(call deps,build run test)
	@$(MAKE) --no-print-directory all
	@tests/run-tests.sh $(BUILD) bats

.PHONY: unit-tests
# LD_PRELOAD shims for the integration tests (tests/tools/slow_trim.c, hold_umount.c): not
# instrumented, whatever the build, since they are loaded into instrumented daemons.
TEST_SHIMS := $(BUILD)/tests/libslowtrim.so $(BUILD)/tests/libholdumount.so
unit-tests: check-headers $(UNIT_TESTS) $(TEST_SHIMS)

$(BUILD)/tests/libslowtrim.so: tests/tools/slow_trim.c
$(BUILD)/tests/libholdumount.so: tests/tools/hold_umount.c
$(TEST_SHIMS):
	@mkdir -p $(@D)
	@$(if $(Q),echo '  CC      $<')
	$(Q)$(CC) -shared -fPIC -O2 -D_GNU_SOURCE $(TD_WARN) -o $@ $< -ldl

SAN_COMMON := -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -g
# ---- sanitizer and valgrind runs of the daemon (begin) -------------------------------------
# The integration tests each sanitizer runs against the instrumented daemon. Reports end
# the daemon with a non-zero status (stop_tagdiskd fails on it) and are also collected
# and printed by tests/run-tests.sh, each counted as a failure. tests/bats/slow/ holds the
# files too slow (or too specialised) for make check.
ASAN_BATS := tests/bats/daemon.bats tests/bats/disk_semantics.bats tests/bats/fio_verify.bats \
	tests/bats/crash.bats $(wildcard tests/bats/admin.bats) tests/bats/slow/resets_under_fio.bats \
	tests/bats/nbd.bats tests/bats/wlog.bats tests/bats/daemonize.bats tests/bats/takeover.bats \
	tests/bats/stuck_backend.bats tests/bats/latency_depth.bats
TSAN_BATS := tests/bats/slow/resets_under_fio.bats $(wildcard tests/bats/reset_load.bats) \
	tests/bats/nbd.bats tests/bats/wlog.bats tests/bats/takeover.bats \
	tests/bats/stuck_backend.bats tests/bats/latency_depth.bats
# Run again over FUSE io_uring (TD_TRANSPORT=uring): "@uring-pass" stands for the files of make
# check's uring pass (URING_BATS in tests/run-tests.sh); then the idle-write test with its shim,
# and the transport's own file.
ASAN_URING_BATS := @uring-pass tests/bats/idle_writes.bats tests/bats/transport_uring.bats
TSAN_URING_BATS := tests/bats/reset_load.bats tests/bats/fio_verify.bats tests/bats/idle_writes.bats \
	tests/bats/transport_uring.bats tests/bats/stuck_backend.bats tests/bats/latency_depth.bats
VALGRIND_BATS := tests/bats/slow/valgrind_daemon.bats
# gcc 12's TSan runtime cannot place its shadow memory when vm.mmap_rnd_bits is above 28
# (some 6.x kernels use 32): there, run without address space randomization.
TSAN_SETARCH := $(shell [ "$$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)" -gt 28 ] \
	&& echo setarch $$(uname -m) -R)

asan:
	$(call deps,build run test)
	@$(MAKE) --no-print-directory BUILD=build/asan \
		SAN_FLAGS="-fsanitize=address,undefined $(SAN_COMMON)" all unit-tests
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		TD_SANITIZER_BATS="$(ASAN_BATS)" TD_SANITIZER_URING_BATS="$(ASAN_URING_BATS)" \
		tests/run-tests.sh build/asan sanitizer

tsan:
	$(call deps,build run test)
	@$(MAKE) --no-print-directory BUILD=build/tsan \
		SAN_FLAGS="-fsanitize=thread $(SAN_COMMON)" all unit-tests
	@TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
		TD_SANITIZER_BATS="$(TSAN_BATS)" TD_SANITIZER_URING_BATS="$(TSAN_URING_BATS)" \
		$(TSAN_SETARCH) tests/run-tests.sh build/tsan sanitizer

check-valgrind:
	$(call deps,build run test)
	@$(MAKE) --no-print-directory all unit-tests
	@TD_VALGRIND_BATS="$(VALGRIND_BATS)" tests/run-tests.sh $(BUILD) valgrind
# ---- sanitizer and valgrind runs of the daemon (end) ---------------------------------------

-include $(wildcard $(BUILD)/src/*/*.d $(BUILD)/tests/*.d $(BUILD)/bench/*.d)

clean:
	rm -rf build

# ---- benchmarks (figures, not tests) ----------------------------------------------------

$(BUILD)/bench/%.o: bench/%.c $(FEATURES_STAMP) | check-build-deps
	@mkdir -p $(@D)
	@$(if $(Q),echo '  CC      $<')
	$(Q)$(CC) $(TD_CPPFLAGS) $(DEPFLAGS) $(FUSE_CFLAGS) $(TD_CFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/bench/bench_engine: $(BUILD)/bench/bench_engine.o $(LIBTD) $(LIBCOMMON)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(TD_LDFLAGS) $(LDFLAGS) -o $@ $< $(LIBTD) $(LIBCOMMON) -lm

$(BUILD)/bench/tagdisk-passthrough: $(BUILD)/bench/passthrough.o $(LIBS)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(CC) $(TD_LDFLAGS) $(LDFLAGS) -o $@ $< $(LIBS) $(EXTLIBS)

.PHONY: bench-tools
bench-tools: all $(BUILD)/bench/bench_engine $(BUILD)/bench/tagdisk-passthrough

# About 25 minutes on 2 cores. BENCH_ARGS=--on-disk puts the images on disk instead of tmpfs.
BENCH_ARGS ?=
bench:
	$(call deps,build run bench $(if $(filter --rbd,$(BENCH_ARGS)),rbd))
	@$(MAKE) --no-print-directory bench-tools
	@python3 bench/bench.py --build $(BUILD) $(BENCH_ARGS)

BENCH_ENGINE_SECONDS ?= 1
bench-engine:
	$(call deps,build)
	@$(MAKE) --no-print-directory $(BUILD)/bench/bench_engine
	@$(BUILD)/bench/bench_engine $(BENCH_ENGINE_SECONDS)

# The README's pictures (docs/img/*.svg), drawn by tools/plots/plots.py with Debian's
# python3-matplotlib from real runs: the HDD model traced under fio (elevator, tagged
# queueing), a reset and a command timeout under fio verify, and the chart of the saved
# `make bench` result docs/img/bench.json. Root, /dev/fuse, fio; PLOTS_SECONDS per traced
# run (default 10), PLOTS_OUT (default docs/img).
.PHONY: plots
plots:
	$(call deps,build run plots)
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tools/plots/plots.py

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
	$(Q)$(CC) $(TD_CPPFLAGS) $(INIPARSER_CFLAGS) $(JSON_CFLAGS) $(TD_CFLAGS) $(CFLAGS) -Werror \
		-fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(LIBS) $(EXTLIBS)

fuzz:
	$(call deps,build fuzz)
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_CC=$(FUZZ_CC) tests/fuzz/run.sh $(FUZZ_SECONDS)

fuzz-check:
	$(call deps,build fuzz)
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_CC=$(FUZZ_CC) tests/fuzz/run.sh $(FUZZ_CHECK_SECONDS)

# ---- install, uninstall, run, man pages ----------------------------------------------------
#
# make install [PREFIX=/usr/local] [DESTDIR=DIR]
#   tagdiskd (SBINDIR), tagdiskctl and tagdisk-replay (BINDIR), tagdisk@.service (UNITDIR), the
#   man pages (MANDIR/man8, man5), the admin protocol (DOCDIR/protocol.md, which the man pages
#   name), the bash completion (BASHCOMPDIR/tagdiskctl), and
#   SYSCONFDIR/tagdisk/example.ini unless one is there already (it may hold local edits).
# make uninstall
#   removes exactly those files; example.ini only while it equals etc/tagdisk.ini, and
#   SYSCONFDIR/tagdisk once that is empty (other files there are the admin's disks), and
#   DOCDIR. The
#   shared directories (bin, sbin, man8, ...) stay, as they may hold other programs.
# make run [RUN_DIR=.] [RUN_SIZE=1G]
#   serve RUN_DIR/tagdisk.img (created sparse when missing) at RUN_DIR/mnt/disk in the
#   foreground, admin socket RUN_DIR/tagdisk.sock; Ctrl-C stops it (drain, flush, unmount).
# make check-man
#   the man pages render without warnings and document every option, key and command.
# make check-service
#   tagdisk@.service under a real systemd, booted in namespaces where none runs as PID 1
#   (tests/bats/slow/systemd_unit.bats; not part of make check).

INSTALL ?= install
UNIT_IN := systemd/tagdisk@.service.in
UNIT    := $(BUILD)/tagdisk@.service
MAN8    := docs/tagdiskd.8 docs/tagdiskctl.8 docs/tagdisk-replay.8
MAN5    := docs/tagdisk.ini.5
DOCS    := docs/protocol.md
EXAMPLE_INI = $(DESTDIR)$(SYSCONFDIR)/tagdisk/example.ini

RUN_DIR   ?= .
RUN_SIZE  ?= 1G
RUN_IMAGE ?= $(RUN_DIR)/tagdisk.img
RUN_MNT   ?= $(RUN_DIR)/mnt
RUN_SOCK  ?= $(RUN_DIR)/tagdisk.sock

.PHONY: systemd-unit check-man check-service

# Written every time: SBINDIR may differ from the last build's.
systemd-unit: $(UNIT_IN)
	@mkdir -p $(BUILD)
	$(Q)sed -e 's|@SBINDIR@|$(SBINDIR)|g' $(UNIT_IN) >$(UNIT).tmp && mv $(UNIT).tmp $(UNIT)

install: all systemd-unit
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(BASHCOMPDIR) \
		$(DESTDIR)$(SYSCONFDIR)/tagdisk $(DESTDIR)$(DOCDIR)
	$(INSTALL) -m 0755 $(BUILD)/tagdiskd $(DESTDIR)$(SBINDIR)/tagdiskd
	$(INSTALL) -m 0755 $(BUILD)/tagdiskctl $(DESTDIR)$(BINDIR)/tagdiskctl
	$(INSTALL) -m 0755 $(BUILD)/tagdisk-replay $(DESTDIR)$(BINDIR)/tagdisk-replay
	$(INSTALL) -m 0644 $(UNIT) $(DESTDIR)$(UNITDIR)/tagdisk@.service
	$(INSTALL) -m 0644 $(MAN8) $(DESTDIR)$(MANDIR)/man8
	$(INSTALL) -m 0644 $(MAN5) $(DESTDIR)$(MANDIR)/man5
	$(INSTALL) -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)
	$(INSTALL) -m 0644 etc/tagdiskctl.bash-completion $(DESTDIR)$(BASHCOMPDIR)/tagdiskctl
	@if [ -e $(EXAMPLE_INI) ]; then \
		echo "install: kept the existing $(EXAMPLE_INI)"; \
	else \
		echo "$(INSTALL) -m 0644 etc/tagdisk.ini $(EXAMPLE_INI)"; \
		$(INSTALL) -m 0644 etc/tagdisk.ini $(EXAMPLE_INI); \
	fi
	@$(if $(DESTDIR),,echo "install: now run 'systemctl daemon-reload'")

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/tagdiskd $(DESTDIR)$(BINDIR)/tagdiskctl \
		$(DESTDIR)$(BINDIR)/tagdisk-replay \
		$(DESTDIR)$(UNITDIR)/tagdisk@.service \
		$(patsubst %,$(DESTDIR)$(MANDIR)/man8/%,$(notdir $(MAN8))) \
		$(patsubst %,$(DESTDIR)$(MANDIR)/man5/%,$(notdir $(MAN5))) \
		$(patsubst %,$(DESTDIR)$(DOCDIR)/%,$(notdir $(DOCS))) \
		$(DESTDIR)$(BASHCOMPDIR)/tagdiskctl
	@if cmp -s etc/tagdisk.ini $(EXAMPLE_INI); then \
		echo "rm -f $(EXAMPLE_INI)"; rm -f $(EXAMPLE_INI); \
	elif [ -e $(EXAMPLE_INI) ]; then \
		echo "uninstall: kept $(EXAMPLE_INI): it differs from etc/tagdisk.ini"; \
	fi
	@rmdir $(DESTDIR)$(SYSCONFDIR)/tagdisk 2>/dev/null || true
	@rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null || true

# Building and serving only: no test tools (tests/bats/make_run.bats checks the list).
run:
	$(call deps,build run)
	@$(MAKE) --no-print-directory all
	@if grep -qs " $(abspath $(RUN_MNT)) fuse" /proc/mounts && ! stat $(RUN_MNT) >/dev/null 2>&1; then \
		echo "run: detaching the dead mount left on $(RUN_MNT)"; \
		fusermount3 -u -z $(RUN_MNT) 2>/dev/null || umount -l $(RUN_MNT); \
	fi
	@mkdir -p $(RUN_MNT)
	@[ -e $(RUN_IMAGE) ] || truncate -s $(RUN_SIZE) $(RUN_IMAGE)
	@echo "tagdisk: serving $(RUN_IMAGE) as $(RUN_MNT)/disk; Ctrl-C stops it."
	@echo "  as a block device:  sudo losetup --direct-io=on -f --show $(RUN_MNT)/disk"
	@echo "  watch the queue:    $(BUILD)/tagdiskctl -s $(RUN_SOCK) status    (or top)"
	@echo "  before Ctrl-C:      sudo losetup -d /dev/loopN"
	@exec $(BUILD)/tagdiskd -f --image $(RUN_IMAGE) --size $(RUN_SIZE) --mount $(RUN_MNT) \
		--socket $(RUN_SOCK)

check-man:
	$(call deps,build man bats)
	@$(MAKE) --no-print-directory all
	@TD_BUILD=$(abspath $(BUILD)) bats tests/bats/manpages.bats

check-service:
	$(call deps,build run bats)
	@$(MAKE) --no-print-directory all
	@TD_BUILD=$(abspath $(BUILD)) bats tests/bats/slow/systemd_unit.bats

# ---- abuse: chaos stress, crash consistency, admin socket load (tests/stress/) ------------
#   make stress       STRESS_SECONDS (default 180) of chaos (resets, elevator and depth
#                     changes, injected errors and hangs, garbage on the admin socket)
#                     under ext4 on a loop device with fio verify and file churn
#   make stress-ci    the same for 60 s; make check runs it through tests/bats/stress.bats
#   make crash        CRASH_CYCLES (default 20) kill -9 at random points of fsyncing writers
#   make admin-load   200 admin clients against fio randread QD32, ADMIN_LOAD_SECONDS (30)
#                     per phase, alternating with fio alone; prints the IOPS drop
# Each needs root and /dev/fuse, prints its seed and its figures, and exits non-zero on
# any violation (77: skipped, with the reason). STRESS_SEED=N or CRASH_SEED=N repeats a
# run's random choices. tests/bats/stress.bats runs short versions of all three in
# make check (TD_STRESS_SECONDS, TD_CRASH_CYCLES, TD_ADMIN_LOAD_SECONDS set their length).
STRESS_SECONDS     ?= 180
CRASH_CYCLES       ?= 20
ADMIN_LOAD_SECONDS ?= 30
STRESS_RUN = TD_BUILD=$(abspath $(BUILD)) python3

.PHONY: stress-ci crash admin-load
stress:
	$(call deps,build run stress)
	@$(MAKE) --no-print-directory all
	@$(STRESS_RUN) tests/stress/stress.py --seconds $(STRESS_SECONDS)

stress-ci:
	@$(MAKE) --no-print-directory stress STRESS_SECONDS=60

crash:
	$(call deps,build run stress)
	@$(MAKE) --no-print-directory all
	@$(STRESS_RUN) tests/stress/crash.py --cycles $(CRASH_CYCLES)

admin-load:
	$(call deps,build run stress)
	@$(MAKE) --no-print-directory all
	@$(STRESS_RUN) tests/stress/admin_load.py --seconds $(ADMIN_LOAD_SECONDS)

# ---- make help ---------------------------------------------------------------------------
# Each target, what it needs (the tests/deps.sh groups it installs as root or names
# otherwise, and the rest) and about how long it takes on 2 CPUs. tests/bats/deps.bats
# checks that every target named here exists.
HELP_TARGETS := \
	"all|build tagdiskd, tagdiskctl and libtagdisk.a (the default)|build (checked, never installed)|1 min" \
	"run|serve RUN_DIR/tagdisk.img (RUN_SIZE: 1G, sparse) at RUN_DIR/mnt/disk in the foreground|build run; root, or fusermount3|until Ctrl-C" \
	"install|tagdiskd, tagdiskctl, tagdisk@.service, man pages, completion under PREFIX (/usr/local), DESTDIR|build|seconds" \
	"uninstall|remove exactly what install put|-|seconds" \
	"check|unit and integration tests (both transports, rq and mq) and a short fuzz run|build run test; root, /dev/fuse|25 min" \
	"unit|the unit tests (cmocka)|build unit|1 min" \
	"check-bats|the integration tests alone|build run test; root, /dev/fuse|20 min" \
	"asan|unit tests and the daemon tests that fit, under ASan and UBSan (build/asan)|build run test; root, /dev/fuse|15 min" \
	"tsan|the same under TSan (build/tsan)|build run test; root, /dev/fuse|15 min" \
	"check-valgrind|unit tests and a daemon run under memcheck|build run test; root, /dev/fuse|15 min" \
	"check-man|the man pages render cleanly and document what the code has|build man bats|1 min" \
	"check-service|tagdisk@.service under a real systemd|build run bats; root|2 min" \
	"fuzz|libFuzzer on each of 6 parsers for FUZZ_SECONDS (60), then its kept inputs|build fuzz|3 min + 6 x FUZZ_SECONDS" \
	"stress|chaos (resets, faults, garbage) under ext4 and fio verify|build run stress; root, /dev/fuse|3 min (STRESS_SECONDS)" \
	"crash|kill -9 fsyncing writers CRASH_CYCLES (20) times, check what survived|build run stress; root, /dev/fuse|5 min" \
	"admin-load|200 admin clients against fio randread QD32|build run stress; root, /dev/fuse|3 min" \
	"bench|raw file, bio, rq, mq on both FUSE transports, qemu-storage-daemon's FUSE export; BENCH_ARGS=--rbd: against a local Ceph cluster|build run bench (--rbd: rbd); root, /dev/fuse|25 min (--rbd: 5 min)" \
	"bench-engine|the engine alone, no FUSE|build|1 min" \
	"plots|docs/img/*.svg from traced runs of the HDD model|build run plots; root, /dev/fuse|2 min" \
	"deps|install everything make check needs|root, network|minutes" \
	"clean|remove build/|-|seconds" \
	"help|this list|-|-"

.PHONY: help
help:
	@echo 'tagdisk $(VERSION): make [TARGET] [VARIABLE=VALUE...]'
	@echo
	@printf '%s\n' $(HELP_TARGETS) | awk -F'|' ' \
		function wrap(text, first,   n, w, i, line) { \
			n = split(text, w, " "); line = first; \
			for (i = 1; i <= n; i++) { \
				if (length(line) + length(w[i]) > 78 && line !~ /^ *$$/) { print line; line = sprintf("%18s", ""); } \
				line = line (line ~ / $$/ ? "" : " ") w[i]; \
			} \
			print line; \
		} \
		{ wrap($$2, sprintf("  %-15s ", $$1)); wrap("needs: " $$3 "; takes: " $$4, sprintf("%18s", "")); }'
	@echo
	@echo 'needs: package groups of tests/deps.sh (tests/deps.sh --list GROUP names them):'
	@echo 'as root a target installs what is missing first, otherwise names it and stops.'
	@echo 'Other distributions: docs/requirements.md. Times are for 2 CPUs.'
	@echo 'Variables: WITH_RBD=0, WITH_NBD=0 (build without librbd, libnbd), BUILD (build),'
	@echo 'CFLAGS, PREFIX, DESTDIR, V=1 (show the commands).'
