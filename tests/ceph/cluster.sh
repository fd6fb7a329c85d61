#!/bin/bash
# A throwaway single-machine Ceph cluster (Debian's Ceph 16 packages), for tagdisk's rbd
# tests and for trying tagdisk's rbd backend by hand. Everything lives under one directory
# the caller gives: config, keys, monitor store, OSD block files (sparse), pid files, admin
# sockets and logs. Nothing in /etc/ceph or /var/lib/ceph is read or written; the daemons
# listen on 127.0.0.1 only.
#
#   cluster.sh start DIR [--osds N] [--pool NAME] [--size N] [--timeout SECS]
#       One monitor, one manager and N (default 1) bluestore OSDs, each on a sparse 4 GiB
#       file; then pool NAME (default rbd) with SIZE replicas (default N; min_size 1 for
#       size 1 and 2, 2 for size 3), initialised for rbd. Returns once the cluster is
#       HEALTH_OK and every placement group is active+clean (deadline 180 s by default).
#       Prints where ceph.conf and the admin keyring are. On failure it prints the tail of
#       the log that matters, stops what it started and exits 1.
#   cluster.sh stop DIR                  stop every daemon started under DIR (idempotent)
#   cluster.sh pool DIR NAME [--size N] [--osd N]
#       another rbd pool; --osd N keeps all its data on osd.N alone (size 1), through a
#       CRUSH rule on a device class of its own
#   cluster.sh osd-pid DIR N             the pid of osd.N
#   cluster.sh restart-osd DIR N         start osd.N again (after a kill -9, say)
#   cluster.sh wait-clean DIR [SECS]     wait until every placement group is active+clean
#   cluster.sh env DIR                   CEPH_CONF=... and CEPH_KEYRING=... lines:
#                                        set -a; eval "$(cluster.sh env DIR)"; set +a
#   cluster.sh status DIR                ceph -s, then the daemons and their memory
#
# Then: ceph -c DIR/ceph.conf -s; rbd -c DIR/ceph.conf create --size 1G rbd/disk; and
# tagdiskd with [drive] backend = rbd and [rbd] pool = rbd, image = disk,
# conf = DIR/ceph.conf, id = admin.
#
# DIR must be on a filesystem that takes O_DIRECT (not tmpfs): bluestore opens its block
# file so. Needs ceph-mon, ceph-mgr, ceph-osd, ceph-common (ceph, ceph-authtool,
# monmaptool, rbd), uuidgen and python3. Runs as any user that can write DIR.
set -euo pipefail

OSD_BLOCK_SIZE=4G
START_TIMEOUT=180

usage() {
	sed -n '/^#   cluster.sh/,/^#$/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

# ---- the directory's layout ----------------------------------------------------------

# set_paths DIR [create]: DIR must exist, unless "create" makes it.
set_paths() {
	[ -n "${1:-}" ] || usage
	if [ "${2:-}" = create ]; then
		mkdir -p "$1"
	fi
	[ -d "$1" ] || die "no directory $1"
	DIR=$(cd "$1" && pwd)
	CONF=$DIR/ceph.conf
	ADMIN_KEYRING=$DIR/ceph.client.admin.keyring
	RUN=$DIR/run
	LOG=$DIR/log
}

# Daemon names recorded under DIR (mon.a, mgr.x, osd.0 ...), from their pid files.
recorded_daemons() {
	local f
	for f in "$RUN"/*.pid; do
		[ -e "$f" ] || continue
		f=${f##*/}
		echo "${f%.pid}"
	done
}

# daemon_pid NAME: the pid of daemon NAME when it runs (its pid file names a live process
# started with this DIR's ceph.conf); nothing and status 1 otherwise.
daemon_pid() {
	local f=$RUN/$1.pid pid
	[ -s "$f" ] || return 1
	pid=$(cat "$f")
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	[ -r "/proc/$pid/cmdline" ] || return 1
	# A reused pid belongs to another program: only ours carry this DIR's config.
	tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "$CONF" || return 1
	echo "$pid"
}

# ---- running commands ----------------------------------------------------------------

# ceph_cli ARGS: the ceph command against this cluster, bounded in time.
ceph_cli() {
	timeout 60 ceph -c "$CONF" --connect-timeout 30 "$@"
}

# daemon BINARY ARGS: start a Ceph daemon (it forks into the background once up and writes
# its pid file), with little memory; or run its --mkfs.
# What it prints before it forks (in its log too) goes to $LOG/BINARY.out, shown on failure.
daemon() {
	local out=$LOG/${1#ceph-}.out
	if ! env MALLOC_ARENA_MAX=2 TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES=33554432 \
		"$1" -c "$CONF" "${@:2}" >>"$out" 2>&1; then
		tail -n 20 "$out" >&2
		return 1
	fi
}

# log_tail NAME: the end of daemon NAME's log, to stderr.
log_tail() {
	local f=$LOG/$1.log
	[ -s "$f" ] || return 0
	echo "---- last lines of $f ----" >&2
	tail -n 30 "$f" >&2
}

# fail_start MESSAGE [DAEMON...]: say what failed, show the daemons' logs, exit 1 (the EXIT
# trap stops the cluster).
fail_start() {
	local msg=$1 d
	shift
	echo "cluster.sh: $msg" >&2
	for d in "$@"; do
		log_tail "$d"
	done
	exit 1
}

# An EXIT trap while starting: a start that fails leaves nothing running.
stop_on_failure() {
	local rc=$?
	if [ "$rc" -ne 0 ]; then
		do_stop "$DIR" >/dev/null 2>&1 || true
	fi
	return "$rc"
}

free_port() {
	python3 -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
'
}

# ---- waiting -------------------------------------------------------------------------

# pgs_clean: every placement group of every pool exists and is active+clean.
pgs_clean() {
	local stat dump
	stat=$(ceph_cli pg stat --format json 2>/dev/null) || return 1
	dump=$(ceph_cli osd dump --format json 2>/dev/null) || return 1
	python3 -c '
import json, sys
stat, dump = json.loads(sys.argv[1]), json.loads(sys.argv[2])
stat = stat.get("pg_summary", stat)
want = sum(p["pg_num"] for p in dump["pools"])
states = {s["name"]: s["num"] for s in stat.get("num_pg_by_state", [])}
clean = states.get("active+clean", 0)
sys.exit(0 if stat.get("num_pgs") == want == clean else 1)
' "$stat" "$dump"
}

health_ok() {
	[ "$(ceph_cli health 2>/dev/null)" = HEALTH_OK ]
}

# clean: both at once (HEALTH_OK comes before the placement groups are clean, and the
# monitor's view of the placement groups lags the manager's).
clean() {
	pgs_clean && health_ok
}

# wait_for SECS WHAT CMD...: poll CMD every half second; fail after SECS seconds.
wait_for() {
	local end=$((SECONDS + $1)) what=$2
	shift 2
	until "$@"; do
		if [ "$SECONDS" -ge "$end" ]; then
			echo "cluster.sh: timed out waiting for $what" >&2
			return 1
		fi
		sleep 0.5
	done
}

# osds_up N: N OSDs are up and in.
osds_up() {
	ceph_cli osd stat --format json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
s = s.get("osdmap", s)
n = int(sys.argv[1])
sys.exit(0 if s["num_up_osds"] == s["num_in_osds"] == n else 1)
' "$1"
}

# ---- start ---------------------------------------------------------------------------

write_conf() { # fsid port osds size min_size
	cat >"$CONF" <<EOF
# Made by tests/ceph/cluster.sh: a single-machine test cluster, loopback only.
[global]
fsid = $1
mon host = [v2:127.0.0.1:$2]
mon initial members = a
public addr = 127.0.0.1
public network = 127.0.0.0/8
ms bind ipv4 = true
ms bind ipv6 = false
ms bind msgr1 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
run dir = $RUN
admin socket = $RUN/\$name.asok
pid file = $RUN/\$name.pid
log file = $LOG/\$name.log
crash dir = $DIR/crash
mon data = $DIR/\$name
mgr data = $DIR/\$name
osd data = $DIR/\$name
mon cluster log file = $LOG/cluster.log
# One machine: OSDs are the failure domain, one reporter is enough.
osd crush chooseleaf type = 0
mon osd reporter subtree level = osd
mon osd min down reporters = 1
osd heartbeat interval = 1
osd heartbeat grace = 4
osd pool default size = $4
osd pool default min size = $5
osd pool default pg autoscale mode = off
mon allow pool delete = true
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
mgr initial modules =
# Placement group states reach the manager and the monitor within a second.
mgr stats period = 1
mgr tick period = 1
mon mgr digest period = 1
osd mon report interval = 1

[client]
keyring = $ADMIN_KEYRING
# Several clients at once (tagdiskd, rbd, ceph): one admin socket each.
admin socket = $RUN/\$name.\$pid.asok

[mon]
keyring = $DIR/\$name/keyring

[mgr]
keyring = $DIR/\$name/keyring

[osd]
keyring = $DIR/\$name/keyring
osd objectstore = bluestore
bluestore block create = true
bluestore block size = $OSD_BLOCK_SIZE
bluestore cache autotune = false
bluestore cache size = 128M
# The smallest memory target Ceph accepts (896 MiB); with autotune off the cache stays 128M.
osd memory target = 939524096
osd recovery sleep = 0
osd recovery sleep hdd = 0
osd recovery sleep ssd = 0
osd recovery sleep hybrid = 0
bluestore fsck on mkfs = false
# A client killed with SIGKILL keeps its watch on an rbd image's header, and with it the
# image's exclusive lock, this long: the next client waits this long to break the lock.
osd client watch timeout = 10
# Closing the block file waits for a poll of the aio thread: 250 ms, a dozen times in a start.
bdev aio poll ms = 20
EOF
}

start_mon() {
	local fsid=$1 port=$2
	ceph-authtool "$DIR/mon.keyring" --create-keyring --gen-key -n mon. --cap mon 'allow *' >/dev/null
	ceph-authtool "$ADMIN_KEYRING" --create-keyring --gen-key -n client.admin \
		--cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
	ceph-authtool "$DIR/mon.keyring" --import-keyring "$ADMIN_KEYRING" >/dev/null
	monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$port]" "$DIR/monmap" >/dev/null
	mkdir -p "$DIR/mon.a"
	daemon ceph-mon --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/mon.keyring" ||
		fail_start "ceph-mon --mkfs failed" mon.a
	daemon ceph-mon -i a || fail_start "ceph-mon did not start" mon.a
	wait_for 60 "the monitor to answer" ceph_cli mon stat >/dev/null ||
		fail_start "the monitor does not answer" mon.a
}

start_mgr() {
	mkdir -p "$DIR/mgr.x"
	ceph_cli auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
		-o "$DIR/mgr.x/keyring" || fail_start "cannot make the manager's key" mon.a
	daemon ceph-mgr -i x || fail_start "ceph-mgr did not start" mgr.x
}

# add_osds N: create N OSDs (ids 0 to N-1, given by the monitor), make their stores and
# start them; the slow parts run side by side.
add_osds() {
	local n=$1 i id uuid secret pids=() failed=()
	for ((i = 0; i < n; i++)); do
		uuid=$(uuidgen)
		secret=$(ceph-authtool --gen-print-key)
		id=$(echo "{\"cephx_secret\": \"$secret\"}" | ceph_cli osd new "$uuid" -i -) ||
			fail_start "ceph osd new failed" mon.a
		[ "$id" = "$i" ] || fail_start "the monitor gave id $id to the OSD expected as osd.$i"
		mkdir -p "$DIR/osd.$id"
		echo "$uuid" >"$DIR/osd.$id/uuid"
		ceph-authtool "$DIR/osd.$id/keyring" --create-keyring -n "osd.$id" --add-key "$secret" >/dev/null
	done
	for ((i = 0; i < n; i++)); do
		daemon ceph-osd -i "$i" --mkfs --osd-uuid "$(cat "$DIR/osd.$i/uuid")" &
		pids+=($!)
	done
	for ((i = 0; i < n; i++)); do
		wait "${pids[i]}" || failed+=("osd.$i")
	done
	[ ${#failed[@]} -eq 0 ] || fail_start "ceph-osd --mkfs failed: ${failed[*]}" "${failed[@]}"
	pids=()
	for ((i = 0; i < n; i++)); do
		daemon ceph-osd -i "$i" &
		pids+=($!)
	done
	for ((i = 0; i < n; i++)); do
		wait "${pids[i]}" || failed+=("osd.$i")
	done
	[ ${#failed[@]} -eq 0 ] || fail_start "OSDs did not start: ${failed[*]}" "${failed[@]}"
}

# create_pool NAME SIZE [RULE]: prints what failed, if anything.
create_pool() {
	local name=$1 size=$2 rule=${3:-} min out
	min=$((size - size / 2))
	out=$(ceph_cli osd pool create "$name" 32 32 replicated ${rule:+"$rule"} 2>&1 &&
		ceph_cli osd pool set "$name" size "$size" --yes-i-really-mean-it 2>&1 &&
		ceph_cli osd pool set "$name" min_size "$min" 2>&1 &&
		timeout 60 rbd -c "$CONF" pool init "$name" 2>&1) || { echo "$out" >&2; return 1; }
}

do_start() {
	local osds=1 pool=rbd size='' timeout=$START_TIMEOUT fsid port i t0 osdnames=()
	set_paths "${1:-}" create
	shift
	while [ $# -gt 0 ]; do
		case "$1" in
		--osds) osds=${2:?}; shift 2 ;;
		--pool) pool=${2:?}; shift 2 ;;
		--size) size=${2:?}; shift 2 ;;
		--timeout) timeout=${2:?}; shift 2 ;;
		*) usage ;;
		esac
	done
	[[ "$osds" =~ ^[1-9]$ ]] || die "--osds: 1 to 9, not '$osds'"
	size=${size:-$osds}
	if ! [[ "$size" =~ ^[1-9]$ ]] || [ "$size" -gt "$osds" ]; then
		die "--size: 1 to the number of OSDs, not '$size'"
	fi
	[ ! -e "$CONF" ] || die "$DIR already holds a cluster (cluster.sh stop $DIR; then remove it)"
	[ "$(stat -f -c %T "$DIR")" != tmpfs ] ||
		die "$DIR is on tmpfs, where bluestore cannot open its block files (O_DIRECT): use a disk-backed directory such as /var/tmp"
	for t in ceph ceph-mon ceph-mgr ceph-osd ceph-authtool monmaptool rbd uuidgen python3; do
		command -v "$t" >/dev/null || die "$t is not installed"
	done
	t0=$SECONDS
	# Whatever fails from here on (set -e included) stops what was started.
	trap stop_on_failure EXIT
	mkdir -p "$RUN" "$LOG" "$DIR/crash"
	fsid=$(uuidgen)
	port=$(free_port)
	write_conf "$fsid" "$port" "$osds" "$size" $((size - size / 2))
	start_mon "$fsid" "$port"
	start_mgr
	add_osds "$osds"
	for ((i = 0; i < osds; i++)); do
		osdnames+=("osd.$i")
	done
	wait_for "$timeout" "$osds OSDs up" osds_up "$osds" ||
		fail_start "the OSDs did not come up" mon.a "${osdnames[@]}"
	create_pool "$pool" "$size" || fail_start "cannot create pool $pool" mon.a mgr.x
	wait_for "$timeout" "HEALTH_OK and every placement group active+clean" clean ||
		{ ceph_cli health detail >&2 || true; ceph_cli pg stat >&2 || true;
			fail_start "the cluster did not become clean" mon.a mgr.x "${osdnames[@]}"; }
	echo "cluster up in $((SECONDS - t0)) s: $osds OSD(s), pool $pool (size $size)"
	echo "config:  $CONF"
	echo "keyring: $ADMIN_KEYRING"
	echo "try:     ceph -c $CONF -s; rbd -c $CONF ls $pool"
}

# ---- other commands ------------------------------------------------------------------

do_stop() {
	local d pid pids=() end
	# Nothing there, nothing to stop.
	[ -n "${1:-}" ] || usage
	[ -d "$1" ] || return 0
	set_paths "$1"
	[ -d "$RUN" ] || return 0
	for d in $(recorded_daemons); do
		pid=$(daemon_pid "$d") || continue
		kill -TERM "$pid" 2>/dev/null || true
		pids+=("$pid")
	done
	end=$((SECONDS + 30))
	for pid in "${pids[@]}"; do
		while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
	# After a KILL the process is gone once /proc says so.
	for pid in "${pids[@]}"; do
		while [ -e "/proc/$pid" ] && [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
			sleep 0.1
		done
	done
	echo "stopped ${#pids[@]} daemon(s)"
}

do_pool() {
	local name size=1 osd='' rule=
	set_paths "${1:-}"
	name=${2:?pool name}
	shift 2
	while [ $# -gt 0 ]; do
		case "$1" in
		--size) size=${2:?}; shift 2 ;;
		--osd) osd=${2:?}; shift 2 ;;
		*) usage ;;
		esac
	done
	if [ -n "$osd" ]; then
		[ "$size" -eq 1 ] || die "--osd: the pool has one replica (--size 1)"
		# A device class of its own for osd.N, and a rule that takes only that class.
		rule=only$osd
		out=$(ceph_cli osd crush rm-device-class "osd.$osd" 2>&1 &&
			ceph_cli osd crush set-device-class "$rule" "osd.$osd" 2>&1 &&
			ceph_cli osd crush rule create-replicated "$rule" default osd "$rule" 2>&1) ||
			die "cannot make a CRUSH rule for osd.$osd alone: $out"
	fi
	create_pool "$name" "$size" "$rule"
	wait_for "$START_TIMEOUT" "every placement group active+clean" pgs_clean
}

do_restart_osd() {
	local id=${2:?osd id}
	set_paths "${1:-}"
	[ -d "$DIR/osd.$id" ] || die "no osd.$id under $DIR"
	! daemon_pid "osd.$id" >/dev/null || die "osd.$id is running"
	daemon ceph-osd -i "$id" || { log_tail "osd.$id"; die "osd.$id did not start"; }
}

do_status() {
	local d pid
	set_paths "${1:-}"
	ceph_cli -s || true
	for d in $(recorded_daemons); do
		if pid=$(daemon_pid "$d"); then
			echo "$d: pid $pid, rss $(awk '/^VmRSS/ {print $2, $3}' "/proc/$pid/status")"
		else
			echo "$d: not running"
		fi
	done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
start) do_start "$@" ;;
stop) do_stop "$@" ;;
pool) do_pool "$@" ;;
osd-pid)
	set_paths "${1:-}"
	daemon_pid "osd.${2:?osd id}" || die "osd.$2 is not running"
	;;
restart-osd) do_restart_osd "$@" ;;
wait-clean)
	set_paths "${1:-}"
	wait_for "${2:-$START_TIMEOUT}" "every placement group active+clean" pgs_clean
	;;
env)
	set_paths "${1:-}"
	printf 'CEPH_CONF=%q\nCEPH_KEYRING=%q\n' "$CONF" "$ADMIN_KEYRING"
	;;
status) do_status "$@" ;;
*) usage ;;
esac
