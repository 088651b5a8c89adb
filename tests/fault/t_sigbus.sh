#!/bin/sh
# A user truncates their own store's data.mdb (or lock.mdb) while it is
# mounted (issue 15). LMDB maps both files, so the next access to a page
# past the new end of file is a SIGBUS; before the guard (dbfs/guard.c) it
# killed mfs and with it every other user's DBFS. Now: the request that
# meets it gets EIO, that DBFS answers EIO from then on (status
# read_only=io-error, with the reason), the others keep serving, and the
# lost one unmounts and the manager stops cleanly. A store cut while mfs
# opens it (tests/fault/cut_shim.c, LD_PRELOADed: at dbfs_open's first
# transaction) fails that mount with EIO, on the manager's own thread.
# Usage: t_sigbus.sh PATH-TO-mfs PATH-TO-cut_shim.so
. "$(dirname "$0")/../integration/mfs/lib.sh"
SHIM=$2
[ -f "$SHIM" ] || { echo "no shim $SHIM" >&2; exit 2; }

command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
U=65534
as_user() { setpriv --reuid=$U --regid=$U --clear-groups "$@"; }
uset() { as_user setfattr -n "user.mfs.$1" -v "$2" "$M" 2>/dev/null; }
uerr() { as_user getfattr --only-values -n user.mfs.error "$M" 2>/dev/null; }
alive() { kill -0 "$MPID" 2>/dev/null && ! is_dead "$MPID"; }
# eio CMD...: run as the user, bounded; must fail with EIO
eio() {
	err=$(as_user timeout 60 "$@" 2>&1) && { fail "'$*' succeeded on the truncated store"; return; }
	case "$err" in
	*"Input/output error"*) ok "EIO: $*" ;;
	*) fail "'$*': $err" ;;
	esac
}

chmod 755 "$T"
M=$T/mfs
# A SIGBUS inside mdb_txn_begin leaks the transaction LMDB was making (it
# returns no handle to it: dbfs/guard.h); the sanitizer build is told so.
echo "leak:mdb_txn_begin" >"$T/lsan.supp"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$T/lsan.supp"
export FAULT_DIR="$T/u/s"
shim_mfs "$SHIM"
MFS=$T/mfs-shim start_manager "$M" "allow_other"
mkdir -p "$T/u/mp1" "$T/u/mp2" "$T/u/mp3" "$T/u/s" "$T/rmp"
chown -R $U:$U "$T/u"

# the user's two DBFSs and root's one, with data on each
uset mount "name=u1,store=$T/u/s/1,mountpoint=$T/u/mp1,create" || fail "u1: $(uerr)"
uset mount "name=u2,store=$T/u/s/2,mountpoint=$T/u/mp2,create" || fail "u2: $(uerr)"
xset mount "name=r,store=$T/sr,mountpoint=$T/rmp,create" || fail "r: $(cat "$T/xset.err")"
for d in "$T/u/mp1" "$T/u/mp2"; do
	as_user sh -c "mkdir $d/dir && head -c 300000 /dev/urandom >$d/dir/big && echo small >$d/f" ||
		fail "user data on $d"
done
echo root >"$T/rmp/f" && head -c 300000 /dev/urandom >"$T/rmp/big" || fail "root data"
# these mounts and their stores' files only, not every file system
for d in "$T/u/mp1" "$T/u/mp2" "$T/rmp"; do sync -f "$d"; done
sync "$T"/u/s/*/data.mdb "$T/sr/data.mdb"
[ -O "$T/u/s/1/data.mdb" ] && fail "u1's store belongs to root: the test would prove nothing"
# drop what the kernel caches of u1's files, so that they are read from the map
echo 3 >/proc/sys/vm/drop_caches

# 1. data.mdb cut to nothing: every page of the map is gone, the meta pages too
as_user truncate -s 0 "$T/u/s/1/data.mdb" || fail "truncate u1's data.mdb"
eio cat "$T/u/mp1/dir/big"
alive && ok "mfs survives the SIGBUS" || { fail "mfs died: $(tail -5 "$T/mfs.log")"; exit 1; }
eio ls "$T/u/mp1/dir"
eio sh -c "echo x >$T/u/mp1/new"
eio stat "$T/u/mp1/never-looked-up"
alive || { fail "mfs died later: $(tail -5 "$T/mfs.log")"; exit 1; }
wait_for 10 grep -q "^read_only=io-error" "$M/u1/status" &&
	grep -q "^io_error=.*data.mdb.*truncated" "$M/u1/status" &&
	ok "status: $(grep -E '^(read_only|io_error)=' "$M/u1/status" | tr '\n' ' ')" ||
	fail "u1/status: $(cat "$M/u1/status")"
wait_for 10 grep -q "SIGBUS" "$T/mfs.log" && ok "the log says so" || fail "no SIGBUS line in the log"

# 2. the others keep serving, reads and writes
[ "$(cat "$T/rmp/f")" = root ] && cmp -s "$T/rmp/big" "$T/rmp/big" && echo more >"$T/rmp/g" &&
	mkdir "$T/rmp/d" && rm "$T/rmp/g" && ok "root's DBFS keeps serving" ||
	fail "root's DBFS stopped serving"
as_user sh -c "[ \"\$(cat $T/u/mp2/f)\" = small ] && cat $T/u/mp2/dir/big >/dev/null &&
	echo y >$T/u/mp2/y && rm $T/u/mp2/y" && ok "the user's other DBFS keeps serving" ||
	fail "u2 stopped serving"
grep -q "read_only" "$M/u2/status" && fail "u2 read-only too: $(cat "$M/u2/status")"
grep -q "read_only" "$M/r/status" && fail "r read-only too"

# 3. lock.mdb cut: the reader table is gone
as_user truncate -s 0 "$T/u/s/2/lock.mdb" || fail "truncate u2's lock.mdb"
eio cat "$T/u/mp2/dir/big"
alive && ok "mfs survives a truncated lock.mdb" || { fail "mfs died: $(tail -5 "$T/mfs.log")"; exit 1; }
wait_for 10 grep -q "^io_error=.*lock.mdb.*truncated" "$M/u2/status" &&
	ok "u2 status: $(grep -E '^io_error=' "$M/u2/status")" || fail "u2/status: $(cat "$M/u2/status")"
[ "$(cat "$T/rmp/f")" = root ] && echo again >"$T/rmp/h" && ok "root's DBFS still serves" ||
	fail "root's DBFS stopped serving after lock.mdb"

# 4. the lost DBFSs unmount, mfs stays up; a clean stop exits 0
uset unmount u1 || fail "unmount u1: $(uerr)"
uset unmount u2 || fail "unmount u2: $(uerr)"
not_mounted "$T/u/mp1" && not_mounted "$T/u/mp2" && ok "the lost DBFSs unmount" ||
	fail "lost DBFSs still mounted"
alive || fail "mfs died at unmount: $(tail -5 "$T/mfs.log")"
[ "$(cat "$T/rmp/f")" = root ] || fail "root's DBFS after the unmounts"

# 5. the store cut while mfs opens it, on the manager's thread
uset mount "name=u3,store=$T/u/s/3,mountpoint=$T/u/mp3,create" &&
	as_user sh -c "echo three >$T/u/mp3/f" && uset unmount u3 || fail "u3: $(uerr)"
touch "$T/u/s/cut"
if uset mount "name=u3"; then
	fail "the mount of a store cut while it opened succeeded"
else
	case "$(uerr)" in
	"EIO "*"changed size while it was opened"*) ok "refused: $(uerr | head -1)" ;;
	*) fail "mount of the cut store: $(uerr)" ;;
	esac
fi
[ -e "$T/u/s/cut" ] && fail "the shim did not cut the store"
alive && ok "mfs survives a SIGBUS on its control thread" ||
	{ fail "mfs died opening the cut store: $(tail -5 "$T/mfs.log")"; exit 1; }
not_mounted "$T/u/mp3" || fail "the cut store got mounted"
[ "$(cat "$T/rmp/f")" = root ] && echo after >"$T/rmp/i" && ok "root's DBFS still serves" ||
	fail "root's DBFS after the cut open"
xset unmount r || fail "unmount r"
stop_pid "$MPID" && ok "clean stop" || fail "mfs exit status $? at stop: $(tail -5 "$T/mfs.log")"
[ $FAILS = 0 ]
