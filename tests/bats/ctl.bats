#!/usr/bin/env bats
# tagdiskctl: the tables people read, --json, the exit statuses (0 ok, 1 the
# daemon said no, 2 usage, 3 cannot reach the daemon), and the commands that
# repeat or stream: top, iostat, trace.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { requires_fuse || return 0; }
setup() { td_setup_dir; }
teardown() {
	[ -z "${BG_PIDS:-}" ] || kill $BG_PIDS 2>/dev/null || true
	td_teardown
	td_remove_test_users
}

# kv KEY VALUE: one line of a name/value block whose widest name is $KV_WIDTH wide.
kv() {
	printf "%s%-${KV_WIDTH}s  %s\n" "${KV_INDENT:-}" "$1" "$2"
}

# ---- the tables ------------------------------------------------------------------------------

@test "status prints one line per documented key, aligned, with this daemon's values" {
	start_tagdiskd --size 64M
	run -0 td_ctl status
	local KV_WIDTH=10 keys
	keys=$(cut -c1-10 <<<"$output" | sed 's/ *$//' | paste -sd,)
	[ "$keys" = "state,image,backend,size,disk,read-only,mode,elevator,tags,in flight,queued,requests,drive,fuse,recovery,iops,throughput,resets,timeouts,errors,write log,uptime,pid,version" ]
	[ "${lines[0]}" = "$(kv state running)" ]
	[ "${lines[1]}" = "$(kv image "$TD_IMG")" ]
	[ "${lines[2]}" = "$(kv backend "file ($TD_IMG)")" ]
	[ "${lines[3]}" = "$(kv size '64.0 MiB (67108864 bytes)')" ]
	[ "${lines[4]}" = "$(kv disk "$TD_DISK")" ]
	[ "${lines[5]}" = "$(kv read-only no)" ]
	[ "${lines[6]}" = "$(kv mode rq)" ]
	[ "${lines[7]}" = "$(kv elevator deadline)" ]
	[ "${lines[8]}" = "$(kv tags 0/32)" ]
	[ "${lines[9]}" = "$(kv 'in flight' 0)" ]
	[ "${lines[10]}" = "$(kv queued 0)" ]
	[ "${lines[11]}" = "$(kv requests 0/128)" ]
	[ "${lines[12]}" = "$(kv drive 'inline (no worker threads), model none, write cache writeback')" ]
	# The transport this suite runs on; its threads as many as the daemon says.
	[[ "${lines[13]}" =~ ^"fuse        classic, "([0-9]+)" threads on /dev/fuse"$ ]]
	[ "${BASH_REMATCH[1]}" -eq "$(td_status fuse_threads)" ]
	# No service manager keeps the connection here: only a restart in place keeps the mount.
	[ "${lines[14]}" = "$(kv recovery 'restart only: no service manager keeps the connection, a crash loses the mount (0 takeovers)')" ]
	[[ "${lines[15]}" =~ ^"iops        0.0 (read 0.0, write 0.0, over "[0-9]+\.[0-9]" s)"$ ]]
	[ "${lines[16]}" = "$(kv throughput '0 B/s (read 0 B/s, write 0 B/s)')" ]
	[ "${lines[17]}" = "$(kv resets 0)" ]
	[ "${lines[18]}" = "$(kv timeouts 0)" ]
	[ "${lines[19]}" = "$(kv errors 0)" ]
	[ "${lines[20]}" = "$(kv 'write log' off)" ]
	[[ "${lines[21]}" =~ ^"uptime      "[0-9]+s$ ]]
	[ "${lines[22]}" = "$(kv pid "$TD_PID")" ]
	[ "${lines[23]}" = "$(kv version 0.1.0)" ]
	[ "${#lines[@]}" -eq 24 ]
}

@test "status in bio mode says there are no tags" {
	start_tagdiskd --size 64M --mode bio
	run -0 td_ctl status
	local KV_WIDTH=10
	[ "${lines[6]}" = "$(kv mode bio)" ]
	[ "${lines[7]}" = "$(kv elevator none)" ]
	[ "${lines[8]}" = "$(kv tags '- (no tags in mode bio)')" ]
}

@test "stats prints the per-op table, then the queue and drive blocks" {
	start_tagdiskd --size 64M
	dd if="$TD_DISK" of=/dev/null bs=4k count=100 iflag=direct status=none
	dd if=/dev/zero of="$TD_DISK" bs=4k count=50 oflag=direct conv=notrunc status=none
	run -0 td_ctl stats
	diff <(sed -n 1,6p <<<"$output") - <<'EOF'
OP            COUNT      BYTES  MERGES
read            100  400.0 KiB       0
write            50  200.0 KiB       0
flush             0          -       -
discard           0        0 B       -
write_zeroes      0        0 B       -
EOF
	# bats drops empty lines from ${lines[@]}: the blank lines are in $output.
	[ "$(sed -n 7p <<<"$output")" = "" ]
	# The latencies in one unit, named in the first title; "~": from the histogram.
	[[ "$(sed -n 8p <<<"$output")" =~ ^"LATENCY("(us|ms|s)")   MEAN  ~P50  ~P90  ~P99  ~P99.9  "+"MAX"$ ]]
	local lat='( +[0-9]+(\.[0-9]{3})?){6}$' none='( +-){6}$'
	[[ "$(sed -n 9p <<<"$output")" =~ ^"read "$lat ]]
	[[ "$(sed -n 10p <<<"$output")" =~ ^"write "$lat ]]
	[[ "$(sed -n 11p <<<"$output")" =~ ^"flush "$none ]]
	[[ "$(sed -n 12p <<<"$output")" =~ ^"discard "$none ]]
	[[ "$(sed -n 13p <<<"$output")" =~ ^"write_zeroes "$none ]]
	[ "$(sed -n 14p <<<"$output")" = "~ from a log histogram: within 1/16 of the true value; MEAN, MAX exact" ]
	[ "$(sed -n 15p <<<"$output")" = "" ]
	local KV_WIDTH=17 KV_INDENT='  '
	diff <(sed -n '16,$p' <<<"$output" | grep -v 'ticks ms\|time in queue ms') - <<EOF
queue
$(kv deferred 0)
$(kv killed 0)
$(kv requeued 0)
$(kv resets 0)
$(kv timeouts 0)
$(kv 'retries exhausted' 0)
$(kv errors 0)
$(kv 'trace dropped' 0)
$(kv 'in flight' 0)
$(kv 'front merges' 0)
$(kv 'back merges' 0)
drive
$(kv commands 150)
$(kv queued 0)
$(kv executing 0)
$(kv hung 0)
$(kv seeks 0)
$(kv 'seek distance' 0)
$(kv 'mean seek sectors' 0.0)
EOF
	[[ "$output" == *$'\n  io ticks ms        '[0-9]*$'\n  time in queue ms   '[0-9]*$'\ndrive\n'* ]]
}

@test "tags: 'no outstanding tags', then a row per held command; reset says how many it requeued" {
	start_tagdiskd --size 64M
	run -0 td_ctl tags
	[ "$output" = "no outstanding tags (depth 32)" ]
	run -0 td_ctl reset
	[ "$output" = "reset: 0 requests requeued" ]
	td_ctl inject hang >/dev/null
	dd if="$TD_DISK" of=/dev/null bs=4k skip=256 count=1 iflag=direct status=none &
	local rpid=$!
	td_wait_until 60 bash -c '"$1" -s "$2" tags | grep -q read' _ "$TAGDISKCTL" "$TD_SOCK"
	run -0 td_ctl tags
	[ "${#lines[@]}" -eq 2 ]
	[ "$(awk 'NR == 1 { $1 = $1; print }' <<<"$output")" = "TAG OP SECTOR SECTORS AGE RETRIES PID CDB" ]
	[[ "${lines[1]}" =~ ^" "*[0-9]+"  read    2048        8  "" "*[0-9.]+" "(us|ms|s)"        0  "" "*"$rpid  28 00 00 00 08 00 00 00 08 00"$ ]]
	run -0 td_ctl reset
	[ "$output" = "reset: 1 requests requeued" ]
	wait "$rpid"
	run -0 td_ctl tags
	[ "$output" = "no outstanding tags (depth 32)" ]
}

@test "elevator and depth print the current value, or 'old -> new'" {
	start_tagdiskd --size 64M
	run -0 td_ctl elevator
	[ "$output" = "elevator: deadline (available: deadline, noop)" ]
	run -0 td_ctl elevator noop
	[ "$output" = "elevator: deadline -> noop" ]
	run -0 td_ctl depth
	[ "$output" = "depth: 32 (max 4096)" ]
	run -0 td_ctl depth 12
	[ "$output" = "depth: 32 -> 12" ]
	run -0 td_ctl status
	[[ "$output" == *$'\nelevator    noop\ntags        0/12\n'* ]]
}

@test "inject prints the rules as a table, or 'no faults armed', and the seed" {
	start_tagdiskd --size 64M
	run -0 td_ctl inject list
	[ "$output" = $'no faults armed\nseed 1' ]
	run -0 td_ctl inject error op=read sector=8 count=16 times=2
	diff - <(printf '%s\n' "$output") <<'EOF'
KIND   OP    SECTOR  COUNT  TIMES-LEFT  FIRED
error  read       8     16           2      0
seed 1
EOF
	td_ctl inject hang times=1 >/dev/null
	td_ctl inject every 50 >/dev/null
	td_ctl inject latency 1500 >/dev/null
	td_ctl inject seed 77 >/dev/null
	run -0 td_ctl inject error op=any sector=123456 count=1
	diff - <(printf '%s\n' "$output") <<'EOF'
KIND             OP    SECTOR  COUNT  TIMES-LEFT  FIRED
error            read       8     16           2      0
hang             -          -      -           1      0
error            any   123456      1     forever      0
every 50         -          -      -           -      0
latency 1.50 ms  -          -      -           -      0
seed 77
EOF
	run -0 td_ctl inject clear
	[ "$output" = $'no faults armed\nseed 77' ]
}

@test "--json prints each reply line exactly as the daemon sent it" {
	start_tagdiskd --size 64M
	local cmd
	for cmd in depth elevator tags 'inject list' 'inject every 3' reset help; do
		# shellcheck disable=SC2086 # the command and its arguments
		[ "$(td_ctl --json $cmd)" = "$(td_admin "$cmd")" ] || {
			echo "differs: $cmd" >&2
			return 1
		}
	done
	[ "$(td_ctl --json depth 9)" = '{"ok":true,"depth":9,"previous":32}' ]
	[ "$(td_ctl --json elevator noop)" = '{"ok":true,"elevator":"noop","previous":"deadline"}' ]
	# The same for status and stats, apart from the moving clocks.
	[ "$(td_ctl --json status | sed 's/"uptime_s":[0-9]*,//; s/"rate":.*//')" = \
		"$(td_admin status | sed 's/"uptime_s":[0-9]*,//; s/"rate":.*//')" ]
	run -0 td_ctl --json stats
	[[ "$output" == '{"ok":true,"uptime_us":'* ]]
	[ "${#lines[@]}" -eq 1 ]
}

@test "help lists the daemon's commands and the client's own" {
	start_tagdiskd --size 64M
	run -0 td_ctl help
	local c
	for c in help status stats tags reset 'elevator \[NAME\]' 'depth \[N\]' 'inject error op=' \
		'powerfail \[keep=PCT\]' trace 'iostat \[INTERVAL \[COUNT\]\]' 'top \[-i SECONDS\]'; do
		grep -qE "^  $c" <<<"$output" || {
			echo "missing: $c" >&2
			return 1
		}
	done
	run -0 "$TAGDISKCTL" --help
	[[ "$output" == "Usage: tagdiskctl [-s SOCKET] [-t SECONDS] [--json] COMMAND [ARGS]"* ]]
	[[ "$output" == *"Exit status: 0 ok, 1 the daemon refused, 2 usage error, 3 cannot reach the daemon."* ]]
	run -0 "$TAGDISKCTL" --version
	[ "$output" = "tagdiskctl 0.1.0" ]
}

# ---- exit statuses ---------------------------------------------------------------------------

@test "exit 1 when the daemon refuses, with its reason on stderr (or the raw line with --json)" {
	start_tagdiskd --size 64M
	run -1 --separate-stderr td_ctl depth 0
	[ "$output" = "" ]
	[ "$stderr" = "tagdiskctl: depth: 0 is out of range (1..4096)" ]
	run -1 --separate-stderr td_ctl elevator nosuch
	[ "$stderr" = 'tagdiskctl: elevator: unknown elevator "nosuch" (available: deadline, noop)' ]
	run -1 --separate-stderr td_ctl inject error op=foo sector=1 count=1
	[ "$stderr" = 'tagdiskctl: inject error: op="foo" is not read, write or any' ]
	run -1 --separate-stderr td_ctl powerfail
	[ "$stderr" = "tagdiskctl: powerfail: needs write_cache = volatile (this drive is writeback)" ]
	run -1 --separate-stderr td_ctl --json depth abc
	[ "$output" = '{"ok":false,"error":"depth: \"abc\" is not a number"}' ]
	[ "$stderr" = "" ]
	# Nothing changed.
	[ "$(td_status depth)" -eq 32 ]
}

@test "exit 2 for a usage error, found before connecting" {
	# No daemon at all: a usage error must not depend on one.
	local s=$TD_DIR/none.sock
	# (An unknown command is no usage error: it goes to the daemon, tests/bats/ctl_cli.bats.)
	run -2 --separate-stderr "$TAGDISKCTL" -s "$s" --bogus status
	[ "$stderr" = $'tagdiskctl: unknown option --bogus\nTry \'tagdiskctl --help\' for more information.' ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$s"
	[ "${stderr_lines[0]}" = "tagdiskctl: no command given" ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$s" -x status
	[ "${stderr_lines[0]}" = "tagdiskctl: unknown option -x" ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$s" depth 1 2
	[ "${stderr_lines[0]}" = "tagdiskctl: usage: depth [N]" ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$s" inject
	[[ "${stderr_lines[0]}" == "tagdiskctl: usage: inject error op=read|write|any"* ]]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$s" tags -n 1
	[ "${stderr_lines[0]}" = "tagdiskctl: usage: tags" ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$s" -i 1 tags
	[ "${stderr_lines[0]}" = "tagdiskctl: -i and -n apply to status, stats and top, not tags" ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$s" top -n 0
	[ "${stderr_lines[0]}" = 'tagdiskctl: -n: "0" is not a positive integer' ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$s" -t abc status
	[ "${stderr_lines[0]}" = 'tagdiskctl: -t: "abc" is not a positive number of seconds' ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$s" iostat 0
	[ "${stderr_lines[0]}" = 'tagdiskctl: iostat: INTERVAL "0" is not a positive number of seconds' ]
	run -2 --separate-stderr "$TAGDISKCTL" -s "$s" elevator $'noop\nreset'
	[ "${stderr_lines[0]}" = "tagdiskctl: elevator: an argument holds a line break" ]
	run -2 --separate-stderr "$TAGDISKCTL" -s
	[ "${stderr_lines[0]}" = "tagdiskctl: option -s needs a value" ]
	[ ! -e "$s" ]
}

@test "exit 3 when the daemon cannot be reached, naming the socket" {
	run -3 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/none.sock" status
	[ "$output" = "" ]
	[ "$stderr" = "tagdiskctl: cannot connect to $TD_DIR/none.sock: No such file or directory (is tagdiskd running? use -s SOCKET)" ]
	# $TAGDISKD_SOCKET stands in for -s.
	TAGDISK_SOCKET=$TD_DIR/env.sock run -3 --separate-stderr "$TAGDISKCTL" status
	[[ "$stderr" == "tagdiskctl: cannot connect to $TD_DIR/env.sock: No such file or directory"* ]]
	# A socket nobody listens on.
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$TD_DIR/stale.sock"
	run -3 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/stale.sock" status
	[[ "$stderr" == "tagdiskctl: cannot connect to $TD_DIR/stale.sock: Connection refused"* ]]
	local long
	long=$TD_DIR/$(printf 'x%.0s' {1..120}).sock
	run -3 --separate-stderr "$TAGDISKCTL" -s "$long" status
	[ "$stderr" = "tagdiskctl: cannot connect to $long: path too long (at most 107 bytes)" ]
	# A listener that accepts and says nothing, and one that hangs up at once.
	python3 - "$TD_DIR/mute.sock" "$TD_DIR/rude.sock" <<'PY' &
import os, socket, sys, threading
def serve(path, rude):
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    keep = []
    while True:
        c, _ = s.accept()
        if rude:
            c.recv(100)
            c.close()
        else:
            keep.append(c)
for i, p in enumerate(sys.argv[1:]):
    threading.Thread(target=serve, args=(p, i == 1), daemon=True).start()
threading.Event().wait()  # serve until teardown kills it
PY
	BG_PIDS=$!
	td_wait_until 60 test -S "$TD_DIR/rude.sock"
	run -3 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/mute.sock" -t 0.5 status
	[ "$stderr" = "tagdiskctl: no reply from the daemon on $TD_DIR/mute.sock within 0.5 s" ]
	run -3 --separate-stderr "$TAGDISKCTL" -s "$TD_DIR/rude.sock" status
	[ "$stderr" = "tagdiskctl: the daemon on $TD_DIR/rude.sock closed the connection without replying" ]
}

@test "a user the daemon refuses gets exit 1 and the daemon's reason; one the socket file refuses gets exit 3" {
	td_test_user tdtest
	chmod 0755 "$TD_DIR"
	[ "$(stat -c %a "$TAGDISKCTL")" = 755 ]
	printf '[admin]\nsocket_mode = 0666\n' >"$TD_DIR/open.ini"
	start_tagdiskd --size 64M -c "$TD_DIR/open.ini"
	run -1 --separate-stderr setpriv --reuid tdtest --regid tdtest --clear-groups "$TAGDISKCTL" -s "$TD_SOCK" status
	[ "$stderr" = "tagdiskctl: permission denied: not root, the daemon's user, or a member of the socket's group" ]
	stop_tagdiskd
	start_tagdiskd
	run -3 --separate-stderr setpriv --reuid tdtest --regid tdtest --clear-groups "$TAGDISKCTL" -s "$TD_SOCK" status
	[ "$stderr" = "tagdiskctl: cannot connect to $TD_SOCK: Permission denied (run as root or as a member of the socket's group)" ]
}

# ---- repeating and streaming -----------------------------------------------------------------

@test "top -n 2 -i 0.2 prints the status block twice, 0.2 s apart, and exits 0" {
	start_tagdiskd --size 64M
	local t0 t1
	t0=$EPOCHREALTIME
	# It ends by itself after the second block (timeout only guards against a hang).
	run -0 timeout 60 "$TAGDISKCTL" -s "$TD_SOCK" top -n 2 -i 0.2
	t1=$EPOCHREALTIME
	# At least the interval apart (a slower machine only adds to it).
	awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a >= 0.2) }'
	[ "$(grep -c '^state       running$' <<<"$output")" -eq 2 ]
	[ "$(grep -c "^pid         $TD_PID\$" <<<"$output")" -eq 2 ]
	# Not a terminal: no screen clearing, one blank line between the blocks.
	[ "$(wc -l <<<"$output")" -eq 49 ]
	[ "$(sed -n 25p <<<"$output")" = "" ]
	[[ "$output" != *$'\033'* ]]
	# status -n is the same thing.
	run -0 td_ctl status -n 2 -i 0.1
	[ "$(grep -c '^state       running$' <<<"$output")" -eq 2 ]
}

@test "iostat 0.5 2 prints a header and two rows of numbers; w/s > 0 while a dd writes" {
	start_tagdiskd --size 64M
	# Direct 4 KiB writes over and over until killed.
	while dd if=/dev/zero of="$TD_DISK" bs=4k count=2000 oflag=direct conv=notrunc status=none; do
		:
	done &
	BG_PIDS=$!
	# The first row covers the time since the daemon started: wait for a write in it.
	td_wait_until 60 eval '[ "$(td_stats writes)" -gt 0 ]'
	run -0 td_ctl iostat 0.5 2
	printf '%s\n' "$output" >"$TD_DIR/iostat.txt"
	[ "${#lines[@]}" -eq 3 ]
	[ "$(awk 'NR == 1 { $1 = $1; print }' <<<"$output")" = "r/s w/s rKiB/s wKiB/s rrqm/s wrqm/s r_await(ms) w_await(ms) aqu-sz tags %util" ]
	python3 - "$TD_DIR/iostat.txt" <<'PY'
import sys
rows = open(sys.argv[1]).read().splitlines()[1:]
assert len(rows) == 2, rows
for r in rows:
    f = r.split()
    assert len(f) == 11, f
    v = [float(x) for x in f]
    assert f[9].isdigit(), f
    # w/s > 0, 4 KiB each, no reads; util a percentage.
    assert v[1] > 0 and abs(v[3] - 4 * v[1]) <= 0.02 * v[3] + 0.05, f
    assert v[0] == 0 and v[2] == 0, f
    assert 0 < v[10] <= 100, f
PY
}

# trace_live FILE: one direct read at sector 0, then succeed if the trace written to FILE shows
# anything yet. Reads before the daemon has started the stream go unseen; once one is seen,
# every later event is in it. For td_wait_for, which reads again until then.
trace_live() {
	dd if="$TD_DISK" of=/dev/null bs=4k count=1 iflag=direct status=none
	[ -s "$1" ]
}

@test "trace prints one blktrace-style line per event: the pid on Q, the tag on D and C" {
	start_tagdiskd --size 64M
	# Not through a function: $! must be tagdiskctl itself, for the SIGINT below.
	"$TAGDISKCTL" -s "$TD_SOCK" trace >"$TD_DIR/trace.txt" &
	local tpid=$! dpid
	BG_PIDS=$tpid
	td_wait_for 60 "the trace to show a read" trace_live "$TD_DIR/trace.txt"
	# The stream is live: every event of this read (sector 24) comes.
	dd if="$TD_DISK" of=/dev/null bs=4k skip=3 count=1 iflag=direct status=none &
	dpid=$!
	wait "$dpid"
	td_wait_for 60 "the C event of read $dpid" grep -qE "^ +[0-9.]+ +$dpid +C " "$TD_DIR/trace.txt"
	# Ctrl-C ends it with status 0.
	kill -INT "$tpid"
	wait "$tpid"
	BG_PIDS=
	cat "$TD_DIR/trace.txt" >&2
	local lines
	mapfile -t lines < <(grep -E "^ +[0-9]+\.[0-9]{6} +$dpid " "$TD_DIR/trace.txt")
	[ "${#lines[@]}" -eq 5 ]
	# "%10s %5d  %c  %-2s %llu + %llu [tag %s]": time, pid, action, op, sectors, tag.
	local pid5
	pid5=$(printf '%5d' "$dpid")
	[[ "${lines[0]:0:10}" =~ ^" "*[0-9]+\.[0-9]{6}$ ]]
	[ "${lines[0]:10}" = " $pid5  Q  R  24 + 8 [tag -]" ]
	[[ "${lines[1]}" =~ "  G  R  24 + 8 [tag -]"$ ]]
	[[ "${lines[2]}" =~ "  I  R  24 + 8 [tag -]"$ ]]
	[[ "${lines[3]}" =~ "  D  R  24 + 8 [tag "([0-9]+)"]"$ ]]
	local tag=${BASH_REMATCH[1]}
	[[ "${lines[4]}" == *"  C  R  24 + 8 [tag $tag]" ]]
}

@test "trace prints blkparse's letters (WF a FUA write, FN a flush), with a legend on a terminal" {
	requires blkparse script || return 0
	start_tagdiskd --size 64M
	# The printed trace on a pseudo-terminal, and blktrace records of the same events.
	script -qfec "echo \$\$ >'$TD_DIR/tty.pid'; exec '$TAGDISKCTL' -s '$TD_SOCK' trace" /dev/null \
		>"$TD_DIR/tty.txt" &
	local script_pid=$!
	"$TAGDISKCTL" -s "$TD_SOCK" trace -o "$TD_DIR/run.blktrace.0" 2>"$TD_DIR/tracer.err" &
	local tracer=$!
	BG_PIDS="$script_pid $tracer"
	td_wait_until 60 grep -q "^tagdiskctl: trace: writing" "$TD_DIR/tracer.err"
	td_wait_for 60 "the terminal's trace to show a read" trace_live "$TD_DIR/tty.txt"
	# A write through O_DSYNC (FUA) at sector 2048, then an fsync (a flush).
	dd if=/dev/zero of="$TD_DISK" bs=4k seek=256 count=1 oflag=direct,dsync conv=notrunc status=none
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY); os.fsync(fd)' "$TD_DISK"
	td_wait_for 60 "the C events of the FUA write and the flush" eval \
		'grep -q " C  WF 2048 + 8 " "$TD_DIR/tty.txt" && grep -q " C  FN 0 + 0 " "$TD_DIR/tty.txt"'
	kill -INT "$(cat "$TD_DIR/tty.pid")" "$tracer"
	wait "$tracer"
	wait "$script_pid" || true
	BG_PIDS=
	tr -d '\r' <"$TD_DIR/tty.txt" >"$TD_DIR/tty.lines"
	# The legend first, each line behind "# ".
	[ "$(head -n 1 "$TD_DIR/tty.lines")" = "# Each event: TIME (s since the first) PID ACTION RWBS SECTOR + SECTORS [tag N]" ]
	grep -qxF "# $(printf '  RWBS    as blkparse prints it: R read, W write, D discard, FN flush (no data),')" "$TD_DIR/tty.lines"
	# blkparse shows the same letters for the same events.
	blkparse -i "$TD_DIR/run" >"$TD_DIR/blkparse.out"
	grep -qE '^ *[0-9]+,[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9]+ +C +WF 2048 \+ 8 ' "$TD_DIR/blkparse.out"
	grep -qE '^ *[0-9]+,[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9]+ +C +FN ' "$TD_DIR/blkparse.out"
	# Through a pipe: events only, no legend.
	run -0 timeout 60 "$TAGDISKCTL" -s "$TD_SOCK" trace -w 0.2
	[[ "$output" != *"# "* ]]
}

@test "trace | head -5 ends as soon as head does, even when the disk goes idle" {
	start_tagdiskd --size 64M
	# A head -5 that shows its progress and only counts the lines of one read (sector 24):
	# it writes each of them through and quits after five. Everything the trace printed is
	# also in all.txt, to see when the stream is live. timeout only guards against a hang:
	# then the status is 124, not 0.
	(
		timeout 60 "$TAGDISKCTL" -s "$TD_SOCK" trace | {
			n=0
			while IFS= read -r line; do
				printf '%s\n' "$line" >>"$TD_DIR/all.txt"
				[[ "$line" == *"  R  24 + 8 ["* ]] || continue
				printf '%s\n' "$line"
				n=$((n + 1))
				[ "$n" -lt 5 ] || break
			done >"$TD_DIR/head.txt"
		}
		echo "${PIPESTATUS[*]}" >"$TD_DIR/rc"
	) &
	local pipeline=$!
	td_wait_for 60 "the trace to show a read" trace_live "$TD_DIR/all.txt"
	# One read makes exactly five events (Q G I D C), the reader's five lines; then nothing
	# happens: tagdiskctl must notice by itself that its reader is gone.
	dd if="$TD_DISK" of=/dev/null bs=4k skip=3 count=1 iflag=direct status=none
	wait "$pipeline"
	[ "$(cat "$TD_DIR/rc")" = "0 0" ]
	[ "$(wc -l <"$TD_DIR/head.txt")" -eq 5 ]
	# And head itself, under a steady stream of events (direct reads until killed).
	while dd if="$TD_DISK" of=/dev/null bs=4k count=2000 iflag=direct status=none; do
		:
	done &
	BG_PIDS=$!
	run -0 timeout 60 bash -c '"$1" -s "$2" trace | head -5' _ "$TAGDISKCTL" "$TD_SOCK"
	[ "${#lines[@]}" -eq 5 ]
}
