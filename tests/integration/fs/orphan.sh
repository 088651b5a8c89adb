#!/bin/sh
# DBFS orphan list: a file unlinked while open, when the daemon dies before
# the last close, is reclaimed at the next mount (its inode and its space).
. "$(dirname "$0")/lib.sh"
need_dbfs
need_root
fs_mount
inodes_used() { stat -f -c '%c %d' "$MNT" | awk '{ print $1 - $2 }'; }
# Allocated bytes of the store's data file (the store is on its own tmpfs).
store_bytes() { echo $(($(stat -c '%b * %B' "$STORE/data.mdb"))); }

used0=$(inodes_used)
# Hold the unlinked file open in a background process, then kill the daemon.
exec 3>"$MNT/orphan"
head -c $((24 * 1024 * 1024)) /dev/urandom >&3
sync "$MNT/orphan"
rm "$MNT/orphan"
[ "$(inodes_used)" -eq $((used0 + 1)) ] ||
	die "inodes used: $used0 before, $(inodes_used) with the unlinked open file"
mfs_crash
exec 3>&-
mfs_start
wait_for sh -c "[ \$(stat -f -c '%c %d' '$MNT' | awk '{ print \$1 - \$2 }') -eq $used0 ]" ||
	die "orphan inode not reclaimed: $used0 inodes used before, $(inodes_used) after remount"

# Its 24 MiB must be free again: writing 24 MiB of new data must reuse it
# rather than grow the store's file by that much.
before=$(store_bytes)
head -c $((24 * 1024 * 1024)) /dev/urandom >"$MNT/new"
sync "$MNT/new"
after=$(store_bytes)
grow=$((after - before))
log "store data.mdb: $before bytes before, $after after writing 24 MiB (grew $grow)"
[ "$grow" -lt $((12 * 1024 * 1024)) ] ||
	die "orphan space not reclaimed: the store grew by $grow bytes for 24 MiB of new data"
