#!/bin/sh
# What makes a DBFS durable (mfs.8, DURABILITY): syncfs(2) does not (the
# kernel sends FUSE_SYNCFS to virtiofs only), the sync verb and `mfsctl
# sync` do, and so does an fsync of the mount point's root directory; the
# unmount verb and SIGTERM leave every commit durable before they return.
# "Durable" is checked on the store itself: the newest valid record of
# dbfs.durable, or the newest imaged point of dbfs.images chained to it,
# names LMDB's newest commit (the larger txnid of data.mdb's two meta
# pages).
. "$(dirname "$0")/lib.sh"

[ "$(stat -f -c %T "$T")" != tmpfs ] || { echo "SKIP: $T is in memory: no durable points"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
M=$T/mfs
S=$T/store
D=$T/d
mkdir -p "$D"
start_manager "$M"

# durable STORE: "DURABLE_TXNID LAST_TXNID" (format.h: dbfs_drec version 2,
# dbfs_irec; LMDB's meta)
durable() {
	python3 - "$1" <<'EOF'
import struct, sys
d = sys.argv[1]
rec = open(d + "/dbfs.durable", "rb").read()
best = None
# version 2: slots of 69632 bytes, the sum goes on over the list
# (dbfs_drec_list_sum); a listed record counts here as it is (no reboot)
def page_hash(h, b):
    for i in range(0, len(b) - 7, 8):
        w = struct.unpack_from("<Q", b, i)[0]
        h = ((h ^ w) * 0x9e3779b97f4a7c15) & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 29
    return h ^ (h >> 32)
for slot in (0, 1):
    b = rec[slot * 69632:slot * 69632 + 344]
    if len(b) < 344 or b[:8] != b"DBFSDUR1" or struct.unpack_from("<I", b, 8)[0] != 2:
        continue
    h = 0xcbf29ce484222325
    for c in b[:336]:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    n = struct.unpack_from("<Q", rec, slot * 69632 + 512)[0]
    tail = rec[slot * 69632 + 512:slot * 69632 + 520 + 16 * n]
    if struct.unpack_from("<Q", b, 336)[0] != page_hash(page_hash(h, tail[:8]), tail[8:]):
        continue
    seq, txn = struct.unpack_from("<QQ", b, 16)
    psize = struct.unpack_from("<I", b, 32)[0]
    if best is None or seq > best[0]:
        best = (seq, txn, psize)
# the chain of imaged points after that record (format.h: dbfs.images):
# each whole record (its sum over head, page numbers and images) based on
# the point before makes its txnid the durable one
seq, txn, psize = best
try:
    log = open(d + "/dbfs.images", "rb").read()
except FileNotFoundError:
    log = b""
off, lseq = 0, 1
while off + 360 <= len(log):
    h = log[off:off + 360]
    if h[:8] != b"DBFSIMG1" or struct.unpack_from("<II", h, 8) != (1, psize):
        break
    dseq, ls, base, t, n = struct.unpack_from("<QQQQQ", h, 16)
    head = (360 + 8 * n + psize - 1) // psize * psize
    if dseq != seq or ls != lseq or base != txn or off + head + n * psize > len(log):
        break
    s = page_hash(0x84222325cbf29ce4, h[:352])
    s = page_hash(s, log[off + 360:off + 360 + 8 * n])
    for i in range(n):
        at = off + head + i * psize
        s = page_hash(s, log[at:at + psize])
    if s != struct.unpack_from("<Q", h, 352)[0]:
        break
    txn, lseq, off = t, lseq + 1, off + head + n * psize
best = (seq, txn, psize)
with open(d + "/data.mdb", "rb") as f:
    last = 0
    for page in (0, 1):
        f.seek(page * best[2] + 144)
        last = max(last, struct.unpack("<Q", f.read(8))[0])
print(best[1], last)
EOF
}
is_durable() { set -- $(durable "$S"); [ "$1" = "$2" ]; }
stat_of() { xget stats.one | sed -n "s/^$1=//p"; }

# feed=off: the feed's housekeeping (dbfs_tick) commits once on its own
# after new events, which could land just after a sync and make "the newest
# commit is durable" false by a race; with the feed off nothing commits
# but the test's own writes.
xset mount "name=one,store=$S,mountpoint=$D,create,commit_interval=3600,feed=off" ||
	{ fail "mount: $(cat "$T/xset.err")"; exit 1; }
echo a >"$D/f" || fail "write"
is_durable && fail "a plain write was durable at once: $(durable "$S")"
[ "$(stat_of unsynced_bytes)" != 0 ] || fail "stats: nothing waiting after a write"

# syncfs(2): sync -f makes the kernel write back its dirty pages and call
# the file system's sync_fs, which for FUSE sends nothing (fc->sync_fs is
# set by virtiofs only). If a kernel ever sends it, mfs.8 must change.
f0=$(stat_of flushes)
sync -f "$D/f" || fail "sync -f"
if is_durable || [ "$(stat_of flushes)" != "$f0" ]; then
	fail "syncfs made a durable point on this kernel: mfs.8 says it does not; update it"
else
	ok "syncfs(2) reaches no durable point (this kernel sends FUSE_SYNCFS to virtiofs only)"
fi

xset sync one || fail "sync: $(cat "$T/xset.err")"
is_durable && [ "$(stat_of unsynced_bytes)" = 0 ] && [ "$(stat_of flushes)" = $((f0 + 1)) ] &&
	ok "the sync verb returns after a durable point" ||
	fail "after sync: $(durable "$S"), $(xget stats.one | grep -E 'flushes|unsynced' | tr '\n' ' ')"
xset sync one && [ "$(stat_of flushes)" = $((f0 + 1)) ] && ok "a sync with nothing new flushes nothing" ||
	fail "second sync: $(xget stats.one | grep flushes)"

echo b >>"$D/f"
is_durable && fail "a plain write was durable at once"
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$D" ||
	fail "fsync of the root directory"
is_durable && ok "fsync of the mount point's root directory makes everything durable" ||
	fail "fsync of the root: $(durable "$S")"

echo c >>"$D/f"
if [ -f "$MFSCTL" ]; then
	sh "$MFSCTL" -m "$M" sync one && is_durable && ok "mfsctl sync" || fail "mfsctl sync: $(durable "$S")"
	echo d >>"$D/f"
fi

expect_refused ENOENT sync nosuch "no DBFS named"
expect_refused EINVAL sync "one,two" "exactly one DBFS name"
expect_refused EINVAL sync "name=one" "exactly one DBFS name"

# the unmount verb: durable when setfattr returns, the daemon still running
is_durable && fail "a plain write was durable at once"
xset unmount one || fail "unmount: $(cat "$T/xset.err")"
is_durable && ok "the unmount verb returns with every commit durable" ||
	fail "after the unmount verb: $(durable "$S")"
expect_refused EINVAL sync one "unmounted: sync needs it mounted"

# SIGTERM: durable when mfs has exited
xset mount "name=one" || fail "re-mount: $(cat "$T/xset.err")"
echo e >>"$D/f"
is_durable && fail "a plain write was durable at once"
stop_pid "$MPID" || fail "exit on SIGTERM"
is_durable && ok "SIGTERM: every commit durable when mfs exits" || fail "after SIGTERM: $(durable "$S")"
[ $FAILS = 0 ]
