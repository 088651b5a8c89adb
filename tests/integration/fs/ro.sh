#!/bin/sh
# A DBFS mounted read-only (-o ro): everything reads, nothing writes (EROFS).
. "$(dirname "$0")/lib.sh"
need_dbfs
need_prog setfattr getfattr
fs_mount
mkdir "$MNT/d"
printf 'data\n' >"$MNT/d/f"
setfattr -n user.x -v 1 "$MNT/d/f"
fs_remount ro
[ "$(cat "$MNT/d/f")" = data ] || die "cannot read on a read-only mount"
[ "$(getfattr --only-values -n user.x "$MNT/d/f")" = 1 ] || die "cannot read an xattr"
expect_erofs() {
	if out=$("$@" 2>&1); then die "succeeded on a read-only mount: $*"; fi
	case "$out" in
	*"Read-only file system"*) ;;
	*) die "expected EROFS from '$*', got: $out" ;;
	esac
}
expect_erofs sh -c "printf x >>'$MNT/d/f'"
expect_erofs touch "$MNT/d/new"
expect_erofs mkdir "$MNT/d/sub"
expect_erofs rm "$MNT/d/f"
expect_erofs mv "$MNT/d/f" "$MNT/d/g"
expect_erofs chmod 600 "$MNT/d/f"
expect_erofs setfattr -n user.y -v 2 "$MNT/d/f"
expect_erofs ln -s x "$MNT/d/l"
expect_erofs truncate -s 0 "$MNT/d/f"
[ "$(cat "$MNT/d/f")" = data ] || die "data changed on a read-only mount"
log "ok - read-only mount"
