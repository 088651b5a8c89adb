#!/bin/sh
# rsync -aHAX round trip: source -> mount -> back outside; all equal, and a
# second rsync finds nothing to transfer (times, modes, xattrs, ACLs kept).
. "$(dirname "$0")/lib.sh"
need_prog rsync getfattr setfattr setfacl getfacl
fs_mount
make_tree "$OUT/src"
setfacl -m u:65534:rw "$OUT/src/a/b/hello.txt"
setfacl -d -m g:65534:rx "$OUT/src/a/b/c"
rsync -aHAX "$OUT/src/" "$MNT/r/" || die "rsync into the mount failed"
same_tree "$OUT/src" "$MNT/r"
acl_manifest "$OUT/src" >"$T/acl.a"
acl_manifest "$MNT/r" >"$T/acl.b"
diff -u "$T/acl.a" "$T/acl.b" >&2 || die "ACLs differ after rsync into the mount"
grep -q '^user:nobody:rw-' "$T/acl.b" || die "ACL manifest lacks the named entry (manifest broken)"
[ "$(stat -c %i "$MNT/r/a/random.bin")" = "$(stat -c %i "$MNT/r/a/b/c/hardlink.bin")" ] ||
	die "rsync -H: hard link not preserved on the mount"
changes=$(rsync -aHAXi --dry-run "$OUT/src/" "$MNT/r/")
[ -z "$changes" ] || die "second rsync wants to transfer: $changes"
rsync -aHAX "$MNT/r/" "$OUT/back/" || die "rsync out of the mount failed"
same_tree "$OUT/src" "$OUT/back"
# Changes propagate: modify, delete, add on the source and sync again.
printf 'changed\n' >"$OUT/src/a/b/hello.txt"
rm "$OUT/src/x/f7"
printf 'new\n' >"$OUT/src/x/new"
rsync -aHAX --delete "$OUT/src/" "$MNT/r/" || die "incremental rsync failed"
same_tree "$OUT/src" "$MNT/r"
fs_remount
same_tree "$OUT/src" "$MNT/r"
acl_manifest "$MNT/r" >"$T/acl.c"
acl_manifest "$OUT/src" >"$T/acl.a"
diff -u "$T/acl.a" "$T/acl.c" >&2 || die "ACLs differ after remount"
log "ok - rsync -aHAX round trip"
