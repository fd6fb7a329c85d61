#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""tagdisk admin socket under load: many clients asking status/stats/tags while fio reads.

    tests/stress/admin_load.py [--seconds N] [--clients C] [--rounds R]

tagdiskd (rq mode, 256 MiB, the first 128 MiB written) serves fio randread
4 KiB QD32 (libaio, O_DIRECT) for N seconds per phase. Phases alternate, R
times: fio alone, then fio while C clients, each on its own connection, send
status, stats and tags in turn as fast as the replies come back. Alternating
keeps drift (page cache, CPU frequency) from landing on one side only.

Checks: every request gets exactly one reply, a JSON object with "ok": true
and the command's own key (state, reads, tags); no connection fails; fio sees
no error; the daemon exits 0 on SIGTERM. Figures: requests answered and their
rate, reply latency (p50/p99/max), the CPU time of the daemon's admin thread,
and the fio IOPS of each phase with the drop under admin load in percent.
The load generator is one Python process (asyncio): on a 2-core machine it
competes with fio and the daemon for CPU, which is part of what is measured.
Exit status: 0 pass, 1 a violation, 77 skipped.
"""
import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import shutil
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tdlib  # noqa: E402
from tdlib import Failure, log  # noqa: E402

COMMANDS = [("status", "state"), ("stats", "reads"), ("tags", "tags")]


# ---- the load generator (a subprocess) ----------------------------------------------------

async def client(cid, sock, stop, st):
    reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 22)
    n = cid
    try:
        while not stop.is_set():
            cmd, key = COMMANDS[n % len(COMMANDS)]
            n += 1
            t0 = time.monotonic()
            writer.write(cmd.encode() + b"\n")
            st["sent"] += 1
            line = await asyncio.wait_for(reader.readline(), 30)
            if not line.endswith(b"\n"):
                st["failures"].append("client %d: connection closed before the reply to %s" %
                                      (cid, cmd))
                return
            st["lat"].append(time.monotonic() - t0)
            r = json.loads(line)
            if r.get("ok") is not True or key not in r:
                st["failures"].append("client %d: %s -> %r" % (cid, cmd, line[:300]))
                return
            st["answered"] += 1
    except (OSError, asyncio.TimeoutError, ValueError) as e:
        st["failures"].append("client %d: %r" % (cid, e))
    finally:
        writer.close()


async def load_main(path, nclients):
    socks = []
    for _ in range(nclients):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        end = time.monotonic() + 30
        while True:
            try:
                s.connect(path)
                break
            except BlockingIOError:
                # The listen backlog is full until the daemon accepts: try again.
                if time.monotonic() > end:
                    raise
                time.sleep(0.001)
        socks.append(s)
    st = {"sent": 0, "answered": 0, "lat": [], "failures": []}
    stop = asyncio.Event()
    tasks = [asyncio.create_task(client(i, s, stop, st)) for i, s in enumerate(socks)]
    t0 = time.monotonic()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    # Run until the parent closes our stdin.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    stop.set()
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - t0
    lat = sorted(st["lat"])

    def pct(p):
        return lat[min(int(p * len(lat)), len(lat) - 1)] * 1000 if lat else 0.0

    json.dump({"sent": st["sent"], "answered": st["answered"], "seconds": elapsed,
               "failures": st["failures"][:20], "nfailures": len(st["failures"]),
               "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": pct(1.0)}, sys.stdout)
    sys.stdout.write("\n")


# ---- the orchestrator -----------------------------------------------------------------------

def admin_thread_cpu_s(pid):
    """CPU seconds used so far by the daemon's td-admin thread."""
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                if f.read().strip() != "td-admin":
                    continue
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            continue
    return 0.0


def process_cpu_s(pid):
    """CPU seconds used so far by process @pid (all its threads)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fio_randread(disk, seconds):
    rc, res, err = tdlib.run_fio([
        "--name=randread", "--filename=%s" % disk, "--rw=randread", "--bs=4k",
        "--ioengine=libaio", "--iodepth=32", "--direct=1", "--size=128M", "--time_based",
        "--runtime=%d" % seconds, "--randrepeat=0"], timeout=seconds + 120)
    if rc != 0 or not res or res["jobs"][0]["error"]:
        raise Failure("fio randread: status %d: %s" % (rc, err.strip()[-2000:]))
    return res["jobs"][0]["read"]["iops"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int,
                    default=int(os.environ.get("ADMIN_LOAD_SECONDS", "30")))
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tmpdir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--load", metavar="SOCKET", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load:
        asyncio.run(load_main(args.load, args.clients))
        return
    tdlib.require("fio")
    log("admin_load: %d clients (status, stats, tags in turn) against fio randread 4k QD32, "
        "%d s per phase, %d rounds of (alone, under admin load)" %
        (args.clients, args.seconds, args.rounds))
    work = tempfile.mkdtemp(prefix="tagdisk-adminload.", dir=args.tmpdir)
    d = tdlib.Daemon(work, "load")
    alone, loaded = [], []
    total = {"sent": 0, "answered": 0, "seconds": 0.0, "cpu": 0.0, "gcpu": 0.0}
    worst = {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    try:
        d.start("--size", "256M", "--mode", "rq")
        with open(d.disk, "r+b", buffering=0) as f:
            chunk = os.urandom(1 << 20)
            for _ in range(128):
                f.write(chunk)
        for rnd in range(1, args.rounds + 1):
            iops = fio_randread(d.disk, args.seconds)
            alone.append(iops)
            log("admin_load: round %d, fio alone:            %9.0f IOPS" % (rnd, iops))

            gen = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--load", d.sock,
                                    "--clients", str(args.clients)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
            if gen.stdout.readline().strip() != "ready":
                raise Failure("the load generator did not start")
            cpu0 = admin_thread_cpu_s(d.pid)
            gcpu0 = process_cpu_s(gen.pid)
            iops = fio_randread(d.disk, args.seconds)
            cpu = admin_thread_cpu_s(d.pid) - cpu0
            gcpu = process_cpu_s(gen.pid) - gcpu0
            out, _ = gen.communicate("", timeout=120)
            if gen.returncode != 0:
                raise Failure("the load generator exited with status %d" % gen.returncode)
            r = json.loads(out.strip().splitlines()[-1])
            loaded.append(iops)
            log("admin_load: round %d, fio under admin load: %9.0f IOPS; %d requests sent, %d "
                "answered (%.0f/s), reply p50 %.2f ms p99 %.2f ms max %.1f ms; CPU: admin "
                "thread %.1f s, load generator %.1f s" %
                (rnd, iops, r["sent"], r["answered"], r["answered"] / r["seconds"],
                 r["p50_ms"], r["p99_ms"], r["max_ms"], cpu, gcpu))
            if r["nfailures"] or r["sent"] != r["answered"]:
                raise Failure("round %d: %d requests sent, %d answered, %d failures: %s" %
                              (rnd, r["sent"], r["answered"], r["nfailures"],
                               "; ".join(r["failures"])))
            for k in ("sent", "answered", "seconds"):
                total[k] += r[k]
            total["cpu"] += cpu
            total["gcpu"] += gcpu
            for k in worst:
                worst[k] = max(worst[k], r[k])
        rc = d.stop()
        if rc != 0:
            raise Failure("tagdiskd exited with status %d:\n%s" % (rc, d.log_text()))
    finally:
        d.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    a = sum(alone) / len(alone)
    b = sum(loaded) / len(loaded)
    log("admin_load: %d clients: %d requests, every one answered (%.0f/s; worst phase p50 %.2f "
        "ms, p99 %.2f ms, max %.1f ms); admin thread CPU %.0f %% of one core" %
        (args.clients, total["answered"], total["answered"] / total["seconds"], worst["p50_ms"],
         worst["p99_ms"], worst["max_ms"], 100 * total["cpu"] / total["seconds"]))
    log("admin_load: fio randread 4k QD32: %.0f IOPS alone, %.0f IOPS under admin load: "
        "drop %.1f %%" % (a, b, 100 * (a - b) / a if a else 0.0))
    # fio and the daemon share the machine's cores with the load generator: with 2 cores, a
    # generator using most of one leaves less for I/O, whatever the daemon does.
    log("admin_load: CPU of the load generator: %.0f %% of one core, of %d cores" %
        (100 * total["gcpu"] / total["seconds"], os.cpu_count()))
    log("admin_load: PASS")


if __name__ == "__main__":
    tdlib.main_wrapper(main)
