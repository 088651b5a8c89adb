#!/bin/sh
# Shared stores (issue 21): three mfs processes serve one store at once, as
# a user starts them: two `mfs --dbfs STORE -o shared` and a manager that
# mounts it with user.mfs.mount ...,shared. Checks: the lock modes refuse
# each other with their reason; each process enqueues its events into a
# shard of its own; a file written and closed through one
# mount is read with its new content by the next open through another
# (close-to-open, no wait); new files, renames, unlinks, chmod and mkdir
# are seen through the others within a bounded wait; a file unlinked in
# one process stays readable where it is open; concurrent writers through
# all mounts leave dbfs-fsck clean; SIGKILL of one process leaves the
# others serving, and the last one out reclaims the orphans.
. "$(dirname "$0")/lib.sh"

FSCK=$(dirname "$MFS")/../tools/fsck/dbfs-fsck
S=$T/s
A=$T/a
B=$T/b
C=$T/c
M=$T/mfs
mkdir -p "$S" "$A" "$B" "$C" "$T/x"
# the store is on a disk here: shared needs durability=full there
SO=shared,durability=full

start_dbfs "$A" "create,$SO" a
PA=$DPID
start_dbfs "$B" "$SO" b
PB=$DPID
start_manager "$M"
xset mount "name=s,store=$S,mountpoint=$C,$SO" || { cat "$T/xset.err" "$T/mfs.log" >&2; fail "manager: shared mount"; exit 1; }
ok "three processes serve one store (two --dbfs, one manager)"

# 1. refusals, each with its reason
"$MFS" -f --dbfs "$S" -o durability=full "$T/x" >"$T/x.log" 2>&1 &
XP=$!
PIDS="$PIDS $XP"
wait_for 20 is_dead $XP || fail "exclusive open of a shared store did not end"
grep -q "mounted shared by another process: an exclusive open is refused" "$T/x.log" &&
	ok "exclusive open refused while shared" || fail "exclusive: $(cat "$T/x.log")"
not_mounted "$T/x" || fail "x mounted"
"$MFS" -f --dbfs "$S" -o "$SO,writeback_cache=1" "$T/x" >"$T/x.log" 2>&1 &
XP=$!
PIDS="$PIDS $XP"
wait_for 20 is_dead $XP || fail "writeback_cache with shared did not end"
grep -q "writeback_cache is refused with shared" "$T/x.log" && ok "writeback_cache refused with shared" ||
	fail "writeback_cache: $(cat "$T/x.log")"
"$MFS" -f --dbfs "$S" -o shared "$T/x" >"$T/x.log" 2>&1 &
XP=$!
PIDS="$PIDS $XP"
wait_for 20 is_dead $XP || fail "durability=normal with shared did not end"
grep -q "shared needs durability=full" "$T/x.log" && ok "durability=normal on disk refused with shared" ||
	fail "durability: $(cat "$T/x.log")"
not_mounted "$T/x" || fail "x mounted"
mkdir -p "$T/y"
S2=$T/s2
mkdir -p "$S2"
"$MFS" -f --dbfs "$S2" -o create,durability=full "$T/x" >"$T/x2.log" 2>&1 &
XP=$!
PIDS="$PIDS $XP"
wait_for 20 is_mounted "$T/x" || fail "exclusive s2"
expect_refused EBUSY mount "name=u,store=$S2,mountpoint=$T/y,$SO" "mounted exclusively"
stop_pid $XP

# 2. close-to-open: write and close in one mount, open and read in another;
# first one writer and one reader, same size each time (the reader's kernel
# has the old pages and size cached), then the three in turn
bad=0
for i in $(seq 100 139); do
	echo "x$i" >"$A/g"
	[ "$(cat "$B/g")" = "x$i" ] || bad=$((bad + 1))
done
[ $bad = 0 ] && ok "close-to-open: 40 rewrites in A, each read at once in B" ||
	fail "close-to-open A -> B: $bad stale reads"
bad=0
for i in $(seq 1 40); do
	echo "a$i" >"$A/f"
	[ "$(cat "$B/f")" = "a$i" ] || bad=$((bad + 1))
	echo "b$i-longer" >"$B/f"
	[ "$(cat "$C/f")" = "b$i-longer" ] || bad=$((bad + 1))
	echo "c$i" >"$C/f"
	[ "$(cat "$A/f")" = "c$i" ] || bad=$((bad + 1))
done
[ $bad = 0 ] && ok "close-to-open: 120 writes, each read at once through another mount" ||
	fail "close-to-open: $bad stale reads"

# 3. names and attributes, seen within a bounded wait (the notifier's lag)
cat "$B/new" 2>/dev/null # a negative lookup the kernel of B may cache
ls "$B" >/dev/null       # and a listing
echo n >"$A/new"
wait_for 5 test -f "$B/new" && ok "new file seen" || fail "new file not seen in B"
ls "$B" | grep -q -x new || fail "listing of B misses new"
stat -c %a "$B/new" >/dev/null
chmod 600 "$A/new"
wait_for 5 sh -c "[ \$(stat -c %a '$B/new') = 600 ]" && ok "chmod seen" || fail "chmod: $(stat -c %a "$B/new")"
mv "$A/new" "$A/renamed"
wait_for 5 sh -c "[ ! -e '$B/new' ] && [ -e '$B/renamed' ]" && ok "rename seen" || fail "rename not seen"
mkdir "$C/d"
wait_for 5 test -d "$A/d" && ok "mkdir seen" || fail "mkdir not seen"
mv "$A/renamed" "$A/d/r"
wait_for 5 sh -c "[ ! -e '$B/renamed' ] && [ -e '$B/d/r' ]" || fail "rename into d not seen"
rm "$A/d/r"
wait_for 5 sh -c "[ ! -e '$B/d/r' ]" && ok "unlink seen" || fail "unlink not seen"
rmdir "$C/d"
wait_for 5 sh -c "[ ! -e '$B/d' ]" && ok "rmdir seen" || fail "rmdir not seen"

# the manager's stats of its shared DBFS
st=$(cat "$M/s/stats")
echo "$st" | grep -q -x "shared_processes=3" && ok "stats: shared_processes=3" || fail "stats: $(echo "$st" | grep shared_)"
n=$(echo "$st" | sed -n 's/^shared_events_received=//p')
e=$(echo "$st" | sed -n 's/^shared_inval_entry=//p')
[ "${n:-0}" -gt 0 ] && [ "${e:-0}" -gt 0 ] && ok "stats: events received $n, entries invalidated $e" ||
	fail "stats: received '$n' entries '$e'"

# each process enqueues its events into a shard of its own: after a write
# through each mount, three of the feed's shards hold events (read with
# mdb_stat: each subshard table "feeds/s/SHARD/ID" and its entries), and
# the manager's stats name three shards, its own among them
echo a >"$A/sha"; echo b >"$B/shb"; echo c >"$C/shc"
if command -v mdb_stat >/dev/null 2>&1; then
	used=$(mdb_stat -a "$S" | awk '/^Status of feeds\/s\//{split($3, p, "/"); sh = p[3]; next}
		/Entries:/{if (sh != "" && $2 > 0) u[sh] = 1; sh = ""}
		END{n = 0; for (k in u) n++; print n}')
	[ "${used:-0}" -ge 3 ] && ok "the feed: $used shards hold events (a shard per process)" ||
		fail "the feed: events in ${used:-0} shards, not one per process"
else
	echo "SKIP: no mdb_stat: the shards' tables not counted"
fi
st=$(cat "$M/s/stats")
own=$(echo "$st" | sed -n 's/^shared_shard=//p')
all=$(echo "$st" | sed -n 's/^shared_shards=//p')
[ "$(echo "$all" | tr ',' '\n' | sort -u | grep -c .)" -eq 3 ] &&
	echo ",$all," | grep -q ",$own," && ok "stats: shared_shard=$own shared_shards=$all" ||
	fail "stats: shared_shard=$own shared_shards=$all"
rm "$A/sha" "$B/shb" "$C/shc"

# the change feed through the manager (process C) holds the events A made,
# and C's durable subscription acknowledges them (they are beyond the last
# event C itself committed)
cp "$(dirname "$0")/feed_drain.py" "$T/drain.py"
xset subscribe "name=s,sub=watch" || fail "subscribe: $(xget error)"
echo z >"$A/zz"
wait_for 5 sh -c "python3 '$T/drain.py' '$M/s/subscriptions/watch' | grep -q ' /zz'" &&
	ok "C's subscription reads A's event" || fail "C's feed misses A's /zz"
seq=$(python3 "$T/drain.py" "$M/s/subscriptions/watch" | grep ' /zz' | tail -1 | cut -d' ' -f1)
echo "$seq" >"$M/s/subscriptions/watch" 2>"$T/ack.err" && ok "C acks A's event $seq" ||
	fail "ack of A's event $seq in C: $(xget error)"
rm "$A/zz"

# 4. unlinked in one process while open in another: it keeps working
head -c 100000 /dev/urandom >"$A/held"
sum=$(cksum <"$A/held")
exec 3<"$B/held"
rm "$A/held"
wait_for 5 sh -c "[ ! -e '$B/held' ]" || fail "held: unlink not seen"
[ "$(cksum <&3)" = "$sum" ] && ok "unlinked in A, still read whole through B's open fd" || fail "held: content"
exec 3<&-

# 5. concurrent writers through the three mounts
WP=""
for m in "$A" "$B" "$C"; do
	(
		tag=$(basename "$m")
		for i in $(seq 1 60); do
			echo "$tag $i" >"$m/w_${tag}_$i"
			echo "$tag $i" >>"$m/common"
			mv "$m/w_${tag}_$i" "$m/v_${tag}_$i"
			[ $((i % 3)) = 0 ] && rm "$m/v_${tag}_$i"
		done
	) &
	WP="$WP $!"
done
for p in $WP; do wait "$p"; done
wait_for 10 sh -c "[ \$(ls '$A' | grep -c '^v_') = 120 ] && [ \$(ls '$B' | grep -c '^v_') = 120 ] && [ \$(ls '$C' | grep -c '^v_') = 120 ]" &&
	ok "concurrent writers: every mount lists the 120 files left" ||
	fail "concurrent: $(ls "$A" | grep -c '^v_') $(ls "$B" | grep -c '^v_') $(ls "$C" | grep -c '^v_')"
[ "$(wc -l <"$B/common")" = 180 ] && ok "appends through three mounts: 180 lines" || fail "common: $(wc -l <"$B/common")"

# 6. SIGKILL of one process (B, with a file open, in the middle of writes)
# leaves the others serving
echo keep >"$A/k"
exec 4<"$B/k"
rm "$A/k"
mkdir "$B/kw"
(
	i=0
	while [ $i -lt 100000 ]; do
		head -c 5000 /dev/zero >"$B/kw/$i" 2>/dev/null || exit 0
		i=$((i + 1))
	done
) &
KW=$!
wait_for 20 sh -c "[ \$(ls '$A/kw' | wc -l) -ge 50 ]" || fail "B's writer did not start"
kill -KILL "$PB"
wait "$KW" 2>/dev/null
wait_for 10 is_dead "$PB" || fail "B did not die"
exec 4<&-
umount -l "$B" 2>/dev/null
echo after >"$A/after"
[ "$(cat "$C/after")" = after ] && ok "after SIGKILL of B: A writes, C reads at once" || fail "after kill"
echo again >"$C/after"
[ "$(cat "$A/after")" = again ] || fail "after kill: C -> A"

# 7. B rejoins
start_dbfs "$B" "$SO" b2
PB=$DPID
echo rejoin >"$A/rj"
[ "$(cat "$B/rj")" = rejoin ] && ok "B rejoined" || fail "rejoin"

# 8. all out: the last one reclaims orphans, dbfs-fsck is clean
# an unmount just after the workload was EBUSY now and then (after the
# model had passed: 1 in 5 runs, and a 20,000-step run; cause not found):
# retried while busy, bounded, as t_feed.sh does; who held it is logged
unmount_retried s "$C" || fail "unmount s: $(cat "$T/xset.err")"
stop_pid "$PB" || fail "B exit"
stop_pid "$PA" || fail "A exit"
"$FSCK" "$S" >"$T/fsck.out" 2>&1 && ok "dbfs-fsck clean" || fail "dbfs-fsck: $(cat "$T/fsck.out")"
"$MFS" -f --dbfs "$S" -o durability=full "$T/x" >"$T/x3.log" 2>&1 &
XP=$!
PIDS="$PIDS $XP"
wait_for 20 is_mounted "$T/x" && ok "exclusive open once nobody shares" || fail "exclusive after: $(cat "$T/x3.log")"
[ "$(cat "$T/x/after")" = again ] || fail "content after"
stop_pid $XP
exit 0
