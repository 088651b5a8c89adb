#!/bin/sh
# DBFS quotas: -o quota_bytes=8M gives EDQUOT once 8 MiB are used, and
# -o quota_inodes=100 gives EDQUOT at the 100th inode; freeing makes room.
. "$(dirname "$0")/lib.sh"
FILL=$(realpath "$1") # meson may pass a path relative to the build dir
need_dbfs
fs_mount quota_bytes=8M
"$FILL" "$MNT" "$OUT" bytes EDQUOT 16
mfs_stop || die "unclean unmount"

# Usage is remembered across mounts: 6 MiB written under an 8 MiB quota,
# then after a remount only about 2 MiB more fit.
rm -rf "${STORE:?}"/*
mfs_start quota_bytes=8M
head -c $((6 * 1024 * 1024)) /dev/urandom >"$MNT/six" || die "6 MiB under an 8 MiB quota failed"
fs_remount quota_bytes=8M
if dd if=/dev/urandom of="$MNT/four" bs=1M count=4 iflag=fullblock conv=fsync status=none 2>"$T/dd.err"; then
	die "4 more MiB fit after a remount: the 6 MiB already used were forgotten"
fi
grep -q "Disk quota exceeded" "$T/dd.err" || die "expected EDQUOT, got: $(cat "$T/dd.err")"
mfs_stop || die "unclean unmount"

rm -rf "${STORE:?}"/* # a fresh store for the inode quota
mfs_start quota_inodes=100
"$FILL" "$MNT" "$OUT" inodes EDQUOT 100
