#!/bin/sh
# tar with --xattrs: archive a tree into the mount, extract it on the mount,
# archive it from the mount and extract outside; all copies equal the source.
. "$(dirname "$0")/lib.sh"
need_prog tar getfattr setfattr
fs_mount
TAR="tar --xattrs --xattrs-include=* --acls --numeric-owner --sparse"
make_tree "$OUT/src"
$TAR -cpf "$MNT/a.tar" -C "$OUT/src" . || die "tar create into the mount failed"
mkdir "$MNT/x"
$TAR -xpf "$MNT/a.tar" -C "$MNT/x" || die "tar extract on the mount failed"
same_tree "$OUT/src" "$MNT/x"
$TAR -cpf "$OUT/b.tar" -C "$MNT/x" . || die "tar create from the mount failed"
mkdir "$OUT/y"
$TAR -xpf "$OUT/b.tar" -C "$OUT/y" || die "tar extract of the mount's archive failed"
same_tree "$OUT/src" "$OUT/y"
# tar's own comparison of the archive with the extracted tree.
(cd "$MNT/x" && $TAR -dpf "$MNT/a.tar") || die "tar --diff reports differences"
log "ok - tar round trip"
