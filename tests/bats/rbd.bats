#!/usr/bin/env bats
# The rbd backend against a real Ceph cluster: ext4 over a loop device, fio verify
# under resets, an OSD killed and one frozen under load, tagdiskd killed during
# fsyncs, and the image's exclusive lock refusing a second daemon.
#
# Needs: root, /dev/fuse, tagdiskd built with librbd, Ceph 16 (ceph-mon, ceph-mgr,
# ceph-osd, ceph-common: tests/deps.sh installs them), fio, losetup, mkfs.ext4, e2fsck,
# python3, about 2 GiB of memory and a disk-backed directory (not tmpfs; bluestore opens
# its block files with O_DIRECT): TD_CEPH_DIR, else a new directory in /var/tmp.
#
# setup_file starts one cluster (tests/ceph/cluster.sh, about 20 s): 3 OSDs; pool rbd3 with
# 3 replicas, and pool rbd1 with 1 replica kept on osd.0 alone (a CRUSH rule on a device class
# of its own), whose only OSD can be frozen. teardown_file stops it and removes its directory.
# Ceph missing or not starting skips every test with one line starting "Ceph:"; with CI=true
# the runner counts that skip as a failure. Classic FUSE transport only; about 3 minutes.

load helpers
bats_require_minimum_version 1.5.0

CLUSTER=$BATS_TEST_DIRNAME/../ceph/cluster.sh

setup_file() {
	requires_fuse || return 0
	requires_backend rbd || return 0
	requires fio losetup mkfs.ext4 e2fsck python3 || return 0
	local t
	for t in ceph ceph-mon ceph-mgr ceph-osd ceph-authtool monmaptool rbd; do
		command -v "$t" >/dev/null || { td_skip_file "Ceph: $t is not installed (tests/deps.sh)"; return 0; }
	done
	if [ -n "${TD_CEPH_DIR:-}" ]; then
		TD_CEPH=$TD_CEPH_DIR
		[ ! -e "$TD_CEPH/ceph.conf" ] || { td_skip_file "Ceph: $TD_CEPH already holds a cluster"; return 0; }
	else
		TD_CEPH=$(mktemp -d /var/tmp/tagdisk-ceph.XXXXXX)
	fi
	export TD_CEPH
	if ! "$CLUSTER" start "$TD_CEPH" --osds 3 --pool rbd3 >"$BATS_FILE_TMPDIR/cluster.log" 2>&1 ||
		! "$CLUSTER" pool "$TD_CEPH" rbd1 --osd 0 >>"$BATS_FILE_TMPDIR/cluster.log" 2>&1; then
		# The whole story for whoever reads the run's output; one line for the skip.
		sed 's/^/# /' "$BATS_FILE_TMPDIR/cluster.log" >&3
		td_skip_file "Ceph: the test cluster did not start: $(grep 'cluster.sh:' "$BATS_FILE_TMPDIR/cluster.log" | tail -1)"
		return 0
	fi
	echo "# $(grep '^cluster up' "$BATS_FILE_TMPDIR/cluster.log")" >&3
}

teardown_file() {
	[ -n "${TD_CEPH:-}" ] || return 0
	"$CLUSTER" stop "$TD_CEPH" >/dev/null || true
	[ -n "${TD_CEPH_DIR:-}" ] || rm -rf "$TD_CEPH"
}

setup() {
	td_setup_dir
	# With backend = rbd the image is in Ceph: start_tagdiskd passes no --image.
	TD_IMG=
	CEPH=(ceph -c "$TD_CEPH/ceph.conf")
	RBD=(rbd -c "$TD_CEPH/ceph.conf")
	BG_PIDS=
	FROZEN_OSD=
	FROZEN_POOL_OSD=
	KILLED_OSD=
}

teardown() {
	[ -z "$BG_PIDS" ] || kill $BG_PIDS 2>/dev/null || true
	# A test that failed half-way leaves the cluster whole for the next one.
	[ -z "$FROZEN_OSD" ] || kill -CONT "$FROZEN_OSD" 2>/dev/null || true
	# Placement groups left laggy by a freeze (see unwedge_osd) would hang every later test.
	if [ -n "$FROZEN_POOL_OSD" ] && "${CEPH[@]}" pg ls laggy 2>/dev/null | grep -q laggy; then
		"${CEPH[@]}" osd down "$FROZEN_POOL_OSD" >/dev/null 2>&1 || true
	fi
	if [ -n "$KILLED_OSD" ] && ! "$CLUSTER" osd-pid "$TD_CEPH" "$KILLED_OSD" >/dev/null 2>&1; then
		"$CLUSTER" restart-osd "$TD_CEPH" "$KILLED_OSD" || true
	fi
	td_teardown
}

# rbd_ini POOL IMAGE [DRIVE_KEY=VALUE...]: the daemon's config, $TD_DIR/rbd.ini.
rbd_ini() {
	local kv
	{
		echo "[drive]"
		echo "backend = rbd"
		for kv in "${@:3}"; do
			echo "${kv%%=*} = ${kv#*=}"
		done
		echo "[rbd]"
		echo "pool = $1"
		echo "image = $2"
		echo "conf = $TD_CEPH/ceph.conf"
		echo "id = admin"
	} >"$TD_DIR/rbd.ini"
}

# start_rbd POOL IMAGE [DRIVE_KEY=VALUE...] [-- TAGDISKD_OPTIONS...]: start tagdiskd on
# rbd image POOL/IMAGE, creating it with 256 MiB unless the options give --size.
start_rbd() {
	local pool=$1 image=$2 kv=() opts=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		kv+=("$1")
		shift
	done
	[ $# -eq 0 ] || shift
	opts=("$@")
	[[ " ${opts[*]} " == *" --size "* ]] || opts+=(--size 256M)
	rbd_ini "$pool" "$image" "${kv[@]}"
	start_tagdiskd -c "$TD_DIR/rbd.ini" --mode rq "${opts[@]}"
	[ "$(td_status backend)" = rbd ]
}

# fio_verify NAME SIZE [FIO_OPTIONS...]: 4 KiB random writes at QD 32 over SIZE of the disk
# file, each block once, each read back and checked (crc32c); a mismatch stops fio with an
# error. JSON in $TD_DIR/NAME.json.
fio_verify() {
	local name=$1 size=$2
	shift 2
	(cd "$TD_DIR" && exec timeout 900 fio --name="$name" --filename="$TD_DISK" --rw=randwrite \
		--bs=4k --iodepth=32 --ioengine=libaio --direct=1 --size="$size" \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --verify_backlog=1024 \
		--verify_state_save=0 --randrepeat=0 --output-format=json \
		--output="$TD_DIR/$name.json" "$@")
}

# fio_check NAME BLOCKS: no error, BLOCKS writes, as many verifying reads. Prints the counts
# and the longest write and read latencies (the longest pause an I/O saw).
fio_check() {
	python3 - "$TD_DIR/$1.json" "$2" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
j = json.loads(text[text.index("{"):])["jobs"][0]
w, r, want = j["write"]["total_ios"], j["read"]["total_ios"], int(sys.argv[2])
print("# fio %s: %d writes, %d verified, error %d, longest write %.2f s, longest read %.2f s"
      % (j["jobname"], w, r, j["error"], j["write"]["lat_ns"]["max"] / 1e9,
         j["read"]["lat_ns"]["max"] / 1e9))
assert j["error"] == 0, j["error"]
assert w == want, (w, want)
assert r == w, (w, r)
PY
}

# ios: reads + writes the daemon has completed.
ios() {
	echo $(($(td_stats reads) + $(td_stats writes)))
}

# unwedge_osd OSD: after OSD resumed from SIGSTOP, wait up to 20 s for the daemon's I/O to
# move on; if it has not and placement groups are "laggy", mark OSD down. Ceph 16 leaves
# the placement groups of a one-OSD pool laggy for good when their OSD was stopped past
# its read lease (0.8 x osd heartbeat grace: 3.2 s here, which a busy machine can stretch
# a short freeze to): their operations wait for a lease nothing renews, and every client
# hangs, rbd's own tools included. Marked down, the OSD re-peers and serves again.
unwedge_osd() {
	local osd=$1 before deadline
	before=$(ios)
	deadline=$((SECONDS + 20))
	while [ "$SECONDS" -lt "$deadline" ]; do
		[ "$(ios)" -ge $((before + 100)) ] && return 0
		kill -0 "$BG_PIDS" 2>/dev/null || return 0
		sleep 0.5
	done
	"${CEPH[@]}" pg ls laggy 2>/dev/null | grep -q laggy || return 0
	echo "# osd.$osd resumed with laggy placement groups and no I/O for 20 s: marked down to re-peer" >&3
	"${CEPH[@]}" osd down "$osd" >/dev/null 2>&1
}

# pgs_clean_now: every placement group active+clean (one look, for td_wait_for).
pgs_clean_now() {
	"$CLUSTER" wait-clean "$TD_CEPH" 0 2>/dev/null
}

@test "rbd: the backend's own unit cases against the cluster, none skipped" {
	# make check's unit stage leaves test_backend_rbd out (it needs a cluster): it runs here.
	[ -x "$TD_BUILD/tests/test_backend_rbd" ] || skip "test_backend_rbd is not built (make unit-tests)"
	run env TD_CEPH_CONF="$TD_CEPH/ceph.conf" TD_CEPH_POOL=rbd3 "$TD_BUILD/tests/test_backend_rbd"
	echo "$output" | grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\]' | sed 's/^/# /' >&3
	assert_success
	refute_output --partial SKIPPED
	assert_output --regexp 'PASSED +\] [1-9][0-9]* test'
}

@test "rbd: ext4 on a loop device; fsck clean, files intact, rbd export equals the disk file" {
	local dev fs=$TD_DIR/fs i
	start_rbd rbd3 ext4 -- --size 256M
	[ "$(td_status backend_target)" = rbd:rbd3/ext4 ]
	[ "$(td_status size)" -eq $((256 * 1024 * 1024)) ]
	[ "$("${RBD[@]}" info rbd3/ext4 --format json | td_json size)" -eq $((256 * 1024 * 1024)) ]
	dev=$(td_losetup --direct-io=on)
	mkfs.ext4 -q -F "$dev"
	mkdir "$fs"
	mount "$dev" "$fs"
	for i in $(seq 1 20); do
		head -c $((i * 256 * 1024 + i * 4099)) /dev/urandom >"$fs/f$i"
	done
	cp -a /usr/include/linux "$fs/linux"
	(cd "$fs" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$TD_DIR/sums"
	umount "$fs"
	# Again from the disk, not the page cache.
	mount "$dev" "$fs"
	(cd "$fs" && sha256sum --quiet -c "$TD_DIR/sums")
	umount "$fs"
	run e2fsck -fn "$dev"
	echo "$output" >&2
	[ "$status" -eq 0 ]
	losetup -d "$dev"
	dd if="$TD_DISK" of="$TD_DIR/through-tagdisk" bs=1M iflag=direct status=none
	stop_tagdiskd
	# The image itself, read by another client after the daemon flushed and closed it.
	"${RBD[@]}" export --no-progress rbd3/ext4 "$TD_DIR/exported"
	cmp "$TD_DIR/through-tagdisk" "$TD_DIR/exported"
	[ "$(stat -c %s "$TD_DIR/exported")" -eq $((256 * 1024 * 1024)) ]
}

@test "rbd: fio verify at QD 32 with a reset every 100-200 ms: no error, the counters add up" {
	start_rbd rbd1 resets -- --size 256M
	: >"$TD_DIR/resets.log"
	reset_loop &
	BG_PIDS=$!
	fio_verify resets 64M
	touch "$TD_DIR/stop"
	wait "$BG_PIDS"
	BG_PIDS=
	fio_check resets 16384 >&3

	run grep -v '^reset: [0-9]* requests requeued$' "$TD_DIR/resets.log"
	[ "$status" -eq 1 ]
	local nr_resets requeued
	nr_resets=$(wc -l <"$TD_DIR/resets.log")
	requeued=$(awk '{ n += $2 } END { print n + 0 }' "$TD_DIR/resets.log")
	echo "# $nr_resets resets requeued $requeued requests" >&3
	[ "$nr_resets" -gt 0 ]
	td_admin stats >"$TD_DIR/stats.json"
	python3 - "$TD_DIR/stats.json" "$nr_resets" "$requeued" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
nr_resets, requeued = int(sys.argv[2]), int(sys.argv[3])
assert d["resets"] == nr_resets, (d["resets"], nr_resets)
assert d["requeued"] == requeued, (d["requeued"], requeued)
assert (d["errors"], d["timeouts"], d["killed"], d["retries_exhausted"]) == (0, 0, 0, 0), d
assert d["in_flight"] == 0, d
PY
	stop_tagdiskd
}

@test "rbd: kill -9 one OSD of three under fio verify; I/O goes on, no error; it recovers" {
	local osd=2 pid before t_kill t_up t_clean rc
	start_rbd rbd3 osdkill -- --size 256M
	fio_verify osdkill 64M &
	BG_PIDS=$!
	td_wait_for 120 "fio under way (2000 I/Os)" eval '[ "$(ios)" -ge 2000 ]' >/dev/null

	pid=$("$CLUSTER" osd-pid "$TD_CEPH" "$osd")
	KILLED_OSD=$osd
	kill -KILL "$pid"
	t_kill=$EPOCHREALTIME
	before=$(ios)
	td_wait_for 120 "osd.$osd marked down" \
		eval '"${CEPH[@]}" osd dump | grep -q "^osd\.$osd down"' >/dev/null
	# I/O goes on through the other two replicas while osd.$osd is down (or fio is done).
	td_wait_for 120 "2000 more I/Os with osd.$osd down" \
		eval '[ "$(ios)" -ge $((before + 2000)) ] || ! kill -0 "$BG_PIDS"' >/dev/null
	"${CEPH[@]}" osd dump | grep -q "^osd\.$osd down"

	rc=0
	wait "$BG_PIDS" || rc=$?
	BG_PIDS=
	[ "$rc" -eq 0 ]
	fio_check osdkill 16384 >&3
	[ "$(td_stats errors)" -eq 0 ]

	"$CLUSTER" restart-osd "$TD_CEPH" "$osd"
	t_up=$EPOCHREALTIME
	KILLED_OSD=
	td_wait_for 300 "recovery: every placement group active+clean" pgs_clean_now >/dev/null
	t_clean=$EPOCHREALTIME
	echo "# osd.$osd killed: recovery after its restart took $(python3 -c \
		"print('%.1f' % ($t_clean - $t_up))") s (killed $(python3 -c \
		"print('%.1f' % ($t_up - $t_kill))") s before)" >&3
	stop_tagdiskd
}

@test "rbd: the only OSD of a pool frozen past command_timeout_ms: timeouts, requeues, then every request completes" {
	local pid rc
	start_rbd rbd1 frozen command_timeout_ms=1000 max_retries=90 -- --size 256M
	[ "$(td_status command_timeout_ms)" -eq 1000 ]
	fio_verify frozen 64M &
	BG_PIDS=$!
	td_wait_for 120 "fio under way (500 I/Os)" eval '[ "$(ios)" -ge 500 ]' >/dev/null

	pid=$("$CLUSTER" osd-pid "$TD_CEPH" 0)
	kill -STOP "$pid"
	FROZEN_OSD=$pid
	FROZEN_POOL_OSD=0
	# Frozen until the drive has timed a command out (it was outstanding for longer than
	# command_timeout_ms) and reset.
	td_wait_for 120 "a command timeout" eval '[ "$(td_stats timeouts)" -ge 1 ]' >/dev/null
	[ "$(td_stats errors)" -eq 0 ]
	kill -CONT "$pid"
	FROZEN_OSD=
	unwedge_osd 0

	rc=0
	wait "$BG_PIDS" || rc=$?
	BG_PIDS=
	[ "$rc" -eq 0 ]
	fio_check frozen 16384 >&3
	td_admin stats >"$TD_DIR/stats.json"
	python3 - "$TD_DIR/stats.json" <<'PY' >&3
import json, sys
d = json.load(open(sys.argv[1]))
print("# osd.0 frozen: %d timeouts, %d resets, %d requeued, %d errors"
      % (d["timeouts"], d["resets"], d["requeued"], d["errors"]))
assert d["timeouts"] >= 1, d
assert d["resets"] >= 1 and d["requeued"] >= 1, d
assert (d["errors"], d["killed"], d["retries_exhausted"]) == (0, 0, 0), d
assert d["in_flight"] == 0, d
PY
	stop_tagdiskd
}

NREC=65536     # 4 KiB records: the whole 256 MiB image
FSYNC_EVERY=8
NTHREADS=4

# Writers: thread t writes records t, t + NTHREADS, ...; record i at i * 4096 holds its
# number and bytes derived from it. After each of its fsyncs returns, a thread prints "t i":
# i is the last record it wrote before that fsync.
WRITER_PY='
import hashlib, os, struct, sys, threading
disk, nrec, every, nthreads = sys.argv[1], *map(int, sys.argv[2:5])
out = threading.Lock()

def record(i):
    head = struct.pack("<8sQ", b"TDRBDREC", i)
    seed = hashlib.sha256(head).digest()
    return head + (seed * (4096 // len(seed) + 1))[:4096 - len(head)]

failed = []

def writer(t):
    try:
        fd = os.open(disk, os.O_RDWR)
        for n, i in enumerate(range(t, nrec, nthreads)):
            os.pwrite(fd, record(i), i * 4096)
            if (n + 1) % every == 0:
                os.fsync(fd)
                with out:
                    print(t, i, flush=True)
    except OSError as e:
        failed.append(e)

threads = [threading.Thread(target=writer, args=(t,), daemon=True) for t in range(nthreads)]
for th in threads:
    th.start()
for th in threads:
    th.join()
if failed:
    print(failed[0], file=sys.stderr)
    sys.exit(1)
'

# Check FILE: for each thread, every record up to the last one it saw fsynced.
CHECK_PY='
import hashlib, os, struct, sys
path, nthreads, acked = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def record(i):
    head = struct.pack("<8sQ", b"TDRBDREC", i)
    seed = hashlib.sha256(head).digest()
    return head + (seed * (4096 // len(seed) + 1))[:4096 - len(head)]

last = {}
for line in open(acked):
    t, i = map(int, line.split())
    last[t] = max(last.get(t, -1), i)
assert len(last) == nthreads, last
fd = os.open(path, os.O_RDONLY)
total = 0
for t, lt in sorted(last.items()):
    idx = range(t, lt + 1, nthreads)
    bad = [i for i in idx if os.pread(fd, 4096, i * 4096) != record(i)]
    assert not bad, "thread %d: %d of %d fsynced records lost or damaged, first %d" % (
        t, len(bad), len(idx), bad[0])
    total += len(idx)
print("# %s: %d fsynced records of %d threads intact" % (path, total, nthreads))
'

@test "rbd: kill -9 tagdiskd during fsyncs: every fsynced record is in the image; a restart breaks the dead lock" {
	local rc dead t0
	start_rbd rbd1 crash -- --size 256M
	dead=$("${RBD[@]}" lock ls rbd1/crash --format json | td_json 0 address)
	: >"$TD_DIR/acked"
	python3 -c "$WRITER_PY" "$TD_DISK" "$NREC" "$FSYNC_EVERY" "$NTHREADS" \
		>"$TD_DIR/acked" 2>"$TD_DIR/writer.err" &
	WRITER=$!
	BG_PIDS=$WRITER
	td_wait_for 120 "100 fsyncs acknowledged (or the writer's end)" \
		eval '[ "$(wc -l <"$TD_DIR/acked")" -ge 100 ] || ! kill -0 "$WRITER"' >/dev/null
	[ "$(wc -l <"$TD_DIR/acked")" -ge 100 ] || { cat "$TD_DIR/writer.err" >&2; false; }
	td_kill9
	rc=0
	wait "$WRITER" || rc=$?
	BG_PIDS=
	# The crash hit the writers mid-run.
	[ "$rc" -ne 0 ]
	[ "$(wc -l <"$TD_DIR/acked")" -lt $((NREC / FSYNC_EVERY)) ]

	# What Ceph has, read by another client while the dead one still holds the lock.
	"${RBD[@]}" export --no-progress rbd1/crash "$TD_DIR/exported"
	python3 -c "$CHECK_PY" "$TD_DIR/exported" "$NTHREADS" "$TD_DIR/acked" >&3

	# A new daemon gets the lock once the dead client's watch has expired (osd client watch
	# timeout): librbd blocklists the dead client and breaks its lock. Until then it is
	# refused (exit 2).
	t0=$EPOCHSECONDS
	td_wait_for 180 "a restarted tagdiskd to get the lock" start_tagdiskd -c "$TD_DIR/rbd.ini" \
		--mode rq >/dev/null
	echo "# the restart got the lock after $((EPOCHSECONDS - t0)) s" >&3
	"${CEPH[@]}" osd blocklist ls 2>/dev/null | grep -F "$dead "
	python3 -c "$CHECK_PY" "$TD_DISK" "$NTHREADS" "$TD_DIR/acked" >&3
	stop_tagdiskd
}

@test "rbd: a second tagdiskd on the same image is refused with status 2, naming the holder" {
	local holder
	start_rbd rbd1 lock -- --size 256M
	holder=$("${RBD[@]}" lock ls rbd1/lock --format json | td_json 0 locker)
	[[ "$holder" == client.* ]]
	mkdir "$TD_DIR/mnt2"
	run_tagdiskd -c "$TD_DIR/rbd.ini" --mount "$TD_DIR/mnt2" --socket "$TD_DIR/admin2.sock"
	echo "status $status; stderr: $stderr" >&2
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"$holder"* ]]
	[[ "$stderr" == *rbd1/lock* ]]
	td_not_mounted "$TD_DIR/mnt2"
	[ ! -e "$TD_DIR/admin2.sock" ]
	# The first one serves on, still holding the lock.
	[ "$(td_status state)" = running ]
	[ "$("${RBD[@]}" lock ls rbd1/lock --format json | td_json 0 locker)" = "$holder" ]
	dd if=/dev/urandom of="$TD_DIR/block" bs=4k count=1 status=none
	dd if="$TD_DIR/block" of="$TD_DISK" bs=4k seek=10 oflag=direct conv=notrunc,fsync status=none
	stop_tagdiskd
	"${RBD[@]}" export --no-progress rbd1/lock "$TD_DIR/exported"
	cmp -n 4096 "$TD_DIR/block" <(dd if="$TD_DIR/exported" bs=4k skip=10 count=1 status=none)
}

@test "rbd: the mount outlives the daemon: a restart passes the lock at once; after kill -9 the successor gets it" {
	local t0 waited
	rbd_ini rbd1 takeover
	td_harness_start -c "$TD_DIR/rbd.ini" --mode rq --size 256M
	[ "$(td_status backend)" = rbd ]
	dd if=/dev/urandom of="$TD_DIR/block" bs=64k count=1 status=none
	dd if="$TD_DIR/block" of="$TD_DISK" bs=64k seek=1000 oflag=direct conv=notrunc,fsync status=none
	# A restart in place releases the lock on its way out: the new image gets it at once.
	run td_ctl restart
	echo "$output" >&2
	[ "$status" -eq 0 ]
	[[ "$output" == *", 0 requests resent"* ]]
	! grep -q 'waiting (up to' "$TD_LOG"
	# A crash cannot release it: the successor waits until the cluster does (the dead
	# client's watch times out), then serves the same mount; fio verify runs through it.
	fio_verify crash 32M &
	local fio=$!
	BG_PIDS=$fio
	td_wait_until 120 test -s "$TD_DIR/crash.json" -o -n "$(td_stats writes 2>/dev/null)"
	t0=$EPOCHSECONDS
	td_harness_kill9 >/dev/null
	waited=$((EPOCHSECONDS - t0))
	# librbd's lock acquisition waits for the dead client's watch to time out (30 s at
	# most), then breaks the lock, blocklisting the dead client.
	echo "# after kill -9 the successor served again after $waited s (the RBD lock's release)" >&3
	wait "$fio"
	BG_PIDS=
	fio_check crash $((32 * 1024 * 1024 / 4096))
	cmp "$TD_DIR/block" <(dd if="$TD_DISK" bs=64k skip=1000 count=1 iflag=direct status=none)
	[ "$(grep -c 'took over' "$TD_LOG")" -eq 2 ]
}
