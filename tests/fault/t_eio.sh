#!/bin/sh
# An I/O error on a store write (tests/fault/eio_shim.c, LD_PRELOADed into
# mfs: the store of DBFS "bad" starts failing its writes with EIO when
# $FAULT_DIR/eio appears): the operation that meets it fails with EIO, "bad"
# goes read-only (status read_only=io-error with the reason; later writes
# EROFS, reads go on), and "good", served by the same mfs, keeps serving.
# Usage: t_eio.sh PATH-TO-mfs PATH-TO-eio_shim.so
SHIM=$2
. "$(dirname "$0")/../integration/mfs/lib.sh"
[ -f "$SHIM" ] || { echo "no shim $SHIM" >&2; exit 2; }

export FAULT_DIR="$T/faulty"
mkdir -p "$FAULT_DIR" "$T/mbad" "$T/mgood"
M=$T/mgr
shim_mfs "$SHIM"
MFS=$T/mfs-shim start_manager "$M"
xset mount "name=bad,store=$FAULT_DIR/store,mountpoint=$T/mbad,create" ||
	{ fail "mount bad: $(cat "$T/xset.err")"; exit 1; }
xset mount "name=good,store=$T/sgood,mountpoint=$T/mgood,create" ||
	{ fail "mount good: $(cat "$T/xset.err")"; exit 1; }
echo before >"$T/mbad/kept" && echo one >"$T/mgood/one" && ok "both DBFSs write" ||
	fail "writes before the fault"
grep -q "read_only" "$M/bad/status" && fail "bad read-only before any fault: $(cat "$M/bad/status")"

touch "$FAULT_DIR/eio"
err=$(mkdir "$T/mbad/new" 2>&1); rc=$?
case "$rc:$err" in
0:*) fail "mkdir on the failing store succeeded" ;;
*"Input/output error"*) ok "the operation that meets the error gets EIO" ;;
*) fail "mkdir on the failing store: $err" ;;
esac
wait_for 10 grep -q "^read_only=io-error" "$M/bad/status" &&
	ok "status: $(grep -E '^(state|read_only|io_error)=' "$M/bad/status" | tr '\n' ' ')" ||
	fail "bad/status: $(cat "$M/bad/status")"
xget dbfs.bad | grep -q "^read_only=io-error" && xget dbfs.bad | grep -q "^io_error=commit failed" &&
	ok "user.mfs.dbfs.bad says so" || fail "user.mfs.dbfs.bad: $(xget dbfs.bad)"
grep -q "read_only" "$M/good/status" && fail "good read-only too: $(cat "$M/good/status")"
xget list | grep -q "^name=bad,state=mounted,read_only=io-error," &&
	! xget list | grep "^name=good," | grep -q read_only && ok "user.mfs.list says so" ||
	fail "user.mfs.list: $(xget list)"

# the store is read-only from now on, even once the disk works again
rm -f "$FAULT_DIR/eio"
for op in "touch $T/mbad/t" "mkdir $T/mbad/d" "rm $T/mbad/kept" "setfattr -n user.x -v 1 $T/mbad/kept"; do
	err=$($op 2>&1) && fail "$op succeeded on the read-only store" || case "$err" in
	*"Read-only file system"*) ok "EROFS: $op" ;;
	*) fail "$op: $err" ;;
	esac
done
[ "$(cat "$T/mbad/kept")" = before ] && ok "reads go on" || fail "cannot read the failed store"

echo two >"$T/mgood/two" && [ "$(cat "$T/mgood/two")" = two ] && mkdir "$T/mgood/dir" &&
	rm "$T/mgood/one" && ok "good keeps serving" || fail "good stopped serving"
grep -q "^state=mounted" "$M/good/status" || fail "good: $(cat "$M/good/status")"

# unmount and mount again: a fresh open of the (now working) store is healthy
xset unmount bad || fail "unmount bad: $(cat "$T/xset.err")"
xset mount "name=bad" || fail "re-mount bad: $(cat "$T/xset.err")"
[ "$(cat "$T/mbad/kept")" = before ] && echo after >"$T/mbad/new" && ok "re-mounted bad is writable" ||
	fail "re-mounted bad"
grep -q "read_only" "$M/bad/status" && fail "re-mounted bad still read-only"
[ $FAILS = 0 ]
