#!/bin/sh
# A slow disk under one DBFS holds no control command (mfs/flusher.h): the
# commit_interval durable point of DBFS "slow" is stuck in its device flush
# (tests/fault/eio_shim.c holds every flush of a file under $FAULT_DIR while
# $FAULT_DIR/slow exists), and meanwhile a config of another DBFS, a mount,
# an unmount and a sync of another DBFS are answered; a sync of "slow"
# waits for a durable point after the flush, and is answered once it ends.
# Usage: t_slowflush.sh PATH-TO-mfs PATH-TO-eio_shim.so
SHIM=$2
. "$(dirname "$0")/../integration/mfs/lib.sh"
[ -f "$SHIM" ] || { echo "no shim $SHIM" >&2; exit 2; }

export FAULT_DIR="$T/faulty"
mkdir -p "$FAULT_DIR" "$T/mslow" "$T/mfast" "$T/mthird"
M=$T/mgr
shim_mfs "$SHIM"
MFS=$T/mfs-shim start_manager "$M"
release() { rm -f "$FAULT_DIR/slow"; }
trap 'rc=$?; release; (exit $rc); cleanup' EXIT
[ "$(stat -f -c %T "$T")" != tmpfs ] || { echo "SKIP: $T is in memory: no durable points"; exit 77; }

# "slow": a durable point at every tick once something changed
xset mount "name=slow,store=$FAULT_DIR/store,mountpoint=$T/mslow,create,commit_interval=0.001" ||
	{ fail "mount slow: $(cat "$T/xset.err")"; exit 1; }
xset mount "name=fast,store=$T/sfast,mountpoint=$T/mfast,create,commit_interval=3600" ||
	{ fail "mount fast: $(cat "$T/xset.err")"; exit 1; }


touch "$FAULT_DIR/slow"
echo change >"$T/mslow/f" || fail "write to slow"
wait_for 20 test -e "$FAULT_DIR/stuck" && ok "the tick's flush of slow is held" ||
	{ fail "no flush of slow was held"; exit 1; }

bg config setfattr -n user.mfs.config -v "name=fast,iops=1000" "$M"
wait_for 10 done_ok config && ok "config of fast answered while slow flushes" ||
	fail "config of fast not answered while slow flushes: $(cat "$T/config.out" 2>/dev/null)"
bg mount setfattr -n user.mfs.mount -v "name=third,store=$T/sthird,mountpoint=$T/mthird,create" "$M"
wait_for 10 done_ok mount && ok "mount answered while slow flushes" ||
	fail "mount not answered while slow flushes: $(cat "$T/mount.out" 2>/dev/null)"
echo x >"$T/mfast/f" || fail "write to fast"
bg syncfast setfattr -n user.mfs.sync -v fast "$M"
wait_for 10 done_ok syncfast && ok "sync of fast answered while slow flushes" ||
	fail "sync of fast not answered while slow flushes: $(cat "$T/syncfast.out" 2>/dev/null)"
bg unmount setfattr -n user.mfs.unmount -v third "$M"
wait_for 10 done_ok unmount && ok "unmount answered while slow flushes" ||
	fail "unmount not answered while slow flushes: $(cat "$T/unmount.out" 2>/dev/null)"

# a sync of slow itself waits for the disk, and then for a point of its own
echo more >>"$T/mslow/f" || fail "write to slow"
bg syncslow setfattr -n user.mfs.sync -v slow "$M"
sleep 1
[ -f "$T/syncslow.rc" ] && fail "sync of slow answered while its flush is held: $(cat "$T/syncslow.rc")"
release
wait_for 20 done_ok syncslow && ok "sync of slow answered after its flush" ||
	fail "sync of slow: $(cat "$T/syncslow.rc" 2>/dev/null) $(cat "$T/syncslow.out" 2>/dev/null)"
s=$(xget stats.slow)
printf '%s\n' "$s" | grep -qx "unsynced_bytes=0" && ok "slow has nothing waiting after its sync" ||
	fail "slow after sync: $(printf '%s\n' "$s" | grep unsynced)"

xset unmount slow || fail "unmount slow: $(cat "$T/xset.err")"
xset unmount fast || fail "unmount fast: $(cat "$T/xset.err")"
stop_pid "$MPID" || fail "mfs exit"
[ $FAILS = 0 ]
