#!/bin/sh
# A 9 GB file on a full store (DBFS, store on a 9 GiB tmpfs), truncated to
# nothing, then a hole punched in another full one: each frees more pages
# than the space reserve holds free-list pages for (8 bytes a page), so
# they run in pieces (dbfs_op_free_piece; the truncate's, in the
# background: dbfs/trim.c). In one transaction, LMDB wrote
# past the reserve into unallocated pages of the map and mfs died of
# SIGBUS. The daemon must live, the space come back, the store stay
# consistent. Slow suite: it writes 18 GB.
. "$(dirname "$0")/lib.sh"
need_root
need_dbfs
need_prog fallocate
STORE_SIZE=9g
fs_mount
fill() { # fill FILE until the store is full (ENOSPC)
	if tr '\0' x </dev/zero | dd of="$1" bs=1M iflag=fullblock 2>"$T/dd.err"; then
		die "filling $1 never ran out of space"
	fi
	grep -q 'No space left' "$T/dd.err" || die "filling $1: $(tail -1 "$T/dd.err")"
	size=$(stat -c %s "$1")
	[ "$size" -gt $((8 * 1024 * 1024 * 1024)) ] || die "only $size bytes fit"
}
fill "$MNT/big"
truncate -s 1000 "$MNT/big" || die "truncate on a full store failed"
mfs_alive || die "mfs died truncating a full store"
[ "$(stat -c %s "$MNT/big")" = 1000 ] || die "size after truncate: $(stat -c %s "$MNT/big")"
[ "$(head -c 1000 "$MNT/big" | tr -d x | wc -c)" = 0 ] || die "the 1000 bytes left changed"
log "ok - a full store's 9 GB file truncated to 1000 bytes"
rm "$MNT/big"
# the 9 GB went to the background reclaim (dbfs/trim.c, reclaim.c): the
# store is full until it is done
space_back() { [ "$(stat -f -c '%f %S' "$MNT" | awk '{ print int($1 * $2 / 1048576) }')" -ge 8192 ]; }
POLLS=6000 wait_for space_back || die "the space of the truncated file did not come back"
fill "$MNT/big2"
fallocate -p -o 4096 -l $((size - 8192)) "$MNT/big2" || die "punch on a full store failed"
mfs_alive || die "mfs died punching a hole on a full store"
[ "$(stat -c %s "$MNT/big2")" = "$size" ] || die "size changed by the punch"
used=$(($(stat -c %b "$MNT/big2") * 512))
[ "$used" -lt $((1024 * 1024)) ] || die "after the punch the file still holds $used bytes"
log "ok - a hole over a full store's 9 GB file"
head -c 100000000 /dev/urandom >"$T/ref"
cp "$T/ref" "$MNT/after" && cmp -s "$T/ref" "$MNT/after" || die "writes fail after the space came back"
rm -f "$T/ref"
fs_remount
[ "$(stat -c %s "$MNT/after")" = 100000000 ] || die "after a remount"
log "ok - the store takes writes again and mounts clean (fsck)"
