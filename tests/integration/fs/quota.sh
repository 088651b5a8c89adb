#!/bin/sh
# DBFS quotas: -o quota_bytes=8M gives EDQUOT once 8 MiB are used, and
# -o quota_inodes=100 gives EDQUOT at the 100th inode; freeing makes room.
. "$(dirname "$0")/lib.sh"
FILL=$(realpath "$1") # meson may pass a path relative to the build dir
need_dbfs
fs_mount quota_bytes=8M
"$FILL" "$MNT" "$OUT" bytes EDQUOT 16
mfs_stop || die "unclean unmount"
rm -rf "$STORE"/* # a fresh store for the inode quota
mfs_start quota_inodes=100
"$FILL" "$MNT" "$OUT" inodes EDQUOT 100
