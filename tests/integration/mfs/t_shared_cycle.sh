#!/bin/sh
# Shared stores (issue 21): closes under symmetric load never wait for each
# other in a cycle. Two managers with two workers each share one store;
# four writers per mount create files in one directory, so every close in
# one process waits for the other's notifier, whose invalidations wait for
# its kernel's directory lock, held by a create that waits for a worker.
# With closes waited for in the workers both pools filled with closes and
# only the 2 s bound broke the cycle (30 of 80 closes timed out); closes
# are parked now (dbfs/shared_barrier.c), so none may time out.
# Over /dev/fuse (uring=off), whatever the kernel offers: a ring entry goes
# back when its handler returns, so over FUSE over io_uring a close is still
# waited for in its handler (dbfs.h, dbfs_io_received; issue 21 open).
. "$(dirname "$0")/lib.sh"

S=$T/s
A=$T/a
B=$T/b
mkdir -p "$S" "$A" "$B" "$T/m2"
SO=shared,durability=full # the store is on a disk here

start_manager "$T/m1" threads=2,uring=off
P1=$MPID
"$MFS" -f -o "state=$T/state2,threads=2,uring=off" "$T/m2" >>"$T/mfs2.log" 2>&1 &
P2=$!
PIDS="$PIDS $P2"
wait_for 10 is_mounted "$T/m2" || { cat "$T/mfs2.log" >&2; fail "second manager"; exit 1; }
setfattr -n user.mfs.mount -v "name=s,store=$S,mountpoint=$A,create,$SO" "$T/m1" || { fail "mount A"; exit 1; }
setfattr -n user.mfs.mount -v "name=s,store=$S,mountpoint=$B,$SO" "$T/m2" || { fail "mount B"; exit 1; }
mkdir "$A/d"
wait_for 5 test -d "$B/d" || fail "d not seen in B"

WP=""
for side in a b; do
	for w in 1 2 3 4; do
		(
			i=0
			while [ $i -lt 10 ]; do
				echo "$side$w $i" >"$T/$side/d/${side}_${w}_$i" || exit 1
				i=$((i + 1))
			done
		) &
		WP="$WP $!"
	done
done
PIDS="$PIDS $WP"
bad=0
for p in $WP; do wait "$p" || bad=$((bad + 1)); done
[ $bad = 0 ] || fail "$bad writers failed"

t1=$(sed -n 's/^shared_close_timeouts=//p' "$T/m1/s/stats")
t2=$(sed -n 's/^shared_close_timeouts=//p' "$T/m2/s/stats")
[ "$t1" = 0 ] && [ "$t2" = 0 ] && ok "80 closes under symmetric load, none timed out" ||
	fail "closes that waited 2 s for the other process: A $t1, B $t2"
[ "$(ls "$B/d" | wc -l)" = 80 ] && [ "$(ls "$A/d" | wc -l)" = 80 ] && ok "both list the 80 files" ||
	fail "listings: A $(ls "$A/d" | wc -l) B $(ls "$B/d" | wc -l)"
[ "$(cat "$A/d/b_3_9")" = "b3 9" ] && [ "$(cat "$B/d/a_2_7")" = "a2 7" ] || fail "contents"

setfattr -n user.mfs.unmount -v s "$T/m1" || fail "unmount A"
setfattr -n user.mfs.unmount -v s "$T/m2" || fail "unmount B"
stop_pid "$P2" || fail "second manager exit"
stop_pid "$P1" || fail "manager exit"
exit 0
