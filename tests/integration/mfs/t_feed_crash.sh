#!/bin/sh
# Crash test of the change feed (issue 18): SIGKILL mfs many times during a
# burst of creates, renames and unlinks while a durable subscriber reads
# and acknowledges; after each restart the subscriber resumes. In the end
# the events it was given, once duplicates of unacknowledged ones are
# dropped (at-least-once), are exactly the committed changes: none lost,
# none invented, in commit order, numbered without a hole. The committed
# changes are what the file system holds after the crash: the workload
# logs each operation after the kernel acknowledged it, and the one in
# flight at the kill either committed (its name is there) or not.
#
#   t_feed_crash.sh MFS [ITERATIONS]      (FEED_CRASH_ITERS overrides)
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x $PY ] || { echo "SKIP: no $PY"; exit 77; }
ITERS=${FEED_CRASH_ITERS:-${2:-20}}
M=$T/mfs
D=$T/d
mkdir -p "$D"
start_manager "$M"
xset mount "name=a,store=$T/s,mountpoint=$D,create" || { fail "mount: $(xget error)"; exit 1; }
mkdir "$D/w"
xset subscribe "name=a,sub=c" || { fail "subscribe: $(xget error)"; exit 1; }
SUB=$M/a/subscriptions/c
: >"$T/load.log"
: >"$T/record"

# restart: a new mfs on the state directory (the manager's mount point is
# stale after the kill: mfs clears it, as the DBFS's)
restart() {
	"$MFS" -f -o "state=$T/state" "$M" >>"$T/mfs.log" 2>&1 &
	MPID=$!
	PIDS="$PIDS $MPID"
	wait_for 20 sh -c "getfattr -n user.mfs.status '$M' >/dev/null 2>&1"
}

# The workload: in directory w, create n.K (K counting up), every third one
# renamed to r.K, every fifth one removed; log "op name" after each call
# returned. Stops at the first error (mfs is gone).
cat >"$T/load.py" <<'PYEOF'
import os, sys
d, log, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
lf = open(log, "a", buffering=1)
k = start
try:
    while True:
        n = "%s/n.%d" % (d, k)
        os.close(os.open(n, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        lf.write("create /w/n.%d\n" % k)
        if k % 3 == 0:
            os.rename(n, "%s/r.%d" % (d, k))
            lf.write("rename /w/n.%d /w/r.%d\n" % (k, k))
        elif k % 5 == 0:
            os.unlink(n)
            lf.write("unlink /w/n.%d\n" % k)
        k += 1
except OSError:
    pass
PYEOF

# The subscriber: read the subscription, append every line to the record,
# acknowledge every 7th event (and at the end of a read), until mfs goes.
cat >"$T/sub.py" <<'PYEOF'
import os, sys
path, rec = sys.argv[1], sys.argv[2]
out = open(rec, "ab", buffering=0)
try:
    fd = os.open(path, os.O_RDWR)
    buf = b""
    n = 0
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        buf += b
        *lines, buf = buf.split(b"\n")
        for l in lines:
            out.write(l + b"\n")
            n += 1
            if n % 7 == 0:
                os.write(fd, l.split(b" ")[0] + b"\n")
except OSError:
    pass
PYEOF

# next_k: the counter after the highest name the workload logged or left
# (a create in flight at the kill may have committed unlogged)
next_k() {
	{ sed -n 's/^create \/w\/n\.\([0-9]*\)$/\1/p' "$T/load.log" 2>/dev/null
	  ls "$D/w" | sed 's/^[nr]\.//'; } | sort -n | tail -1 \
		| awk '{ k = $1 + 1 } END { print k + 0 }'
}

# (wait_for counts in $i: the loop counts in names of its own)
kills=0
seed=$$
while [ $kills -lt "$ITERS" ]; do
	$PY "$T/sub.py" "$SUB" "$T/record" &
	SP=$!
	PIDS="$PIDS $SP"
	$PY "$T/load.py" "$D/w" "$T/load.log" "$(next_k)" &
	LP=$!
	PIDS="$PIDS $LP"
	# let it run for a varying number of logged operations
	seed=$(((seed * 1103515245 + 12345) % 2147483648))
	want=$(($(wc -l <"$T/load.log") + 20 + (seed / 65536) % 300))
	wait_for 60 sh -c "[ \$(wc -l <'$T/load.log') -ge $want ]" || fail "$kills: the workload stalls"
	kill -KILL $MPID
	wait $MPID 2>/dev/null
	kills=$((kills + 1))
	wait_for 20 is_dead $LP || fail "$kills: the workload hangs after the kill"
	wait_for 20 is_dead $SP || fail "$kills: the subscriber hangs after the kill"
	wait $LP $SP 2>/dev/null
	restart || { fail "$kills: mfs did not come back"; break; }
	wait_for 20 test -e "$SUB" || { fail "$kills: a not back: $(xget list)"; break; }
done
# the last reader: everything up to now, then stop
$PY "$T/sub.py" "$SUB" "$T/record" &
SP=$!
PIDS="$PIDS $SP"
last=$(($(sed -n 's/^feed_next_seq=//p' "$M/a/stats") - 1))
wait_for 60 sh -c "tail -1 '$T/record' | grep -q '^$last '" || fail "last reader: not at $last"
kill -TERM $SP
wait $SP 2>/dev/null

# Check: the record, duplicates dropped, is dense from the first seq, each
# duplicate the same line; its creates, renames and unlinks in w are the
# workload's logged operations plus at most the one in flight at each kill,
# and the names they leave are exactly what w holds now.
ls "$D/w" >"$T/now"
$PY - "$T/record" "$T/load.log" "$T/now" "$kills" <<'PYEOF' || fail "the events do not match the committed changes"
import sys
rec, log, now, iters = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
seen = {}
order = []
for l in open(rec, "rb").read().split(b"\n"):
    if not l:
        continue
    seq = int(l.split(b" ")[0])
    if seq in seen:
        assert seen[seq] == l, "seq %d given twice, differently:\n%r\n%r" % (seq, seen[seq], l)
        continue
    seen[seq] = l
    order.append(seq)
assert order == sorted(order), "events out of order"
assert order == list(range(order[0], order[0] + len(order))), "a hole in the sequence"
events = []
for seq in order:
    f = seen[seq].decode().split(" ")
    assert f[2] != "gap", "a gap record: %s" % seen[seq]
    if f[2] in ("create", "rename", "unlink") and f[4].startswith("/w/"):
        events.append(" ".join([f[2]] + f[4:6 if f[2] == "rename" else 5]))
logged = [l for l in open(log).read().split("\n") if l]
# every logged (acknowledged) operation has its event, in the same order
j = 0
extra = 0
for e in events:
    if j < len(logged) and e == logged[j]:
        j += 1
    else:
        extra += 1  # committed, not logged: in flight at a kill
assert j == len(logged), "lost: %r (after %d matched)" % (logged[j], j)
assert extra <= iters, "%d events beyond the logged operations" % extra
# the names they leave are what the directory holds
names = set()
for e in events:
    f = e.split(" ")
    if f[0] == "create":
        names.add(f[1])
    elif f[0] == "rename":
        names.discard(f[1]); names.add(f[2])
    else:
        names.discard(f[1])
have = set("/w/" + n for n in open(now).read().split("\n") if n)
assert names == have, "events leave %d names, w holds %d: missing %r, invented %r" % (
    len(names), len(have), sorted(have - names)[:5], sorted(names - have)[:5])
print("%d events, %d logged operations, %d committed in flight, %d names" % (
    len(order), len(logged), extra, len(have)))
PYEOF
[ $FAILS = 0 ] && ok "$kills SIGKILLs: the subscriber's events are exactly the committed changes"
xget stats.a | grep "^feed_sub.c=" || true
stop_pid $MPID || fail "exit"
