#!/bin/sh
# The registry: after SIGKILL the stale mounts ("transport endpoint is not
# connected") are cleaned and every DBFS that was mounted is mounted again,
# with its data and configuration; an unmounted one stays unmounted; one
# whose store vanished is reported failed with a reason.
. "$(dirname "$0")/lib.sh"

M=$T/mfs
start_manager "$M"
for n in a b c d; do
	mkdir -p "$T/m$n"
	xset mount "name=$n,store=$T/s$n,mountpoint=$T/m$n,create,quota_inodes=1000" \
		|| fail "mount $n: $(xget error)"
	echo "data $n" >"$T/m$n/f"
done
xset config "name=b,iops=5000" || fail "config b"
xset unmount c || fail "unmount c"
for n in a b d; do sync -f "$T/m$n"; done # these only, not every file system
kill -KILL $MPID
wait $MPID 2>/dev/null
stat "$T/ma" >/dev/null 2>"$T/stat.err" && fail "a not stale after SIGKILL"
# ENOTCONN, or ECONNABORTED / ECANCELED while the kernel still tears down
# the server's io_uring queues (mfs/uring.h)
grep -q -e "not connected" -e "connection abort" -e "canceled" "$T/stat.err" && ok "stale mount after SIGKILL" \
	|| fail "$(cat "$T/stat.err")"
rm -rf "$T/sd"

"$MFS" -f -o "state=$T/state" "$M" >>"$T/mfs.log" 2>&1 &
MPID=$!
PIDS="$PIDS $MPID"
wait_for 10 sh -c "getfattr -n user.mfs.status '$M' >/dev/null" || fail "manager did not come back"
mounted() { xget list | grep -q "name=$1,state=mounted"; }
for n in a b; do
	wait_for 20 mounted $n && ok "$n mounted again" || fail "$n: $(xget list)"
	[ "$(cat "$T/m$n/f")" = "data $n" ] && ok "$n data" || fail "$n data"
done
xget list | grep -q "name=c,state=unmounted" && ok "c stays unmounted" || fail "c: $(xget list)"
not_mounted "$T/mc" || fail "c mounted"
wait_for 20 sh -c "getfattr --only-values -n user.mfs.list '$M' | grep -q 'name=d,state=failed'" \
	&& ok "d failed: $(xget list | grep name=d)" || fail "d: $(xget list)"
xget stats.b | grep -q "^iops_limit=5000" && ok "b kept its config" || fail "b config"
xget stats.a | grep -q "^quota_inodes=1000" && ok "a kept its quota" || fail "a quota"
n=$(awk -v t="$T" 'index($5, t) == 1' /proc/self/mountinfo | wc -l)
[ "$n" = 3 ] && ok "exactly manager, a, b mounted" || fail "$n mounts under $T"
# a second mfs on the same state directory is refused
mkdir -p "$T/mfs2"
"$MFS" -f -o "state=$T/state" "$T/mfs2" >"$T/second.log" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "in use" "$T/second.log" && ok "state directory locked" \
	|| fail "second mfs on one state dir: $rc $(cat "$T/second.log")"
stop_pid $MPID || fail "exit"
