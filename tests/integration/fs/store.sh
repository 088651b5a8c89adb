#!/bin/sh
# DBFS store opening: a truncated store, one with damaged LMDB meta pages, and
# one with an unknown format version are refused with a message and a
# non-zero exit (no crash, no mount, no silent re-format: the file is left as
# it was); the intact store still mounts with its data afterwards.
. "$(dirname "$0")/lib.sh"
need_dbfs
need_root
need_prog mdb_dump mdb_load
fs_mount
head -c 100000 /dev/urandom >"$MNT/precious"
sum=$(sha256sum <"$MNT/precious")
mfs_stop || die "unclean unmount"
cp -a --sparse=always "$STORE/data.mdb" "$T/good.mdb"

# Size and checksum of the used part of data.mdb (the file may be much
# longer than what LMDB uses: reading all of it is slow).
store_sum() {
	echo "$(stat -c %s "$STORE/data.mdb") $(head -c $((USED_BYTES)) "$STORE/data.mdb" | sha256sum)"
}

check_refused() { # what
	before=$(store_sum)
	mfs_refuses "$1"
	[ "$(store_sum)" = "$before" ] || die "mfs changed a store that is $1"
	cp --sparse=always "$T/good.mdb" "$STORE/data.mdb"
}

# Cut the file in the middle of the pages LMDB has in use (the file may be
# longer than that: cutting free space at its end would not damage it).
used=$(mdb_stat -e "$STORE" | awk '/Number of pages used/ { print $NF }')
psize=$(mdb_stat -e "$STORE" | awk '/Page size/ { print $NF }')
[ -n "$used" ] && [ -n "$psize" ] || die "mdb_stat -e gave no page counts"
USED_BYTES=$((used * psize))
log "data.mdb: $(stat -c %s "$STORE/data.mdb") bytes, $used pages of $psize bytes in use"
truncate -s $((used / 2 * psize)) "$STORE/data.mdb"
check_refused "truncated to half of its used pages"

truncate -s 0 "$STORE/data.mdb"
check_refused "truncated to zero"

# Both LMDB meta pages (the first two pages) overwritten.
head -c 8192 /dev/urandom | dd of="$STORE/data.mdb" conv=notrunc status=none
check_refused "damaged (meta pages)"

# Superblock with an unknown format version: the 4 bytes after the 16-byte
# magic "DBFS-LMDB" set to ff (unknown in either byte order).
mdb_dump -s super "$STORE" >"$T/super.dump" || die "mdb_dump of the super table failed"
magic=$(printf 'DBFS-LMDB' | od -An -tx1 | tr -d ' \n')
awk -v m="$magic" '
	substr($0, 1, 1) == " " && index($0, " " m) == 1 {
		$0 = substr($0, 1, 33) "ffffffff" substr($0, 42)
	}
	{ print }' "$T/super.dump" >"$T/super.bad"
cmp -s "$T/super.dump" "$T/super.bad" && die "could not find the superblock in the dump"
mdb_load -s super -f "$T/super.bad" "$STORE" || die "mdb_load failed"
check_refused "of an unknown format version"

# An unknown option is refused too, before anything is touched.
mfs_refuses "given an unknown option" "create,no_such_option=1"

# The intact store mounts and holds the data.
mfs_start
[ "$(sha256sum <"$MNT/precious")" = "$sum" ] || die "data changed after the refused opens"
log "ok - bad stores refused"
