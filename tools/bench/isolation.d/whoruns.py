#!/usr/bin/env python3
"""For a `perf sched record` of a tools/bench/isolation phase (PERF=DIR): each
time the quiet client (`lat`) or a thread of the isolation's mfs waited more
than THRESH us (default 50) from its wake-up (sched_waking) to running, which
tasks ran on that CPU meanwhile: time by group (lat, mfs, dd: the writers,
kworker, others: everything else on the machine).
Usage: whoruns.py DIR/MODE.PHASE.ROUND.data $(cat DIR/MODE.PHASE.ROUND.mfspid) [THRESH_US]"""
import subprocess, sys, re, collections
data, mfspid = sys.argv[1], sys.argv[2]
thresh = float(sys.argv[3]) / 1e6 if len(sys.argv) > 3 else 50e-6
out = subprocess.run(["perf", "script", "-i", data, "-F", "tid,pid,cpu,time,event,trace"],
                     capture_output=True, text=True).stdout
tgid = {}  # tid -> pid
def group(comm, tid):
    if comm == "lat":
        return "lat"
    if tgid.get(tid) == mfspid:
        return "mfs"
    if comm == "dd":
        return "dd"
    if comm.startswith("kworker"):
        return "kworker"
    if comm == "swapper":
        return "idle"
    return "others"
woken = {}          # tid -> wake time
running = {}        # cpu -> (tid, comm, since)
segs = collections.defaultdict(list)  # cpu -> [(start, end, group)]
waits = []          # (cpu, wake, run, waiter group)
for line in out.splitlines():
    m = re.match(r"\s*(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)", line)
    if not m:
        continue
    pid, tid, cpu, t, ev, tr = m.group(1), m.group(2), int(m.group(3)), float(m.group(4)), m.group(5), m.group(6)
    tgid[tid] = pid
    if ev.endswith("sched_wakeup") or ev.endswith("sched_waking") or ev.endswith("sched_wakeup_new"):
        w = re.search(r"comm=(.*?) pid=(\d+)", tr)
        if w and (ev.endswith("sched_waking") or w.group(2) not in woken):
            woken[w.group(2)] = (t, w.group(1))
    elif ev.endswith("sched_switch"):
        s = re.search(r"prev_comm=(.*?) prev_pid=(\d+) .*?==> next_comm=(.*?) next_pid=(\d+)", tr)
        if not s:
            continue
        pcomm, ppid, ncomm, npid = s.groups()
        if cpu in running:
            r = running[cpu]
            segs[cpu].append((r[2], t, group(r[1], r[0])))
        running[cpu] = (npid, ncomm, t)
        if npid in woken:
            wt, _ = woken.pop(npid)
            g = group(ncomm, npid)
            if g in ("lat", "mfs") and t - wt > thresh:
                waits.append((cpu, wt, t, g))
tot = collections.defaultdict(lambda: collections.Counter())
cnt = collections.Counter()
for cpu, a, b, g in waits:
    cnt[g] += 1
    for s0, s1, sg in segs[cpu]:
        if s1 > a and s0 < b:
            tot[g][sg] += min(s1, b) - max(s0, a)
for g in ("lat", "mfs"):
    t = sum(tot[g].values())
    print("%s: %d waits over %.0f us, %.1f ms in all; the CPU meanwhile: %s" % (
        g, cnt[g], thresh * 1e6, t * 1e3,
        ", ".join("%s %.0f%%" % (k, 100 * v / t) for k, v in tot[g].most_common()) if t else "-"))
