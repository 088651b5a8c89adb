#!/bin/sh
# Shared stores (issue 21): closes under symmetric load never wait for each
# other in a cycle. Two managers with two workers each share one store;
# four writers per mount create files in one directory, so every close in
# one process waits for the other's notifier, whose invalidations wait for
# its kernel's directory lock, held by a create that waits for a worker.
# With closes waited for in the workers both pools filled with closes and
# only the 2 s bound broke the cycle (30 of 80 closes timed out); closes
# are parked now (dbfs/shared_barrier.c), so none may time out.
# Over /dev/fuse (uring=off), and with FUSE over io_uring on (uring=on,
# enable_uring Y; the test sets it where the kernel has it, and puts it
# back): a shared store is served over /dev/fuse even then (a ring entry
# goes back only with its reply, mfs/dbfs_mount.c; waited for in their
# handlers on the rings, 54 of 80 closes timed out), while a DBFS that is
# not shared, on the same manager, is served over the rings.
. "$(dirname "$0")/lib.sh"

SO=shared,durability=full # the store is on a disk here
P1="" P2=""

# cycle NAME URING: one store shared by two managers with uring=URING, the
# writers, the checks, the unmounts
cycle() {
	n=$1
	S=$T/$n/s A=$T/$n/a B=$T/$n/b
	mkdir -p "$S" "$A" "$B" "$T/$n/m2"
	start_manager "$T/$n/m1" "threads=2,uring=$2"
	P1=$MPID
	"$MFS" -f -o "state=$T/$n/state2,threads=2,uring=$2" "$T/$n/m2" >>"$T/mfs2.log" 2>&1 9>&- &
	P2=$!
	PIDS="$PIDS $P2"
	wait_for 10 is_mounted "$T/$n/m2" || { cat "$T/mfs2.log" >&2; fail "second manager"; exit 1; }
	setfattr -n user.mfs.mount -v "name=s,store=$S,mountpoint=$A,create,$SO" "$T/$n/m1" ||
		{ fail "mount A"; exit 1; }
	setfattr -n user.mfs.mount -v "name=s,store=$S,mountpoint=$B,$SO" "$T/$n/m2" ||
		{ fail "mount B"; exit 1; }
	mkdir "$A/d"
	wait_for 5 test -d "$B/d" || fail "d not seen in B"

	WP=""
	for side in a b; do
		for w in 1 2 3 4; do
			(
				i=0
				while [ $i -lt 10 ]; do
					echo "$side$w $i" >"$T/$n/$side/d/${side}_${w}_$i" || exit 1
					i=$((i + 1))
				done
			) 9>&- &
			WP="$WP $!"
		done
	done
	PIDS="$PIDS $WP"
	bad=0
	for p in $WP; do wait "$p" || bad=$((bad + 1)); done
	[ $bad = 0 ] || fail "$n: $bad writers failed"

	t1=$(sed -n 's/^shared_close_timeouts=//p' "$T/$n/m1/s/stats")
	t2=$(sed -n 's/^shared_close_timeouts=//p' "$T/$n/m2/s/stats")
	[ "$t1" = 0 ] && [ "$t2" = 0 ] && ok "$n: 80 closes under symmetric load, none timed out" ||
		fail "$n: closes that waited 2 s for the other process: A $t1, B $t2"
	if [ "$2" = on ]; then # the shared store over /dev/fuse, a plain one over the rings
		r1=$(sed -n 's/^ring=//p' "$T/$n/m1/s/stats")
		r2=$(sed -n 's/^ring=//p' "$T/$n/m2/s/stats")
		[ "$r1" = 0 ] && [ "$r2" = 0 ] && ok "$n: the shared store served over /dev/fuse" ||
			fail "$n: shared store's ring requests A ${r1:-none}, B ${r2:-none}"
		mkdir -p "$T/$n/p"
		setfattr -n user.mfs.mount -v "name=p,store=$T/$n/ps,mountpoint=$T/$n/p,create" "$T/$n/m1" ||
			fail "$n: mount p"
		echo x >"$T/$n/p/f" && [ "$(cat "$T/$n/p/f")" = x ] || fail "$n: p's file"
		rp=$(sed -n 's/^ring=//p' "$T/$n/m1/p/stats")
		[ "${rp:-0}" -gt 0 ] && ok "$n: a DBFS not shared served over the rings ($rp)" ||
			fail "$n: p's ring requests ${rp:-none}"
		setfattr -n user.mfs.unmount -v p "$T/$n/m1" || fail "$n: unmount p"
	fi
	[ "$(ls "$B/d" | wc -l)" = 80 ] && [ "$(ls "$A/d" | wc -l)" = 80 ] &&
		ok "$n: both list the 80 files" ||
		fail "$n: listings: A $(ls "$A/d" | wc -l) B $(ls "$B/d" | wc -l)"
	[ "$(cat "$A/d/b_3_9")" = "b3 9" ] && [ "$(cat "$B/d/a_2_7")" = "a2 7" ] ||
		fail "$n: contents"

	setfattr -n user.mfs.unmount -v s "$T/$n/m1" || fail "$n: unmount A"
	setfattr -n user.mfs.unmount -v s "$T/$n/m2" || fail "$n: unmount B"
	stop_pid "$P2" || fail "$n: second manager exit"
	stop_pid "$P1" || fail "$n: manager exit"
}

cycle devfuse off
if [ -w "$URING_PARAM" ]; then
	uring_param_hold
	uring_param Y
	cycle uring on
else
	echo "skip: this kernel has no FUSE over io_uring: not with the rings on"
fi
exit 0
