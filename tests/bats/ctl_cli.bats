#!/usr/bin/env bats
# tagdiskctl's command line contract (issue 11): commands it does not know go to the daemon
# as they are, and the daemon's refusal is exit 1 with its reason; its own usage errors are
# exit 2 before any connection; `iostat` without an interval is one report, like iostat(1).
#
# A stand-in daemon (fake_daemon) shows what reaches the socket: it logs each connection
# and each line it reads, and answers every line with one fixed reply.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse || return 0; }
setup() { td_setup_dir; }
teardown() {
	[ -z "${FAKE_PID:-}" ] || kill "$FAKE_PID" 2>/dev/null || true
	td_teardown
}

# fake_daemon REPLY: serve $TD_DIR/fake.sock in the background, one connection at a time,
# answering each line with REPLY; log "connect" and "line <the line>" to $TD_DIR/fake.log.
fake_daemon() {
	python3 - "$TD_DIR/fake.sock" "$TD_DIR/fake.log" "$1" <<'PY' &
import socket, sys
path, log, reply = sys.argv[1], sys.argv[2], sys.argv[3].encode() + b"\n"
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(8)
while True:
    c, _ = s.accept()
    with open(log, "ab") as f:
        f.write(b"connect\n")
    r = c.makefile("rb")
    for line in r:
        with open(log, "ab") as f:
            f.write(b"line " + line)
        c.sendall(reply)
    c.close()
PY
	FAKE_PID=$!
	td_wait_until 60 test -S "$TD_DIR/fake.sock"
}

# ---- commands tagdiskctl does not know ----------------------------------------------------

@test "an unknown command reaches the daemon, which names it: exit 1, its error on stderr" {
	start_tagdiskd --size 64M
	run -1 --separate-stderr td_ctl frobnicate
	[ "$output" = "" ]
	[ "$stderr" = 'tagdiskctl: unknown command "frobnicate" (try "help")' ]
	# --json shows the daemon's line as received, and still exits 1.
	run -1 --separate-stderr td_ctl --json frobnicate --with args
	[ "$output" = '{"ok":false,"error":"unknown command \"frobnicate\" (try \"help\")"}' ]
	[ "$stderr" = "" ]
	# The daemon served it and goes on serving.
	[ "$(td_status state)" = running ]
}

@test "an unknown command is sent as it is, words and options alike; an ok reply is shown member by member" {
	fake_daemon '{"ok":true,"answer":42,"ratio":0.5,"name":"a/b","flag":true,"list":[1,"x"],"none":null}'
	run -0 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/fake.sock" frobnicate now -x --please 'two words'
	[ "$stderr" = "" ]
	diff - <(printf '%s\n' "$output") <<'EOF'
answer  42
ratio   0.5
name    a/b
flag    true
list    [1,"x"]
none    null
EOF
	diff - "$TD_DIR/fake.log" <<'EOF'
connect
line frobnicate now -x --please two words
EOF
	# --json: the reply line as received.
	run -0 "$TAGDISKCTL" -s "$TD_DIR/fake.sock" --json frobnicate
	[ "$output" = '{"ok":true,"answer":42,"ratio":0.5,"name":"a/b","flag":true,"list":[1,"x"],"none":null}' ]
}

@test "an ok reply to an unknown command with nothing but ok prints nothing" {
	fake_daemon '{"ok":true}'
	run -0 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/fake.sock" frobnicate
	[ "$output" = "" ]
	[ "$stderr" = "" ]
}

# ---- usage errors: exit 2, no connection ---------------------------------------------------

@test "--bogus-option exits 2 without connecting" {
	fake_daemon '{"ok":true}'
	run -2 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/fake.sock" --bogus-option status
	[ "$output" = "" ]
	[ "$stderr" = $'tagdiskctl: unknown option --bogus-option\nTry \'tagdiskctl --help\' for more information.' ]
	# Connections are served in turn: had the first run connected, the log would show it
	# before this one.
	run -0 "$TAGDISKCTL" -s "$TD_DIR/fake.sock" frobnicate
	diff - "$TD_DIR/fake.log" <<'EOF'
connect
line frobnicate
EOF
}

@test "the CLI's own checks on an unknown command are exit 2 without connecting" {
	fake_daemon '{"ok":true}'
	run -2 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/fake.sock" -i 1 frobnicate
	[ "${stderr_lines[0]}" = "tagdiskctl: -i and -n apply to status, stats and top, not frobnicate" ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/fake.sock" frobnicate $'a\nreset'
	[ "${stderr_lines[0]}" = "tagdiskctl: frobnicate: an argument holds a line break" ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/fake.sock" "$(printf 'x%.0s' {1..4097})"
	[ "${stderr_lines[0]}" = "tagdiskctl: command too long (over 4096 bytes)" ]
	[ ! -e "$TD_DIR/fake.log" ]
}

# ---- iostat --------------------------------------------------------------------------------

IOSTAT_HEADER="r/s w/s rKiB/s wKiB/s rrqm/s wrqm/s r_await(ms) w_await(ms) aqu-sz tags %util"
IOSTAT_KEYS="interval_s,r_s,w_s,rKiB_s,wKiB_s,rrqm_s,wrqm_s,r_await_ms,w_await_ms,aqu_sz,tags_in_use,util_pct"

@test "iostat with no interval prints exactly one report and exits 0" {
	start_tagdiskd --size 64M
	dd if=/dev/zero of="$TD_DISK" bs=4k count=10 oflag=direct conv=notrunc status=none
	# timeout: a regression that repeats for ever fails instead of hanging.
	run -0 --separate-stderr timeout 60 "$TAGDISKCTL" -s "$TD_SOCK" iostat
	[ "$stderr" = "" ]
	[ "${#lines[@]}" -eq 2 ]
	[ "$(awk 'NR == 1 { $1 = $1; print }' <<<"$output")" = "$IOSTAT_HEADER" ]
	[ "$(awk 'NR == 2 { print NF }' <<<"$output")" -eq 11 ]
	# The one report covers the time since the daemon started: it saw the 10 writes.
	run -0 timeout 60 "$TAGDISKCTL" -s "$TD_SOCK" --json iostat
	[ "${#lines[@]}" -eq 1 ]
	python3 - "$output" "$IOSTAT_KEYS" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
assert ",".join(r) == sys.argv[2], list(r)
assert abs(r["w_s"] * r["interval_s"] - 10) < 1e-3, r
PY
}

@test "iostat 1 2 prints two reports and exits 0" {
	start_tagdiskd --size 64M
	run -0 --separate-stderr timeout 60 "$TAGDISKCTL" -s "$TD_SOCK" iostat 1 2
	[ "${#lines[@]}" -eq 3 ]
	[ "$(awk 'NR == 1 { $1 = $1; print }' <<<"$output")" = "$IOSTAT_HEADER" ]
	[ "$(awk 'NR > 1 && NF == 11' <<<"$output" | wc -l)" -eq 2 ]
	run -0 timeout 60 "$TAGDISKCTL" -s "$TD_SOCK" --json iostat 1 2
	[ "${#lines[@]}" -eq 2 ]
}

@test "iostat INTERVAL alone repeats until interrupted, then exits 0" {
	start_tagdiskd --size 64M
	"$TAGDISKCTL" -s "$TD_SOCK" --json iostat 0.1 >"$TD_DIR/iostat.json" &
	local ipid=$!
	td_wait_until 60 eval '[ "$(wc -l <"$TD_DIR/iostat.json")" -ge 3 ]'
	kill -INT "$ipid"
	wait "$ipid"
}

# ---- help that needs no daemon (issue 32) --------------------------------------------------

CTL_COMMANDS="help status stats tags reset elevator depth inject powerfail trace iostat top"

@test "COMMAND --help and -h print that command's usage and exit 0 without contacting the daemon" {
	fake_daemon '{"ok":true}'
	local c
	for c in $CTL_COMMANDS; do
		run -0 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/fake.sock" "$c" --help
		[[ "${lines[0]}" == "Usage: tagdiskctl [-s SOCKET] [-t SECONDS] [--json] $c"* ]] ||
			{ echo "$c --help: ${lines[0]}"; false; }
		[ "${lines[-1]}" = "Exit status: 0 ok, 1 the daemon refused, 2 usage error, 3 cannot reach the daemon." ]
		[ "$stderr" = "" ]
		# -h, and help COMMAND, print the same.
		diff <("$TAGDISKCTL" -s "$TD_DIR/fake.sock" "$c" -h) <(printf '%s\n' "$output")
		diff <("$TAGDISKCTL" -s "$TD_DIR/fake.sock" help "$c") <(printf '%s\n' "$output")
	done
	# Also after other arguments, and with no daemon at all.
	run -0 "$TAGDISKCTL" -s "$TD_DIR/none.sock" elevator noop --help
	[ "${lines[0]}" = "Usage: tagdiskctl [-s SOCKET] [-t SECONDS] [--json] elevator [NAME]" ]
	[ "${lines[1]}" = "Show the elevator, or drain and switch to NAME." ]
	run -0 "$TAGDISKCTL" -s "$TD_DIR/none.sock" trace -h
	[[ "$output" == *"  -o, --blktrace, --output FILE"* ]]
	[[ "$output" == *"  RWBS    as blkparse prints it: R read, W write, D discard, FN flush (no data),"* ]]
	# Nothing reached the daemon.
	[ ! -e "$TD_DIR/fake.log" ]
	# help of a command nobody knows: exit 2, with the near ones.
	run -2 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/none.sock" help elevatr
	[ "$stderr" = 'tagdiskctl: help: unknown command "elevatr" (did you mean "elevator"?)' ]
}

@test "help lists each command once, in the syntax tagdiskctl accepts, and the daemon's others" {
	# A daemon whose help names trace in its own syntax, and a command of its own.
	fake_daemon '{"ok":true,"commands":[{"name":"status","usage":"status","help":"s"},{"name":"trace","usage":"trace [blktrace] [buffer_kib=KIB]","help":"t"},{"name":"frob","usage":"frob [N]","help":"frobnicate N times"}]}'
	run -0 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/fake.sock" help
	[ "$stderr" = "" ]
	local c usage
	for c in $CTL_COMMANDS frob; do
		[ "$(grep -cE "^  $c( |$)" <<<"$output")" -eq 1 ] || { echo "$c is not listed once"; false; }
	done
	# Each of tagdiskctl's in the syntax its --help gives, which it accepts.
	for c in $CTL_COMMANDS; do
		usage=$("$TAGDISKCTL" "$c" --help | sed -n '1s/^Usage: tagdiskctl \[-s SOCKET\] \[-t SECONDS\] \[--json\] //p')
		grep -qF "  $usage" <<<"$output" || { echo "help does not show \"$usage\""; false; }
	done
	grep -qE '^  frob \[N\] +frobnicate N times$' <<<"$output"
	run -1 grep -F 'buffer_kib' <<<"$output"
	diff - "$TD_DIR/fake.log" <<'EOF2'
connect
line help
EOF2
}

@test "help without a daemon lists tagdiskctl's commands and says on stderr why only those" {
	run -0 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/none.sock" help
	[ "$stderr" = "tagdiskctl: cannot connect to $TD_DIR/none.sock: No such file or directory (is tagdiskd running? use -s SOCKET); tagdiskctl's own commands only:" ]
	local c
	for c in $CTL_COMMANDS; do
		[ "$(grep -cE "^  $c( |$)" <<<"$output")" -eq 1 ]
	done
}

@test "an unknown command near known ones: did you mean, with the daemon up (exit 1) and down (exit 2)" {
	start_tagdiskd --size 64M
	run -1 --separate-stderr td_ctl stat
	[ "$stderr" = 'tagdiskctl: unknown command "stat" (did you mean "stats" or "status"?)' ]
	# The daemon suggests from its commands; top is tagdiskctl's own, and it says so.
	run -1 --separate-stderr td_ctl tpo
	[ "$stderr" = 'tagdiskctl: unknown command "tpo" (did you mean "top"?)' ]
	run -1 --separate-stderr td_ctl --json stat
	[ "$output" = '{"ok":false,"error":"unknown command \"stat\" (did you mean \"stats\" or \"status\"?)"}' ]
	# With no daemon, a typo is a usage error, not a connection failure.
	run -2 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/none.sock" stat
	[ "$stderr" = "tagdiskctl: unknown command \"stat\" (did you mean \"stats\" or \"status\"?); no daemon to ask whether it knows it: cannot connect to $TD_DIR/none.sock: No such file or directory (is tagdiskd running? use -s SOCKET)" ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/none.sock" frobnicate
	[[ "$stderr" == 'tagdiskctl: unknown command "frobnicate" (try "tagdiskctl help"); no daemon to ask'* ]]
	# A known command with no daemon is still exit 3.
	run -3 "$TAGDISKCTL" -s "$TD_DIR/none.sock" status
}

@test "-s naming something that is not a socket says what it is: exit 2" {
	touch "$TD_DIR/file"
	run -2 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/file" status
	[ "$stderr" = "tagdiskctl: $TD_DIR/file is a regular file, not a socket (given with -s): -s SOCKET names the admin socket of tagdiskd (its [admin] socket or --socket)" ]
	TAGDISK_SOCKET=$TD_DIR run -2 --separate-stderr "$TAGDISKCTL" status
	[ "$stderr" = "tagdiskctl: $TD_DIR is a directory, not a socket (from \$TAGDISK_SOCKET): -s SOCKET names the admin socket of tagdiskd (its [admin] socket or --socket)" ]
}

@test "status explains FUSE over io_uring: rings, entries, helpers, and the requests each ring received" {
	fake_daemon '{"ok":true,"state":"running","transport":"uring","fuse_threads":2,"uring_requests":[7,334],"uring_entries":64,"uring_helpers":1}'
	run -0 "$TAGDISKCTL" -s "$TD_DIR/fake.sock" status
	grep -qxF "fuse        uring, 2 threads on /dev/fuse" <<<"$output"
	grep -qxF "uring       2 queues (one per CPU) x 64 entries, 1 helper ring (for requests >= 64 KiB)" <<<"$output"
	grep -qxF "uring reqs  7 on queue 0, 334 on queue 1 (received since start)" <<<"$output"
	# Many CPUs: the sum, the least and the most.
	kill "$FAKE_PID"
	rm -f "$TD_DIR/fake.sock"
	fake_daemon '{"ok":true,"transport":"uring","fuse_threads":2,"uring_requests":[5,9,1,30,2,8],"uring_entries":32,"uring_helpers":0}'
	run -0 "$TAGDISKCTL" -s "$TD_DIR/fake.sock" status
	grep -qxF "uring       6 queues (one per CPU) x 32 entries, 0 helper rings (for requests >= 64 KiB)" <<<"$output"
	grep -qxF "uring reqs  55 in all; least 1 (queue 2), most 30 (queue 3) (received since start)" <<<"$output"
}
