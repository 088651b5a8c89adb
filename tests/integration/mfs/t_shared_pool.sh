#!/bin/sh
# Shared stores (issue 21): the notifiers of every shared store of a
# process run on one pool of threads (dbfs/shared_pool.c), so threads do
# not grow with the number of shared stores. One manager mounts one shared
# store, then seven more (each also mounted by a second process, so that
# the notifiers have work), reading its thread count from /proc at each
# step; every store still sees the other process's changes.
. "$(dirname "$0")/lib.sh"

SO=shared,durability=full # the stores are on a disk here
start_manager "$T/m1"
P1=$MPID
mkdir -p "$T/m2"
"$MFS" -f -o "state=$T/state2" "$T/m2" >>"$T/mfs2.log" 2>&1 &
P2=$!
PIDS="$PIDS $P2"
wait_for 10 is_mounted "$T/m2" || { cat "$T/mfs2.log" >&2; fail "second manager"; exit 1; }
threads() { awk '/^Threads:/ { print $2 }' "/proc/$P1/status"; }

mount_pair() { # N: store s$N at a$N (manager 1) and b$N (manager 2)
	mkdir -p "$T/s$1" "$T/a$1" "$T/b$1"
	setfattr -n user.mfs.mount -v "name=s$1,store=$T/s$1,mountpoint=$T/a$1,create,$SO" "$T/m1" &&
		setfattr -n user.mfs.mount -v "name=s$1,store=$T/s$1,mountpoint=$T/b$1,$SO" "$T/m2"
}

t0=$(threads)
mount_pair 1 || { fail "mount 1"; exit 1; }
t1=$(threads)
for n in 2 3 4 5 6 7 8; do
	mount_pair $n || fail "mount $n"
done
t8=$(threads)
echo "threads: $t0 before, $t1 with one shared store, $t8 with eight"
[ "$t8" = "$t1" ] && ok "eight shared stores take the threads of one ($t1)" ||
	fail "threads grew with the shared stores: $t1 with one, $t8 with eight"

bad=0
for n in 1 2 3 4 5 6 7 8; do
	echo "v$n" >"$T/b$n/f"
	[ "$(cat "$T/a$n/f")" = "v$n" ] || bad=$((bad + 1))
	echo "w$n" >"$T/a$n/f"
	[ "$(cat "$T/b$n/f")" = "w$n" ] || bad=$((bad + 1))
done
[ $bad = 0 ] && ok "each of the eight stores: close-to-open both ways" || fail "$bad stale reads"

for n in 1 2 3 4 5 6 7 8; do
	setfattr -n user.mfs.unmount -v "s$n" "$T/m1" || fail "unmount a$n"
done
wait_for 10 sh -c "[ \$(awk '/^Threads:/ { print \$2 }' /proc/$P1/status) = $t0 ]" &&
	ok "the pool's threads end with the last shared store" || fail "threads after: $(threads), before $t0"
for n in 1 2 3 4 5 6 7 8; do
	setfattr -n user.mfs.unmount -v "s$n" "$T/m2" || fail "unmount b$n"
done
stop_pid "$P2" || fail "second manager exit"
stop_pid "$P1" || fail "manager exit"
exit 0
