#!/bin/sh
# Usage: run.sh PROGRAM [ARGS...]
# Mount a fresh file system and run PROGRAM MOUNT_DIR OUTSIDE_DIR [ARGS...].
# PROGRAM exits 0 (pass), 1 (fail) or 77 (skip).
. "$(dirname "$0")/lib.sh"
prog=$(realpath "$1") # meson may pass a path relative to the build dir
shift
fs_mount
rc=0
"$prog" "$MNT" "$OUT" "$@" || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
cd /
fs_remount # an unmount must be clean after every test
