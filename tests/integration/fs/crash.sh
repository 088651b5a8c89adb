#!/bin/sh
# Acknowledged operations survive a daemon crash: after tar has extracted a
# tree and the files are closed (data flushed to mfs) and renames and removals
# have returned, mfs is killed with SIGKILL; the next mount shows exactly the
# same tree, and dbfs-fsck finds the store consistent.
. "$(dirname "$0")/lib.sh"
need_dbfs
need_root
need_prog tar getfattr setfattr
fs_mount
make_tree "$OUT/src"
mkdir "$MNT/t"
tar --xattrs --xattrs-include='*' --numeric-owner -cpf - -C "$OUT/src" . |
	tar --xattrs --xattrs-include='*' --numeric-owner -xpf - -C "$MNT/t" || die "tar into the mount failed"
mv "$MNT/t/a/b/hello.txt" "$MNT/t/x/hello-moved.txt"
mv "$OUT/src/a/b/hello.txt" "$OUT/src/x/hello-moved.txt"
rm "$MNT/t/x/f3" "$OUT/src/x/f3"
mkdir "$MNT/t/late" "$OUT/src/late"
printf 'written last\n' >"$MNT/t/late/file"
printf 'written last\n' >"$OUT/src/late/file"
touch -d '2015-05-05 05:05:05' "$MNT/t/late/file" "$OUT/src/late/file" "$MNT/t/late" "$OUT/src/late"
# The directories changed above were changed at two moments, once in each
# tree: a second may have begun in between. Their times are set alike.
touch -d '2015-05-05 05:05:05' "$MNT/t" "$OUT/src" "$MNT/t/x" "$OUT/src/x" "$MNT/t/a/b" "$OUT/src/a/b"
tree_manifest "$MNT/t" >"$T/before"
mfs_crash
if [ -n "${DBFS_FSCK:-}" ]; then
	"$DBFS_FSCK" --allow-orphans "$STORE" >"$T/fsck.log" 2>&1 ||
		{ cat "$T/fsck.log" >&2; die "dbfs-fsck finds the crashed store inconsistent"; }
fi
mfs_start
tree_manifest "$MNT/t" >"$T/after"
diff -u "$T/before" "$T/after" >&2 || die "the tree changed across a daemon crash"
same_tree "$OUT/src" "$MNT/t"
log "ok - acknowledged operations survive SIGKILL of mfs"
