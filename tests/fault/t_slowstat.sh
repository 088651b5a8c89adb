#!/bin/sh
# A slow store read holds no status reader: while dbfs_usage of DBFS "slow"
# is stuck in its fstat of data.mdb (tests/fault/eio_shim.c holds every
# fstat of a file under $FAULT_DIR while $FAULT_DIR/slowstat exists),
# a `list`, a `metrics`, a user.mfs.stats.slow and a slow/stats that read
# it wait for it, but the manager's status (which takes mgr->lock) and a
# mount (the control thread takes it too) are answered meanwhile: they
# read stores outside mgr->lock (mfs_dbfs_pin, manager.h). And while the
# accountant's gauge reader is held there, the usage records of every
# second go on (account_gauges.c). Once the read goes on, both answer
# with the store's figures.
# Usage: t_slowstat.sh PATH-TO-mfs PATH-TO-eio_shim.so
SHIM=$2
. "$(dirname "$0")/../integration/mfs/lib.sh"
[ -f "$SHIM" ] || { echo "no shim $SHIM" >&2; exit 2; }

export FAULT_DIR="$T/faulty"
mkdir -p "$FAULT_DIR" "$T/mslow" "$T/mfast" "$T/mthird"
M=$T/mgr
shim_mfs "$SHIM"
MFS=$T/mfs-shim start_manager "$M"
release() { rm -f "$FAULT_DIR/slowstat"; }
trap 'rc=$?; release; (exit $rc); cleanup' EXIT

xset mount "name=slow,store=$FAULT_DIR/store,mountpoint=$T/mslow,create" ||
	{ fail "mount slow: $(cat "$T/xset.err")"; exit 1; }
xset mount "name=fast,store=$T/sfast,mountpoint=$T/mfast,create" ||
	{ fail "mount fast: $(cat "$T/xset.err")"; exit 1; }
head -c 100000 /dev/zero >"$T/mslow/f" || fail "write to slow"

# held_thread yes|no: a thread of the accountant (its gauge reader, which
# may be held too, pinned, without the lock) is (yes) or another thread
# is (no) held in an fstat of slow's store
held_thread() {
	for f in "$FAULT_DIR"/held.*; do
		[ -e "$f" ] || continue
		c=$(cat "/proc/$MPID/task/${f##*.}/comm" 2>/dev/null) || continue
		case $c in mfs-account | mfs-acct-gauge) a=yes ;; *) a=no ;; esac
		[ "$a" = "$1" ] && return 0
	done
	return 1
}
reader_held() { held_thread no; }

# reader (list or metrics) CMD...: held in slow's store; meanwhile status
# and a mount of a third DBFS are answered
check_reader() {
	r=$1
	shift
	touch "$FAULT_DIR/slowstat"
	bg "$r" "$@"
	wait_for 10 reader_held || { fail "$r did not read slow's store"; release; return; }
	bg status getfattr -n user.mfs.status "$M"
	wait_for 10 done_ok status && ok "status answered while $r reads a slow store" ||
		fail "status not answered while $r reads a slow store (mgr->lock held)"
	bg mount setfattr -n user.mfs.mount -v "name=third,store=$T/sthird,mountpoint=$T/mthird,create" "$M"
	wait_for 10 done_ok mount && ok "mount answered while $r reads a slow store" ||
		fail "mount not answered while $r reads a slow store: $(cat "$T/mount.out" 2>/dev/null)"
	[ -f "$T/$r.rc" ] && fail "$r answered while slow's store read was held"
	release
	wait_for 20 done_ok "$r" && ok "$r answered once the read went on" ||
		fail "$r: $(cat "$T/$r.rc" 2>/dev/null) $(cat "$T/$r.out" 2>/dev/null)"
	wait_for 10 done_ok mount && xset unmount third || fail "unmount third: $(cat "$T/xset.err")"
}

check_reader list getfattr --only-values -n user.mfs.list "$M"
grep "^name=slow,state=mounted," "$T/list.out" | grep -q ",bytes=[1-9][0-9]*,inodes=2$" &&
	ok "list shows slow's usage" || fail "list: $(cat "$T/list.out")"
grep -q "^name=fast,state=mounted,.*,bytes=0,inodes=1$" "$T/list.out" &&
	ok "list shows fast's usage" || fail "list: $(cat "$T/list.out")"

check_reader metrics cat "$M/metrics"
grep -q '^mfs_used_inodes{dbfs="slow"} 2$' "$T/metrics.out" &&
	ok "metrics shows slow's inodes" || fail "metrics: $(grep inodes "$T/metrics.out")"

check_reader stats getfattr --only-values -n user.mfs.stats.slow "$M"
grep -q '^inodes_used=2$' "$T/stats.out" && ok "stats.slow shows slow's inodes" ||
	fail "stats.slow: $(grep inodes "$T/stats.out")"
check_reader statsfile cat "$M/slow/stats"
grep -q '^inodes_used=2$' "$T/statsfile.out" && ok "slow/stats shows slow's inodes" ||
	fail "slow/stats: $(grep inodes "$T/statsfile.out")"

# the accountant reads gauges (every 10 s) in a thread of its own: held in
# slow's store, it holds no usage record of the second, here fast's
touch "$FAULT_DIR/slowstat"
if wait_for 15 held_thread yes; then
	t0=$(date +%s)
	wait_for 10 record_since fast $((t0 + 3)) &&
		ok "usage records go on while the accountant's gauge read is held" ||
		fail "fast's last usage record is $(xget stats.fast | grep ^record_time=), held since $t0"
else
	fail "the accountant did not read slow's store in 15 s"
fi
release

xset unmount slow || fail "unmount slow: $(cat "$T/xset.err")"
xset unmount fast || fail "unmount fast: $(cat "$T/xset.err")"
stop_pid "$MPID" || fail "mfs exit"
[ $FAILS = 0 ]
