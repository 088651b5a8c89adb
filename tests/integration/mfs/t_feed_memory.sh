#!/bin/sh
# A reader of the change feed that stays open holds a bounded buffer: what
# it has read is let go, however much it reads (feed_reader_bytes in stats;
# a buffer that kept everything read grew by every read).
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x $PY ] || { echo "SKIP: no $PY"; exit 77; }
M=$T/mfs
D=$T/d
mkdir -p "$D"
start_manager "$M"
xset mount "name=a,store=$T/s,mountpoint=$D,create" || { fail "mount: $(xget error)"; exit 1; }
E=$M/a
from=$(sed -n 's/^feed_next_seq=//p' "$E/stats")

# 30,000 creates: about 2.5 MB of event lines
$PY - "$D" <<'PYEOF' || fail "creates"
import os, sys
os.mkdir(sys.argv[1] + "/many")
for i in range(30000):
    os.close(os.open(f"{sys.argv[1]}/many/file-with-a-longer-name-{i}", os.O_CREAT | os.O_WRONLY, 0o644))
PYEOF

# read them all in 64 KiB reads, then, still open, look at the stats
$PY - "$E/events@$from" "$E/stats" >"$T/out" <<'PYEOF' || fail "reader: $(cat "$T/out")"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
total = 0
while True:
    try:
        b = os.read(fd, 65536)
    except BlockingIOError:
        break
    if not b:
        break
    total += len(b)
stats = open(sys.argv[2]).read()
held = [l.split("=")[1] for l in stats.splitlines() if l.startswith("feed_reader_bytes=")]
readers = [l.split("=")[1] for l in stats.splitlines() if l.startswith("feed_readers=")]
os.close(fd)
print(total, held[0] if held else "none", readers[0] if readers else "none")
PYEOF
read -r total held readers <"$T/out"
[ "$total" -gt 2000000 ] && ok "read $total bytes of events" || fail "read only $total bytes"
[ "$readers" = 1 ] && ok "stats count the open reader" || fail "feed_readers=$readers"
# HIGH_WATER (256 KiB) plus a batch: a buffer that kept what was read
# would hold all $total bytes
[ "$held" -le 1048576 ] && ok "the open reader holds $held bytes after reading $total" \
	|| fail "the reader's buffer holds $held bytes after reading $total"
wait_for 10 sh -c "grep -q '^feed_readers=0$' '$E/stats'" && ok "closed: no reader left" \
	|| fail "$(grep '^feed_reader' "$E/stats")"
