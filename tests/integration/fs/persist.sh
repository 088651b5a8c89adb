#!/bin/sh
# Everything survives an unmount and a new mount: data, sparse files, hard
# links, symlinks, FIFOs, modes, owners, times, xattrs, ACLs. Compared with
# the tools' own view before and after (tmpfs: no remount, trivially equal).
. "$(dirname "$0")/lib.sh"
need_root
need_prog getfattr setfattr getfacl setfacl
fs_mount
cd "$MNT"
mkdir -p d/e/f
head -c 300000 /dev/urandom >d/data
printf 'text\n' >d/e/text
truncate -s 7000000 d/sparse
printf 'end' >>d/sparse
ln d/data d/e/hardlink
ln -s ../data d/e/sym
mkfifo d/fifo
chmod 4751 d/e/text
chown 1234:5678 d/e/f
setfattr -n user.one -v 1 d/data
setfattr -n trusted.two -v 0x00ff00 d/e
# A 64 KiB value (base64 on the command line: hex would exceed 128 KiB).
setfattr -n user.big -v "0s$(head -c 65536 /dev/urandom | base64 -w0)" d/data
setfacl -m u:65534:rx,g:65534:r d/e/text
setfacl -d -m u:65534:rwx d/e/f
touch -h -d '2001-02-03 04:05:06.789' d/e/sym
touch -d '1999-12-31 23:59:59.123456789' d/e/text
# Data on both sides of the 4 GiB boundary of a sparse file.
printf 'ABCD' | dd of=huge bs=1 seek=$((4 * 1024 * 1024 * 1024 - 2)) conv=notrunc status=none
printf 'END' | dd of=huge bs=1 seek=$((5 * 1024 * 1024 * 1024)) conv=notrunc status=none
# A directory moved to another parent: its ".." must follow after remount.
mkdir -p m1/m2/m3
mv m1/m2 d/e/moved
cd /
manifest() {
	(cd "$MNT" && find . -printf '%p %y %m %U %G %s %n %T@ %l\n' | sort &&
		find . -type f ! -name huge -exec sha256sum {} + | sort &&
		dd if=huge bs=1 skip=$((4 * 1024 * 1024 * 1024 - 3)) count=6 status=none | od -An -c &&
		dd if=huge bs=1 skip=$((5 * 1024 * 1024 * 1024 - 1)) count=10 status=none | od -An -c &&
		find . -print0 | sort -z | xargs -0 getfattr -h -d -m - -e hex 2>/dev/null) &&
		acl_manifest "$MNT"
}
manifest >"$OUT/before"
# Keep an inode-number view for the hard-link check.
ino1=$(stat -c %i "$MNT/d/data")
fs_remount
manifest >"$OUT/after"
diff -u "$OUT/before" "$OUT/after" || die "the tree changed across unmount and mount"
[ "$(stat -c %i "$MNT/d/e/hardlink")" = "$(stat -c %i "$MNT/d/data")" ] ||
	die "hard links no longer share an inode"
[ "$FS_TARGET" != dbfs ] || [ "$(stat -c %i "$MNT/d/data")" = "$ino1" ] ||
	die "inode number changed across remount"
[ "$(stat -c %i "$MNT/d/e/moved/..")" = "$(stat -c %i "$MNT/d/e")" ] ||
	die "'..' of a moved directory is wrong after remount"
[ "$(stat -c %i "$MNT/d/e/moved/m3/..")" = "$(stat -c %i "$MNT/d/e/moved")" ] ||
	die "'..' below a moved directory is wrong after remount"
[ "$(ls -a "$MNT/m1" | tr '\n' ' ')" = ". .. " ] || die "m1 is not empty after remount"
grep -q 'user::rwx' "$OUT/after" || die "getfacl output missing (manifest broken)"
