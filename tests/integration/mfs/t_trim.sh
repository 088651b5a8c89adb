#!/bin/sh
# Deferred truncation through a real mount (issue 19, dbfs/trim.c): a
# truncate that frees 64 MiB or more (truncate(2), O_TRUNC) returns with
# the file at its new size and the blocks past it freed in the background,
# in pieces; while that runs statfs and the stats agree with what the
# store holds and the stats show what waits. The file lives on meanwhile:
# rewritten at once over the offsets whose old blocks still wait, or
# extended over them, it reads what was written (zeros where nothing
# was), and the reclaim frees none of the new blocks. A SIGKILL in the
# middle leaves a store dbfs-fsck accepts; the next mount goes on.
# Usage: t_trim.sh PATH-TO-mfs PATH-TO-eio_shim.so (tests/fault: it holds
# the reclaim between two pieces while $FAULT_DIR/holdlater exists)
SHIM=$2
. "$(dirname "$0")/lib.sh"

FSCK=$(dirname "$MFS")/../tools/fsck/dbfs-fsck
M=$T/mfs
D=$T/d
mkdir -p "$D"
later_shim "$SHIM"
start_manager "$M"
xset mount "name=a,store=$T/s,mountpoint=$D,create" || { fail "mount: $(xget error)"; exit 1; }
stat_of() { sed -n "s/^$1=//p" "$M/a/stats"; }
used() { stat -f -c '%b %f %S' "$D" | awk '{ print ($1 - $2) * $3 }'; }
# one line of $T/samples: statfs's used, bytes_used, reclaim_files,
# reclaim_bytes, reclaimed
sample_one() {
	s=$(sed -n 's/^\(bytes_used\|reclaim_files\|reclaim_bytes\|reclaimed\)=//p' "$M/a/stats" | tr '\n' ' ')
	echo "$(used) $s" >>"$T/samples"
}
# sample the stats (appending) until nothing waits
sample() {
	i=0
	while [ $i -lt 2400 ]; do
		sample_one
		case "$s" in *" 0 0 "[0-9]*" ") break ;; esac
		i=$((i + 1))
		sleep 0.05
	done
}
# every sample: statfs (read first) at most the usage record, which is
# never below what waits; $1: "seen" if the reclaim must have been seen
check_samples() {
	awk -v need="${1:-}" '
	{ u = $2
	  if ($3 > 0 && u < $4) { print "used " u " below what waits " $4; bad = 1 }
	  if ($1 > u) { print "statfs shows " $1 " used, the usage record " u; bad = 1 }
	  if ($3 > 0) seen = 1 }
	END { if (need == "seen" && !seen) { print "never saw the reclaim waiting"; bad = 1 } exit bad }' "$T/samples"
}

# 1. a small truncate: nothing deferred
head -c 4M /dev/urandom >"$D/small"
truncate -s 1000 "$D/small"
[ "$(stat_of reclaim_files)" = 0 ] || fail "a 4 MiB truncate was deferred"
[ "$(stat -c %s "$D/small")" = 1000 ] || fail "small: size $(stat -c %s "$D/small")"

# 2. O_TRUNC of 640 MiB, rewritten at once: the new content survives the
# reclaim of the old blocks at the same offsets
# The thread is held before its first piece until the new bytes are
# written (the shim), so what waits is seen on any machine.
head -c 96M /dev/urandom >"$T/new"
head -c 640M /dev/zero >"$D/big"
sync "$D/big"
hold_later
exec 3>"$D/big" # open(O_TRUNC): the 640 MiB wait for the reclaim
: >"$T/samples"
later_held || fail "the reclaim's thread never came to its first piece"
sample_one
pending=$(stat_of reclaim_files)
cat "$T/new" >&3 # at once, over offsets whose old blocks wait
exec 3>&-
sample_one
release_later
sample
[ "$(stat_of reclaim_files)" = 0 ] || fail "the truncated blocks were not reclaimed (files waiting $(stat_of reclaim_files))"
check_samples seen || fail "stats while reclaiming: $(tail -3 "$T/samples")"
cmp "$T/new" "$D/big" || fail "the file rewritten after O_TRUNC does not read what was written"
echo 3 >/proc/sys/vm/drop_caches
cmp "$T/new" "$D/big" || fail "the file rewritten after O_TRUNC lost blocks to the reclaim"
alloc=$(($(stat -c %b "$D/big") * 512))
sm=$(($(stat -c %b "$D/small") * 512))
[ "$(stat_of bytes_used)" = $((alloc + sm)) ] \
	|| fail "bytes_used=$(stat_of bytes_used), the files hold $((alloc + sm))"
[ $FAILS = 0 ] && ok "O_TRUNC of 640 MiB: reclaimed in the background (files waiting just after: $pending), the 96 MiB written at once intact; $(wc -l <"$T/samples") samples consistent"

# 3. truncate(2) down, then up over the blocks that wait: zeros, not the
# old bytes
head -c 128M /dev/urandom >"$D/up"
sync "$D/up"
: >"$T/samples"
truncate -s 4097 "$D/up"
head -c 4097 "$D/up" >"$T/head"
truncate -s 128M "$D/up"
sample
check_samples || fail "stats while reclaiming (3): $(tail -3 "$T/samples")"
{ cat "$T/head"; head -c $((128 * 1048576 - 4097)) /dev/zero; } | cmp - "$D/up" \
	|| fail "truncated down then up: the old bytes show"
[ "$(stat -c %b "$D/up")" -le 16 ] || fail "up: $(stat -c %b "$D/up") blocks held after the reclaim"
stop_pid $MPID || fail "exit"
"$FSCK" "$T/s" >"$T/fsck.out" 2>&1 || fail "dbfs-fsck after 2-3: $(cat "$T/fsck.out")"
[ $FAILS = 0 ] && ok "truncate down then up over waiting blocks: zeros; fsck clean"

# 4. SIGKILL mid-reclaim of a truncate: fsck accepts the store, the next
# mount goes on, the kept head is intact
restart_manager a || { fail "mfs did not come back"; exit 1; }
head -c 640M /dev/urandom >"$D/k"
sync "$D/k"
keep=$((1048576 + 123))
p0=$(stat_of reclaim_pieces)
hold_later
truncate -s $keep "$D/k"
head -c $keep "$D/k" >"$T/khead"
later_held || fail "the reclaim's thread never came to its first piece"
later_pieces $((p0 + 1)) "$M/a/stats" || fail "not held after 1 piece: $(grep reclaim "$M/a/stats" | tr '\n' ' ')"
kill -KILL $MPID
release_later
wait $MPID 2>/dev/null
"$FSCK" -v "$T/s" >"$T/fsck.out" 2>&1 || fail "dbfs-fsck after the kill: $(cat "$T/fsck.out")"
grep -q "past its size wait" "$T/fsck.out" || fail "no truncated blocks left by the kill: $(cat "$T/fsck.out")"
restart_manager a || { fail "mfs did not come back"; exit 1; }
wait_for 120 sh -c "[ \"\$(sed -n 's/^reclaim_files=//p' '$M/a/stats')\" = 0 ]" \
	|| fail "the reclaim did not go on after the restart: $(grep -E 'bytes_used|reclaim' "$M/a/stats")"
[ "$(stat_of reclaimed)" = 1 ] || fail "the restarted mfs finished $(stat_of reclaimed) reclaims, expected 1"
cmp "$T/khead" "$D/k" || fail "the kept head changed"
stop_pid $MPID || fail "exit"
"$FSCK" "$T/s" >"$T/fsck.out" 2>&1 || fail "dbfs-fsck at the end: $(cat "$T/fsck.out")"
grep -q "clean" "$T/fsck.out" || fail "dbfs-fsck at the end: $(cat "$T/fsck.out")"
[ $FAILS = 0 ] && ok "SIGKILL mid-reclaim of a truncate: fsck accepts the store, the next mount finishes it"

# 5. a write far past blocks that wait (a byte at 639 MiB into a 640 MiB
# file just truncated to nothing) frees them first, 64 MiB a transaction:
# freed_txn_max (the most one transaction freed since the mount) stays at
# 64 MiB. Before, the write's own transaction freed all the thread had not.
# The thread is held (the shim) until the write is done, so that the
# write has all 640 MiB to uncover on any machine.
restart_manager a || { fail "mfs did not come back"; exit 1; }
head -c 640M /dev/zero >"$D/far"
sync "$D/far"
p0=$(($(stat_of reclaim_pieces) + $(stat_of reclaimed)))
hold_later
python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.ftruncate(fd, 0)              # deferred: 640 MiB wait
os.pwrite(fd, b"x", 639 << 20)   # at once, past them all
os.close(fd)' "$D/far" || fail "truncate and write"
thread=$(($(stat_of reclaim_pieces) + $(stat_of reclaimed) - p0))
release_later
wait_for 120 sh -c "[ \"\$(sed -n 's/^reclaim_files=//p' '$M/a/stats')\" = 0 ]" \
	|| fail "the far write's file still waits: $(grep reclaim "$M/a/stats")"
most=$(stat_of freed_txn_max)
[ "$most" -le $((64 << 20)) ] || fail "a transaction freed $most bytes (the thread took $thread pieces)"
[ "$thread" = 0 ] || fail "the held thread took $thread pieces"
[ "$(stat -c %s "$D/far")" = $(((639 << 20) + 1)) ] || fail "far: size $(stat -c %s "$D/far")"
[ "$(tail -c 1 "$D/far")" = x ] || fail "far: the byte written is not there"
[ "$(head -c $((639 << 20)) "$D/far" | tr -d '\0' | wc -c)" = 0 ] || fail "far: old bytes show"
[ "$(stat -c %b "$D/far")" -le 16 ] || fail "far: $(stat -c %b "$D/far") blocks held"
stop_pid $MPID || fail "exit"
"$FSCK" "$T/s" >"$T/fsck.out" 2>&1 || fail "dbfs-fsck after 5: $(cat "$T/fsck.out")"
[ $FAILS = 0 ] && ok "a write far past 640 MiB that wait: freed first in pieces (most in one transaction: $most bytes); fsck clean"
exit 0
