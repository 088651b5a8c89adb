#!/bin/sh
# Settled events through a real mount (issue 19): a subscription with
# settle=MS gets one `settled` event per file once it has been quiet for
# MS after a burst of writes. Checked from the feed's own commit times
# (the write events' time_ns against the settled event's): never before
# the quiet period, once per burst, moved on by every write of the burst,
# a new burst after it gets its own; a rename during the burst names the
# new path, an unlink takes it away; an ephemeral reader's settle=MS is
# its own; bursts survive a SIGTERM and a SIGKILL of mfs (one whose
# period ended while mfs was down settles once at the restart); stats
# show the bursts waiting; dbfs-fsck is clean. No timing thresholds: each
# wait is a bounded wait on a condition.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x $PY ] || { echo "SKIP: no $PY"; exit 77; }
FSCK=$(dirname "$MFS")/../tools/fsck/dbfs-fsck
P=1500 # the quiet period, ms
M=$T/mfs
D=$T/d
mkdir -p "$D"
start_manager "$M"
xset mount "name=a,store=$T/s,mountpoint=$D,create" || { fail "mount: $(xget error)"; exit 1; }

# refusals first: nothing is created
for bad in "settle=0" "settle=abc" "settle=" "settle=86400001"; do
	expect_refused EINVAL subscribe "name=a,sub=bad,$bad" "settle"
done
xset subscribe "name=a,sub=s,settle=$P" || { fail "subscribe: $(xget error)"; exit 1; }
xset subscribe "name=a,sub=all" || { fail "subscribe: $(xget error)"; exit 1; }
SUB=$M/a/subscriptions/s.json

cp "$(dirname "$0")/feed_drain.py" "$T/drain.py" # reads until EAGAIN
cat >"$T/check.py" <<'PYEOF'
# check.py EVENTS INO P BURSTS [PATH]: the events of inode INO obey the
# settled rule for period P ms: each settled event comes P or more after
# the last write before it (commit times), there is a write between two
# settled events, there are BURSTS settled events and no write after the
# last; PATH: the path the last one names. Prints why not.
import json, sys
f, ino, p, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
writes = {"write", "truncate", "fallocate", "punch", "create"}
last_w, settled, since_w, bad = None, [], False, []
for line in open(f):
    e = json.loads(line)
    if e.get("ino") != ino:
        continue
    if e["op"] in writes or (e["op"] == "setattr" and "size" in e.get("attr", [])):
        last_w, since_w = e, True
    elif e["op"] == "settled":
        if e.get("settle") != p:
            bad.append("settled with settle=%s, want %d" % (e.get("settle"), p))
        if last_w is None or not since_w:
            bad.append("settled seq %d with no write since the last one" % e["seq"])
        elif e["time_ns"] - last_w["time_ns"] < p * 1000000:
            bad.append("settled seq %d only %.3f s after the write seq %d" % (
                e["seq"], (e["time_ns"] - last_w["time_ns"]) / 1e9, last_w["seq"]))
        settled.append(e)
        since_w = False
if len(settled) != want:
    bad.append("%d settled events, want %d" % (len(settled), want))
if want and since_w:
    bad.append("a write after the last settled event")
if len(sys.argv) > 5 and settled and settled[-1]["path"] != sys.argv[5]:
    bad.append("settled names %s, want %s" % (settled[-1]["path"], sys.argv[5]))
print("; ".join(bad))
sys.exit(1 if bad else 0)
PYEOF
events() { $PY "$T/drain.py" "$SUB" >"$T/events"; }
nsettled() { events; $PY - "$T/events" "$1" <<'PYEOF'
import json, sys
print(sum(1 for l in open(sys.argv[1]) if json.loads(l).get("ino") == int(sys.argv[2])
          and json.loads(l)["op"] == "settled"))
PYEOF
}
settled_at_least() { [ "$(nsettled "$1")" -ge "$2" ]; }
check() { events; $PY "$T/check.py" "$T/events" "$@" >"$T/why" || { cat "$T/why"; return 1; }; }
stat_of() { sed -n "s/^$1=//p" "$M/a/stats"; }
ino() { stat -c %i "$1"; }
# a burst: N appends (each open, write, close: the close hands the kernel's
# cached pages to the file system), GAP apart
burst() { i=0; while [ $i -lt "$2" ]; do printf 'x%s' $i >>"$1"; sleep "$3"; i=$((i + 1)); done; }

# 1. one burst longer than the period, writes closer than it: once, after
burst "$D/f" 10 0.25
IF=$(ino "$D/f")
wait_for 20 settled_at_least "$IF" 1 || fail "no settled event for the burst"
check "$IF" $P 1 /f || fail "burst: $(cat "$T/why")"
[ $FAILS = 0 ] && ok "a 2.5 s burst with writes 0.25 s apart: one settled event, $P ms after its last write"

# 2. a later write moves it on; a write after the event is a new burst
f0=$FAILS
burst "$D/g" 1 0
IG=$(ino "$D/g")
sleep 1 # within the period (the check below does not rely on it)
burst "$D/g" 1 0
wait_for 20 settled_at_least "$IG" 1 || fail "no settled event for g"
check "$IG" $P 1 || fail "moved on: $(cat "$T/why")"
truncate -s 1 "$D/g"
wait_for 20 settled_at_least "$IG" 2 || fail "no settled event for the second burst (a truncate)"
check "$IG" $P 2 || fail "second burst: $(cat "$T/why")"
# the subscription without settle= sees none of them
$PY "$T/drain.py" "$M/a/subscriptions/all.json" | grep -q '"op":"settled"' &&
	fail "a subscription without settle= got settled events"
[ $FAILS = $f0 ] && ok "a later write moves the event on; a new burst settles again; others see none"

# 3. rename during the burst: the new path; unlink: no event
f0=$FAILS
burst "$D/r1" 2 0.1
IR=$(ino "$D/r1")
mv "$D/r1" "$D/r2"
burst "$D/u" 2 0.1
IU=$(ino "$D/u")
rm "$D/u"
burst "$D/mark" 1 0 # written after both: its event comes after theirs
IM=$(ino "$D/mark")
wait_for 20 settled_at_least "$IM" 1 || fail "no settled event for mark"
check "$IR" $P 1 /r2 || fail "rename: $(cat "$T/why")"
check "$IU" $P 0 || fail "unlink: $(cat "$T/why")"
[ $FAILS = $f0 ] && ok "a renamed file settles under its new path, an unlinked one not at all"

# 4. an ephemeral reader's own period, only while it is open
f0=$FAILS
$PY - "$M/a/events.json@now,settle=700,ops=settled" "$D/e" "$T/eph" <<'PYEOF' &
import os, sys, time, json
fd = os.open(sys.argv[1], os.O_RDONLY)
with open(sys.argv[2], "a") as w:
    w.write("x")
out, end = b"", time.time() + 20
while time.time() < end and b"\n" not in out:
    out += os.read(fd, 1 << 16)
open(sys.argv[3], "wb").write(out)
PYEOF
EP=$!
PIDS="$PIDS $EP"
wait_for 25 is_dead $EP || fail "the ephemeral reader got nothing"
grep -q '"op":"settled".*"path":"/e".*"settle":700' "$T/eph" || fail "ephemeral: $(cat "$T/eph")"
wait_for 20 settled_at_least "$(ino "$D/e")" 1 || fail "no settled event of $P for e"
[ $FAILS = $f0 ] && ok "an ephemeral reader with settle=700 gets its own event"

# 5. restarts: a burst pending across SIGTERM and SIGKILL settles once,
# also when its period ended while mfs was down
f0=$FAILS
for how in TERM KILL; do
	burst "$D/k$how" 3 0.1
	IK=$(ino "$D/k$how")
	[ "$(stat_of settle_pending)" -ge 1 ] || fail "$how: stats show no burst pending"
	kill -$how $MPID
	wait $MPID 2>/dev/null
	restart_manager a || { fail "$how: mfs did not come back"; break; }
	wait_for 20 settled_at_least "$IK" 1 || fail "$how: the burst did not settle after the restart"
	check "$IK" $P 1 || fail "$how: $(cat "$T/why")"
done
wait_for 10 sh -c "[ \"\$(sed -n 's/^settle_pending=//p' '$M/a/stats')\" = 0 ]" ||
	fail "settle_pending=$(stat_of settle_pending) at the end"
[ $FAILS = $f0 ] && ok "bursts survive SIGTERM and SIGKILL, settle once after the restart"

# 6. unsubscribe: the period is wanted no more
f0=$FAILS
xset unsubscribe "name=a,sub=s" || fail "unsubscribe: $(xget error)"
burst "$D/n" 1 0
[ "$(stat_of settle_pending)" = 0 ] || fail "a write made a burst with no period wanted"
stop_pid $MPID || fail "exit"
"$FSCK" "$T/s" >"$T/fsck.out" 2>&1 || fail "dbfs-fsck: $(cat "$T/fsck.out")"
[ $FAILS = $f0 ] && ok "no period wanted after the unsubscribe; dbfs-fsck clean"
[ $FAILS = 0 ] && ok "settled events"
exit 0
