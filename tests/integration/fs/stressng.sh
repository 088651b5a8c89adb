#!/bin/sh
# stress-ng's file-system stressors with --verify, one after another, on the
# mount: each hammers a family of system calls (links, renames, locks,
# xattrs, holes, directories, ...) from several angles and checks what it
# reads back. Any stressor that fails or finds wrong data fails the test.
. "$(dirname "$0")/lib.sh"
need_prog stress-ng
fs_mount
STRESSORS="access chdir chmod chown copy-file dentry dir dirdeep dirmany dup fallocate fcntl
filename flock fpunch fsize fstat getdent handle hdd io iomix link locka lockf lockofd mknod
open rename symlink sync-file touch utime xattr"
failed=""
for s in $STRESSORS; do
	mkdir "$MNT/$s" || die "mkdir $s failed"
	if ! stress-ng --"$s" 1 --timeout 1 --verify --temp-path "$MNT/$s" >"$T/$s.log" 2>&1; then
		cat "$T/$s.log" >&2
		failed="$failed $s"
	fi
	rm -rf "${MNT:?}/$s" || die "cannot remove what stressor $s left"
done
[ -z "$failed" ] || die "stress-ng stressors failed:$failed"
# Everything is gone again: only the root directory is left.
[ -z "$(ls -A "$MNT")" ] || die "left behind: $(ls -A "$MNT" | head -5)"
log "ok - stress-ng file-system stressors"
