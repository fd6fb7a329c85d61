#!/usr/bin/env bats
# make install / make uninstall into a DESTDIR, and the systemd unit they install.
#
# The installed set is exact: any file added to or missing from `make install` fails the
# first test. uninstall removes every file it installed, keeps an example.ini that was
# edited, removes SYSCONFDIR/tagdisk once empty, and leaves the shared directories (bin,
# sbin, man/man8, ...) where other programs live.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	[ -x "$TAGDISKD" ] && [ -x "$TAGDISKCTL" ] || { td_skip_file "tagdiskd and tagdiskctl are not built ($TD_BUILD)"; return 0; }
}

setup() {
	td_check_skip
	DEST=$BATS_TEST_TMPDIR/dest
}

# td_make ARGS: make in the source tree, reusing this build; not a sub-make of `make check`.
td_make() {
	env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS \
		make -s --no-print-directory -C "$TD_ROOT" BUILD="$TD_BUILD" "$@"
}

# Every file and symlink below $1 as "MODE PATH", sorted.
tree_files() {
	(cd "$1" && find . \( -type f -o -type l \) -printf '%m %P\n' | LC_ALL=C sort)
}

INSTALLED_FILES="644 etc/tagdisk/example.ini
644 usr/local/lib/systemd/system/tagdisk@.service
644 usr/local/share/bash-completion/completions/tagdiskctl
644 usr/local/share/doc/tagdisk/protocol.md
644 usr/local/share/man/man5/tagdisk.ini.5
644 usr/local/share/man/man8/tagdisk-replay.8
644 usr/local/share/man/man8/tagdiskctl.8
644 usr/local/share/man/man8/tagdiskd.8
755 usr/local/bin/tagdisk-replay
755 usr/local/bin/tagdiskctl
755 usr/local/sbin/tagdiskd"

# ---- install --------------------------------------------------------------------------------

@test "install puts exactly these files, with these modes, under DESTDIR" {
	run -0 td_make DESTDIR="$DEST" install
	[ "$(tree_files "$DEST")" = "$INSTALLED_FILES" ]
	cmp "$TAGDISKD" "$DEST/usr/local/sbin/tagdiskd"
	cmp "$TAGDISKCTL" "$DEST/usr/local/bin/tagdiskctl"
	cmp "$TD_BUILD/tagdisk-replay" "$DEST/usr/local/bin/tagdisk-replay"
	cmp "$TD_ROOT/docs/tagdisk-replay.8" "$DEST/usr/local/share/man/man8/tagdisk-replay.8"
	cmp "$TD_ROOT/docs/tagdiskd.8" "$DEST/usr/local/share/man/man8/tagdiskd.8"
	cmp "$TD_ROOT/docs/tagdiskctl.8" "$DEST/usr/local/share/man/man8/tagdiskctl.8"
	cmp "$TD_ROOT/docs/tagdisk.ini.5" "$DEST/usr/local/share/man/man5/tagdisk.ini.5"
	cmp "$TD_ROOT/etc/tagdiskctl.bash-completion" \
		"$DEST/usr/local/share/bash-completion/completions/tagdiskctl"
	cmp "$TD_ROOT/etc/tagdisk.ini" "$DEST/etc/tagdisk/example.ini"
	# The admin protocol, where the man pages say it is.
	cmp "$TD_ROOT/docs/protocol.md" "$DEST/usr/local/share/doc/tagdisk/protocol.md"
	grep -qF /usr/local/share/doc/tagdisk/protocol.md "$DEST/usr/local/share/man/man8/tagdiskctl.8"
	# With a DESTDIR, no advice to reload systemd: this is a staging tree.
	[[ $output != *daemon-reload* ]]
}

@test "the installed unit runs the installed tagdiskd, and DESTDIR is in no installed file" {
	run -0 td_make DESTDIR="$DEST" PREFIX=/usr install
	local unit=$DEST/usr/lib/systemd/system/tagdisk@.service
	[ -f "$unit" ]
	[ -x "$DEST/usr/sbin/tagdiskd" ]
	[ "$(grep '^ExecStart=' "$unit")" = \
		"ExecStart=/usr/sbin/tagdiskd -f -c /etc/tagdisk/%i.ini --socket /run/tagdisk/%i.sock" ]
	run -1 grep -E '@[A-Z_]+@' "$unit"
	run -1 grep -rlF "$DEST" "$DEST"
}

@test "the unit's settings: notify, reload by SIGHUP, fd store, shared runtime directory, mlock" {
	run -0 td_make DESTDIR="$DEST" install
	local unit=$DEST/usr/local/lib/systemd/system/tagdisk@.service
	local want
	for want in Type=notify NotifyAccess=main 'ExecReload=/bin/kill -HUP $MAINPID' \
		Restart=on-failure RestartPreventExitStatus=2 KillMode=mixed TimeoutStopSec=90 \
		RuntimeDirectory=tagdisk RuntimeDirectoryPreserve=yes StateDirectory=tagdisk \
		'ExecStartPre=-/bin/mkdir /run/tagdisk/%i' FileDescriptorStoreMax=2 \
		LimitMEMLOCK=infinity 'DeviceAllow=/dev/fuse rw' NoNewPrivileges=yes \
		'CapabilityBoundingSet=CAP_SYS_ADMIN CAP_IPC_LOCK CAP_SYS_RESOURCE CAP_CHOWN'; do
		grep -qxF "$want" "$unit" || { echo "no line '$want' in the unit"; false; }
	done
	# No unmount after the main process ends: after a crash it would take the mount the
	# restarted daemon is to take over.
	run -1 grep -E '^ExecStopPost=' "$unit"
}

@test "the unit gives the service no mount namespace, which would hide the disk from the host" {
	# Each of these makes systemd put the service in its own mount namespace with
	# propagation to the host turned off: the FUSE mount would exist only inside it.
	local unit=$TD_ROOT/systemd/tagdisk@.service.in opt
	for opt in ProtectSystem ProtectHome ReadWritePaths ReadOnlyPaths InaccessiblePaths \
		ExecPaths NoExecPaths PrivateTmp PrivateDevices ProtectKernelTunables \
		ProtectKernelModules ProtectKernelLogs ProtectControlGroups ProtectProc ProcSubset \
		PrivateIPC PrivateUsers TemporaryFileSystem BindPaths BindReadOnlyPaths RootDirectory \
		RootImage MountFlags DynamicUser; do
		run -1 grep -E "^$opt=" "$unit"
	done
	# systemd 254 and later imply PrivateMounts= with PrivateNetwork= unless it is off.
	[ "$(grep -E '^(PrivateMounts|PrivateNetwork)=' "$unit")" = "PrivateNetwork=yes
PrivateMounts=no" ]
}

@test "systemd-analyze verify accepts the installed unit, its man pages included" {
	requires systemd-analyze
	# A real prefix (no DESTDIR), so ExecStart names a file that exists.
	local prefix=$BATS_TEST_TMPDIR/prefix
	run -0 td_make PREFIX="$prefix" SYSCONFDIR="$prefix/etc" install
	mkdir "$BATS_TEST_TMPDIR/units"
	cp "$prefix/lib/systemd/system/tagdisk@.service" "$BATS_TEST_TMPDIR/units/"
	ln -s tagdisk@.service "$BATS_TEST_TMPDIR/units/tagdisk@vm1.service"
	cd "$BATS_TEST_TMPDIR/units"
	# Documentation=man:... is checked with man(1): point it at the installed pages.
	run -0 env MANPATH="$prefix/share/man" systemd-analyze verify ./tagdisk@vm1.service
	[ -z "$output" ]
	# The same check fails when a setting is broken, so the pass above means something.
	sed -i 's/^KillMode=mixed$/KillMode=sometimes/' "$BATS_TEST_TMPDIR/units/tagdisk@.service"
	run env MANPATH="$prefix/share/man" systemd-analyze verify ./tagdisk@vm1.service
	[[ $output == *"Failed to parse kill mode"* ]]
}

@test "a second install keeps an example.ini that was edited, and says so" {
	run -0 td_make DESTDIR="$DEST" install
	echo "; local edit" >>"$DEST/etc/tagdisk/example.ini"
	cp "$DEST/etc/tagdisk/example.ini" "$BATS_TEST_TMPDIR/edited.ini"
	run -0 td_make DESTDIR="$DEST" install
	[[ $output == *"install: kept the existing $DEST/etc/tagdisk/example.ini"* ]]
	cmp "$BATS_TEST_TMPDIR/edited.ini" "$DEST/etc/tagdisk/example.ini"
	[ "$(tree_files "$DEST")" = "$INSTALLED_FILES" ]
}

# ---- uninstall ------------------------------------------------------------------------------

# The directories install creates that uninstall leaves: shared with other programs.
SHARED_DIRS="etc
usr
usr/local
usr/local/bin
usr/local/lib
usr/local/lib/systemd
usr/local/lib/systemd/system
usr/local/sbin
usr/local/share
usr/local/share/bash-completion
usr/local/share/bash-completion/completions
usr/local/share/doc
usr/local/share/man
usr/local/share/man/man5
usr/local/share/man/man8"

@test "uninstall removes every installed file and SYSCONFDIR/tagdisk, nothing else" {
	run -0 td_make DESTDIR="$DEST" install
	echo other >"$DEST/usr/local/bin/other-program" && chmod 755 "$DEST/usr/local/bin/other-program"
	run -0 td_make DESTDIR="$DEST" uninstall
	[ "$(tree_files "$DEST")" = "755 usr/local/bin/other-program" ]
	[ "$(cd "$DEST" && find . -mindepth 1 -type d -printf '%P\n' | LC_ALL=C sort)" = "$SHARED_DIRS" ]
	# Nothing left to remove: a second uninstall succeeds and changes nothing.
	run -0 td_make DESTDIR="$DEST" uninstall
	[ "$(tree_files "$DEST")" = "755 usr/local/bin/other-program" ]
}

@test "uninstall keeps an example.ini that was edited, and the admin's disk configs" {
	run -0 td_make DESTDIR="$DEST" install
	echo "; local edit" >>"$DEST/etc/tagdisk/example.ini"
	echo "[disk]" >"$DEST/etc/tagdisk/vm1.ini"
	run -0 td_make DESTDIR="$DEST" uninstall
	[[ $output == *"uninstall: kept $DEST/etc/tagdisk/example.ini: it differs from etc/tagdisk.ini"* ]]
	[ "$(tree_files "$DEST" | sed 's/^[0-9]* //')" = "etc/tagdisk/example.ini
etc/tagdisk/vm1.ini" ]
}
