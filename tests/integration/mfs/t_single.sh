#!/bin/sh
# The single-DBFS form: mfs -f --dbfs STORE [-o ...] MOUNTPOINT
# mount options, I/O, exit 0 on fusermount3 -u, exit 0 on SIGTERM and SIGINT,
# nothing left mounted; --help and --version.
. "$(dirname "$0")/lib.sh"

"$MFS" --version | grep -q "^mfs [0-9]" && ok "--version" || fail "--version"
"$MFS" --help | grep -q "usage: mfs" && ok "--help" || fail "--help"
"$MFS" --no-such-flag >/dev/null 2>&1; [ $? = 2 ] && ok "bad flag exits 2" || fail "bad flag"

mkdir -p "$T/store" "$T/mnt"
start_single() {
	"$MFS" -f --dbfs "$T/store" -o "$1" "$T/mnt" >>"$T/single.log" 2>&1 &
	SPID=$!
	PIDS="$PIDS $SPID"
	wait_for 10 is_mounted "$T/mnt" || { cat "$T/single.log" >&2; fail "single did not mount"; exit 1; }
}

start_single create,durability=normal
opts=$(awk -v m="$T/mnt" '$5 == m { print $6 " " $NF " " $(NF-1) " " $(NF-2) }' /proc/self/mountinfo)
for want in default_permissions allow_other "dbfs:$T/store" fuse.dbfs; do
	case "$opts" in *"$want"*) ok "mount has $want" ;; *) fail "mount lacks $want: $opts" ;; esac
done
echo hello >"$T/mnt/f" && [ "$(cat "$T/mnt/f")" = hello ] && ok "write/read" || fail "write/read"
# the mount's readahead window is the 1 MiB DBFS offers, not the kernel's 128 KiB
ra=$(cat "/sys/class/bdi/$(mountpoint -d "$T/mnt")/read_ahead_kb")
[ "$ra" = 1024 ] && ok "readahead 1 MiB" || fail "read_ahead_kb is $ra"
threads=$(ls /proc/$SPID/task | wc -l)
fusermount3 -u "$T/mnt" || fail "fusermount3 -u"
wait_for 10 is_dead $SPID || fail "did not exit after unmount"
wait $SPID; rc=$?
[ $rc = 0 ] && ok "exit 0 after fusermount3 -u" || fail "exit $rc after unmount"

start_single durability=full
[ "$(cat "$T/mnt/f")" = hello ] && ok "data persists" || fail "data lost"
stop_pid $SPID; rc=$?
[ $rc = 0 ] && ok "exit 0 on SIGTERM" || fail "exit $rc on SIGTERM"
not_mounted "$T/mnt" && ok "nothing mounted after SIGTERM" || fail "still mounted"

start_single ""
kill -INT $SPID
wait_for 20 is_dead $SPID || fail "no exit on SIGINT"
wait $SPID; rc=$?
[ $rc = 0 ] && ok "exit 0 on SIGINT" || fail "exit $rc on SIGINT"
not_mounted "$T/mnt" || fail "still mounted after SIGINT"

"$MFS" -f --dbfs "$T/store" -o no_such_option "$T/mnt" 2>/dev/null; rc=$?
[ $rc != 0 ] && ok "unknown option refused ($rc)" || fail "unknown option accepted"
"$MFS" -f --dbfs "$T/nostore" "$T/mnt" 2>/dev/null; rc=$?
[ $rc = 1 ] && ok "missing store refused" || fail "missing store: exit $rc"
not_mounted "$T/mnt" || fail "mounted after a refused start"
# create makes a missing store directory (0700), not a missing parent
"$MFS" -f --dbfs "$T/no/parent" -o create "$T/mnt" 2>"$T/noparent.err"; rc=$?
[ $rc = 1 ] && grep -q "cannot create store $T/no/parent: No such file or directory" "$T/noparent.err" &&
	ok "create with a missing parent refused: $(cat "$T/noparent.err")" ||
	fail "missing parent: exit $rc, $(cat "$T/noparent.err")"
"$MFS" -f --dbfs "$T/newstore" -o create "$T/mnt" >>"$T/single.log" 2>&1 &
SPID=$!
PIDS="$PIDS $SPID"
wait_for 10 is_mounted "$T/mnt" && echo x >"$T/mnt/g" && [ "$(cat "$T/mnt/g")" = x ] &&
	ok "create made the store directory" || fail "create did not make $T/newstore"
[ "$(stat -c %a "$T/newstore")" = 700 ] && ok "new store is mode 700" ||
	fail "new store mode $(stat -c %a "$T/newstore")"
stop_pid $SPID || fail "exit status after the new store"
echo "threads while serving: $threads"
