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

# Durable points (dbfs/durable.c): the records in dbfs.durable and
# dbfs.images move with an fsync, an O_DSYNC write, SIGTERM and an
# unmount, and not with a plain write while commit_interval is far away.
# A store in memory (the tmpfs lib.sh gives it, as root) makes none:
# nothing of it survives a power loss.
# (a point is a record of dbfs.durable, or an imaged one of dbfs.images)
rec() { cat "$STORE/dbfs.durable" "$STORE/dbfs.images" 2>/dev/null | cksum; }
rm -rf "${STORE:?}"/*
if [ "$(stat -f -c %T "$STORE")" = tmpfs ]; then
	mfs_start "durability=normal"
	r0=$(rec)
	printf a >"$MNT/plain"
	sync "$MNT/plain"
	[ "$(rec)" = "$r0" ] || die "a store in memory made a durable point"
	mfs_stop || die "unclean unmount"
fi
MEM_STORE=$STORE
STORE=$(mktemp -d "${DISK_TMPDIR:-/var/tmp}/mfs-durable.XXXXXX")
[ "$(stat -f -c %T "$STORE")" != tmpfs ] || skip "no disk for the store under ${DISK_TMPDIR:-/var/tmp}"
mfs_start "durability=normal,commit_interval=3600"
printf a >"$MNT/plain"
r0=$(rec)
printf b >>"$MNT/plain"
[ "$(rec)" = "$r0" ] || die "a plain write made a durable point"
dd if=/dev/zero of="$MNT/dsync" bs=4k count=1 oflag=dsync 2>/dev/null || die "dd oflag=dsync"
r1=$(rec)
[ "$r1" != "$r0" ] || die "an O_DSYNC write returned before a durable point"
printf c >>"$MNT/plain"
sync "$MNT/plain"
r2=$(rec)
[ "$r2" != "$r1" ] || die "fsync returned before a durable point"
printf d >>"$MNT/plain"
mfs_stop || die "unclean unmount"
r3=$(rec)
[ "$r3" != "$r2" ] || die "unmount left a change not durable"
mfs_start "durability=normal,commit_interval=3600"
printf e >>"$MNT/plain"
kill -TERM "$MFS_PID"
wait_for mfs_gone || die "mfs did not exit on SIGTERM"
wait "$MFS_PID" 2>/dev/null || true
MFS_PID=""
wait_for mount_gone || fusermount3 -u -z "$MNT" 2>/dev/null || true
[ "$(rec)" != "$r3" ] || die "SIGTERM left a change not durable"
rm -rf "${STORE:?}"
STORE=$MEM_STORE
log "ok - durable points at fsync, O_DSYNC, unmount and SIGTERM, none for a plain write"
