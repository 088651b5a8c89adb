#!/bin/sh
# A full disk: with the store on a 32 MiB tmpfs (FS_TARGET=tmpfs: the mount
# itself is a 32 MiB tmpfs), writing until the space runs out gives ENOSPC,
# earlier files stay intact, deleting files makes writes work again, and
# (DBFS) the store still mounts and holds the same data afterwards.
. "$(dirname "$0")/lib.sh"
FILL=$(realpath "$1") # meson may pass a path relative to the build dir
need_root
STORE_SIZE=32m
fs_mount
"$FILL" "$MNT" "$OUT" bytes ENOSPC 64
fs_remount
"$FILL" "$MNT" "$OUT" verify
