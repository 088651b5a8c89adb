#!/bin/sh
# A full store (issue 15 point 9), on a 64 MiB file system: the room a
# deleted file frees is usable by the very next create, and statfs tells
# the truth about what a write can get: a 2-byte create fails with ENOSPC
# exactly when f_bavail is 0 (df said 15 MiB free while creates failed).
. "$(dirname "$0")/lib.sh"
need_root
need_dbfs
STORE_SIZE=64m
fs_mount

avail() { stat -f -c %a "$MNT"; }
has_space() { [ "$(avail)" -gt 0 ]; }

# truth NAME: a 2-byte create succeeds if and only if blocks were available.
truth() {
	_a=$(avail)
	if (printf xy >"$MNT/$1") 2>"$T/err"; then
		[ "$_a" -gt 0 ] || die "$1: a create succeeded with 0 blocks available"
	else
		grep -q "No space left" "$T/err" || die "$1: expected ENOSPC, got: $(cat "$T/err")"
		[ "$_a" -eq 0 ] || die "$1: ENOSPC with $_a blocks available"
	fi
}

# Fill the store.
if dd if=/dev/zero of="$MNT/big" bs=1M count=200 conv=fsync status=none 2>"$T/dd.err"; then
	die "200 MiB fit in a 64 MiB store"
fi
grep -q "No space left" "$T/dd.err" || die "expected ENOSPC, got: $(cat "$T/dd.err")"
truth full

# Delete the filler. The kernel forgets its inode asynchronously; once
# statfs counts its room, the next create must get it, the first time.
rm "$MNT/big"
wait_for has_space || die "no space available 10 s after deleting the filler"
printf xy >"$MNT/after-delete" || die "the first create after deleting the filler failed"

# A large file rewritten in place on a full store: statfs stays true.
dd if=/dev/zero of="$MNT/f" bs=1M count=56 conv=fsync status=none 2>/dev/null || true
for i in 1 2 3 4; do
	dd if=/dev/zero of="$MNT/f" bs=1M count=56 conv=notrunc,fsync status=none 2>/dev/null || true
	truth "rewrite$i"
done
rm "$MNT/f"
wait_for has_space || die "no space available 10 s after deleting the rewritten file"
printf xy >"$MNT/after-rewrite" || die "the first create after deleting the rewritten file failed"
log "OK: freed space is usable at once and statfs tells the truth"
