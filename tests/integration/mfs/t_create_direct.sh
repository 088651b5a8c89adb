#!/bin/sh
# Commits per write of a file made by open(O_CREAT) (issue 16): a new file
# opened write-only gets direct I/O from the create handler, so every
# write(2) is one request and one commit. Through the page cache (no
# writeback_cache) the kernel ends a request after a page it filled only
# partly, so tar's 10 KiB records went as 1.5 requests each; this counts
# the commits of 40 such records (41 with the create: within 45; split:
# 61). Also: a reader through another descriptor sees what the direct
# writes changed in a page it had cached, a read-write create keeps the
# cached path and its content, and with writeback_cache=1 the kernel still
# merges a new file's writes (no direct I/O there).
. "$(dirname "$0")/lib.sh"

M=$T/mfs
D=$T/d
mkdir -p "$D" "$T/s"
start_manager "$M"
xset mount "name=x,store=$T/s,mountpoint=$D,create" || { cat "$T/xset.err" >&2; fail "mount"; exit 1; }
commits() { awk -F= '$1 == "commits" { print $2 }' "$M/x/stats"; }

c0=$(commits)
python3 - "$D/tar-like" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
for i in range(40):
    assert os.write(fd, bytes([i]) * 10240) == 10240
os.close(fd)
PY
[ $? = 0 ] || fail "40 records of 10 KiB"
c1=$(commits)
n=$((c1 - c0))
[ "$n" -le 45 ] && ok "a new write-only file: 40 writes of 10 KiB cost $n commits" ||
	fail "40 writes of 10 KiB to a new write-only file cost $n commits (split writes)"
python3 - "$D/tar-like" <<'PY'
import sys
d = open(sys.argv[1], 'rb').read()
assert d == b''.join(bytes([i]) * 10240 for i in range(40)), len(d)
PY
[ $? = 0 ] && ok "content of the 40 records" || fail "content of the 40 records"

# coherence: pages a reader cached are dropped by the direct writes
python3 - "$D/coherent" <<'PY'
import os, sys
p = sys.argv[1]
w = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(w, b'a' * 10240)
r = os.open(p, os.O_RDONLY)
assert os.pread(r, 20480, 0) == b'a' * 10240  # caches pages 0-2, page 2 partly
os.write(w, b'b' * 10240)                     # into page 2 and on
os.pwrite(w, b'c' * 100, 100)                 # into cached page 0
want = b'a' * 100 + b'c' * 100 + b'a' * 10040 + b'b' * 10240
got = os.pread(r, 40960, 0)
assert got == want, (len(got), got[8190:8200], got[95:205])
os.close(w)
os.close(r)
PY
[ $? = 0 ] && ok "a reader sees direct writes into pages it had cached" ||
	fail "stale cached page after a direct write"

python3 - "$D/rw" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, b'x' * 10240)
os.write(fd, b'y' * 10240)
assert os.pread(fd, 30000, 0) == b'x' * 10240 + b'y' * 10240
os.close(fd)
PY
[ $? = 0 ] && ok "a read-write create reads back what it wrote" || fail "read-write create"

# with writeback_cache the kernel merges the writes: no direct I/O there
# (40 records of 10 KiB written back in a few requests, not 40)
mkdir -p "$T/w" "$T/sw"
xset mount "name=w,store=$T/sw,mountpoint=$T/w,create,writeback_cache=1" ||
	{ cat "$T/xset.err" >&2; fail "mount writeback_cache=1"; exit 1; }
wc0=$(awk -F= '$1 == "commits" { print $2 }' "$M/w/stats")
python3 - "$T/w/tar-like" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
for i in range(40):
    assert os.write(fd, bytes([i]) * 10240) == 10240
os.close(fd)
PY
[ $? = 0 ] || fail "40 records of 10 KiB with writeback_cache"
wc1=$(awk -F= '$1 == "commits" { print $2 }' "$M/w/stats")
n=$((wc1 - wc0))
[ "$n" -le 10 ] && ok "writeback_cache=1: 40 writes of 10 KiB cost $n commits (merged by the kernel)" ||
	fail "writeback_cache=1: 40 writes of 10 KiB cost $n commits (direct I/O bypassed the cache)"
