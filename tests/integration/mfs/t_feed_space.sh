#!/bin/sh
# An abandoned subscription never makes the file system's users meet ENOSPC
# (issue 18): a DBFS whose store is on a small tmpfs, with a bounded feed
# (feed_events) and a durable subscription that never reads nor acks, takes
# a churn of metadata changes whose events are many times what the tmpfs
# could hold (the workload's own data stays tiny: empty files, chmods).
# No operation gets ENOSPC; the feed's retention and space stay bounded;
# the abandoned subscriber, when it reads at last, gets an explicit gap
# record naming the first event still kept, then the events from there;
# its stats and the feed's count the gap.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x $PY ] || { echo "SKIP: no $PY"; exit 77; }
# The store's file system: unbounded, the feed fills it after some 150,000
# events (about 200 bytes each in the store); the churn makes 400,000.
SMALL_MB=32
CHURN=400000
KEEP=1000
M=$T/mfs
D=$T/d
S=$T/small
mkdir -p "$D" "$S"
mount -t tmpfs -o size=${SMALL_MB}m mfs-test-small "$S" || { fail "mount tmpfs"; exit 1; }
start_manager "$M"
xset mount "name=sp,store=$S/s,mountpoint=$D,create,feed_events=$KEEP" \
	|| { fail "mount: $(xget error)"; exit 1; }
E=$M/sp
stat_of() { sed -n "s/^$1=//p" "$E/stats"; }
xset subscribe "name=sp,sub=gone,from=1" || fail "subscribe: $(xget error)"

# the churn: create, chmod and unlink empty files, one event each; every
# error is counted by its errno, ENOSPC above all
$PY - "$D" $CHURN >"$T/churn.out" 2>&1 <<'PYEOF'
import collections, errno, os, sys, time
d, total = sys.argv[1], int(sys.argv[2])
errs = collections.Counter()
t0 = time.monotonic()
n = 0
i = 0
while n < total:
    p = "%s/f%d" % (d, i % 64)
    for op in ("create", "chmod", "unlink"):
        try:
            if op == "create":
                os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
            elif op == "chmod":
                os.chmod(p, 0o600)
            else:
                os.unlink(p)
        except OSError as e:
            errs[errno.errorcode.get(e.errno, str(e.errno))] += 1
        n += 1
    i += 1
dt = time.monotonic() - t0
print("ops=%d seconds=%.1f rate=%.0f errors=%s" % (n, dt, n / dt, dict(errs)))
sys.exit(1 if errs else 0)
PYEOF
rc=$?
churn=$(cat "$T/churn.out")
[ $rc = 0 ] && ok "churn without an error: $churn" || fail "churn: $churn"
grep -q ENOSPC "$T/churn.out" && fail "users got ENOSPC with an abandoned subscription"

# the next tick applies the bound exactly (by events)
wait_for 30 sh -c "[ \$(sed -n 's/^feed_events=//p' '$E/stats') -le $KEEP ]" \
	|| fail "retention not back to its bound: $(grep '^feed_' "$E/stats")"
first=$(stat_of feed_first_seq)
next=$(stat_of feed_next_seq)
[ "$next" -gt "$CHURN" ] && [ $((next - first)) -le $KEEP ] \
	&& ok "retention: events $first..$((next - 1)) kept of $((next - 1))" \
	|| fail "retention: first $first next $next"
bytes=$(stat_of feed_bytes)
[ "$bytes" -lt $((SMALL_MB << 19)) ] && ok "the feed's space is bounded: feed_bytes=$bytes" \
	|| fail "feed_bytes=$bytes"
size=$(stat -c %s "$S/s/data.mdb")
ok "the store's data.mdb: $size bytes on a ${SMALL_MB} MiB tmpfs, df: $(df -k "$S" | tail -1)"

# the abandoned subscriber reads at last: a gap record naming the first
# event kept, then the events from there
cp "$(dirname "$0")/feed_drain.py" "$T/drain.py"
$PY "$T/drain.py" "$E/subscriptions/gone" >"$T/sub.out"
g=$(head -1 "$T/sub.out")
case "$g" in
"1 "*" gap 0 - next=$first") ok "the subscriber's gap record: $g" ;;
*) fail "no gap record naming $first: $g" ;;
esac
sed -n 2p "$T/sub.out" | grep -q "^$first " && ok "then the events from $first" \
	|| fail "after the gap: $(sed -n 2p "$T/sub.out")"
grep -q "^feed_sub.gone=.*gaps=1," "$E/stats" && ok "the subscription counts the gap" \
	|| fail "$(grep '^feed_sub.gone' "$E/stats")"
[ "$(stat_of feed_gaps)" -ge 1 ] && ok "feed_gaps=$(stat_of feed_gaps)" || fail "feed_gaps"
# and the file system still takes writes
echo small >"$D/after" && ok "writes after the churn" || fail "write after the churn"
wait_for 20 xset unmount sp || fail "unmount: $(xget error)"
stop_pid $MPID || fail "exit"
