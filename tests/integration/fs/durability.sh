#!/bin/sh
# Every durability mode mounts, works and keeps fsynced data across a
# remount; an unknown mode is refused.
. "$(dirname "$0")/lib.sh"
need_dbfs
fs_mount
for mode in none normal full; do
	mfs_stop || die "unclean unmount"
	rm -rf "${STORE:?}"/*
	mfs_start "durability=$mode"
	mkdir "$MNT/d"
	head -c 3000000 /dev/urandom >"$MNT/d/data"
	printf 'small\n' >"$MNT/d/small"
	ln -s data "$MNT/d/link"
	sync "$MNT/d/data" "$MNT/d/small"
	want=$(cd "$MNT/d" && sha256sum data small && readlink link)
	fs_remount "durability=$mode"
	got=$(cd "$MNT/d" && sha256sum data small && readlink link) || die "$mode: files missing after remount"
	[ "$got" = "$want" ] || die "durability=$mode: data differs after remount"
	log "ok - durability=$mode"
done
mfs_stop || die "unclean unmount"
mfs_refuses "given durability=bogus" "create,durability=bogus"
