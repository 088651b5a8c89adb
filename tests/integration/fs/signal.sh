#!/bin/sh
# mfs stops cleanly on SIGTERM: it unmounts, exits 0, and the data written
# before is there at the next mount.
. "$(dirname "$0")/lib.sh"
need_dbfs
fs_mount
head -c 1000000 /dev/urandom >"$MNT/f"
sum=$(sha256sum <"$MNT/f")
kill -TERM "$MFS_PID"
wait_for mount_gone || die "still mounted 10 s after SIGTERM"
wait_for mfs_gone || die "mfs still running 10 s after SIGTERM"
wait "$MFS_PID" && rc=0 || rc=$?
MFS_PID=""
[ "$rc" -eq 0 ] || die "mfs exited with status $rc after SIGTERM"
mfs_start
[ "$(sha256sum <"$MNT/f")" = "$sum" ] || die "data lost across SIGTERM"
log "ok - SIGTERM"
