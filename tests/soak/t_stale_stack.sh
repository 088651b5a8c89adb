#!/bin/sh
# Issue 15.6, found again by the soak (every SIGKILL restart): a restarted
# mfs does not see a dead DBFS mount as stale when the kernel has the
# mount point's attributes cached (attr_timeout, default 86400 s): stat()
# succeeds from the cache, so mfs mounts the DBFS on top of the dead mount,
# and the dead one outlives even a clean stop. Expected: after the restart,
# exactly one mount at the mount point; after a clean stop, none.
# Fails until mfs detects dead mounts without trusting cached attributes.
. "$(dirname "$0")/../integration/mfs/lib.sh"

M=$T/mfs
start_manager "$M"
mkdir -p "$T/mp"
xset mount "name=a,store=$T/s,mountpoint=$T/mp,create" || fail "mount: $(xget error)"
stat "$T/mp" >/dev/null # the root's attributes are now in the kernel's cache
kill -KILL $MPID
wait $MPID 2>/dev/null
stat "$T/mp" >/dev/null 2>&1 && ok "stat of the dead mount point still succeeds (cached)"

"$MFS" -f -o "state=$T/state" "$M" >>"$T/mfs.log" 2>&1 &
MPID=$!
PIDS="$PIDS $MPID"
wait_for 10 sh -c "getfattr --only-values -n user.mfs.list '$M' 2>/dev/null | grep -q 'name=a,state=mounted'" \
	|| fail "a not mounted again: $(xget list)"
n=$(awk -v m="$T/mp" '$5 == m' /proc/self/mountinfo | wc -l)
[ "$n" = 1 ] && ok "one mount at the mount point" || fail "$n mounts at $T/mp after the restart (stacked on the dead one)"
stop_pid $MPID
n=$(awk -v m="$T/mp" '$5 == m' /proc/self/mountinfo | wc -l)
[ "$n" = 0 ] && ok "nothing left after a clean stop" || fail "$n mounts left at $T/mp after a clean stop"
