#!/bin/sh
# DBFS orphan list: a file unlinked while open, when the daemon dies before
# the last close, is reclaimed at the next mount (its inode and its space).
. "$(dirname "$0")/lib.sh"
need_dbfs
need_root
need_prog mdb_stat
fs_mount
inodes_used() { stat -f -c '%c %d' "$MNT" | awk '{ print $1 - $2 }'; }
# Pages LMDB holds (last page + 1 minus the free list); the daemon must be
# stopped.
live_pages() {
	mdb_stat -ef "$STORE" | awk '/Number of pages used/ { u = $NF } /Free pages/ { f = $NF }
		END { if (u == "" || f == "") exit 1; print u - f }'
}

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
crashed_pages=$(live_pages) || die "mdb_stat of the crashed store failed"
mfs_start
wait_for sh -c "[ \$(stat -f -c '%c %d' '$MNT' | awk '{ print \$1 - \$2 }') -eq $used0 ]" ||
	die "orphan inode not reclaimed: $used0 inodes used before, $(inodes_used) after remount"

# Its 24 MiB must be free again (measured inside LMDB, daemon stopped).
psize=$(mdb_stat -e "$STORE" | awk '/Page size/ { print $NF }')
mfs_stop || die "unclean unmount after the reclaiming mount"
after=$(live_pages) || die "mdb_stat gave no page counts"
freed=$(((crashed_pages - after) * psize))
log "live LMDB pages: $crashed_pages after the crash, $after after the next mount (freed $freed bytes)"
[ "$freed" -ge $((20 * 1024 * 1024)) ] ||
	die "orphan space not reclaimed: the next mount freed only $freed bytes of the 24 MiB orphan"
