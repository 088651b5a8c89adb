#!/bin/sh
# Deferred reclaim of large files through a real mount (issue 19): the
# blocks of an unlinked file of 64 MiB or more are freed in the background,
# in pieces, after rm returned; while that runs statfs and the stats agree
# with what the store still holds (never less than what waits), used
# space only falls, and the stats show what waits; a SIGKILL in the middle
# leaves a store dbfs-fsck accepts, and the next mount goes on with the
# freeing until the space is back. A small file is freed as before.
# Usage: t_reclaim.sh PATH-TO-mfs PATH-TO-eio_shim.so (tests/fault: it holds
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

# 1. a small file: nothing deferred
head -c 1M /dev/urandom >"$D/small"
rm "$D/small"
wait_for 10 sh -c "[ \"\$(sed -n 's/^bytes_used=//p' '$M/a/stats')\" = 0 ]" \
	|| fail "the small file's space did not come back"
[ "$(stat_of reclaim_pieces)" = 0 ] || fail "a small file was reclaimed in pieces"

sample() {
	s=$(sed -n 's/^\(bytes_used\|reclaim_files\|reclaim_bytes\|reclaimed\)=//p' "$M/a/stats" | tr '\n' ' ')
	echo "$(used) $s" >>"$T/samples"
}

# 2. a large one (zeros are stored as data): rm returns, the space comes
# back piece by piece; every sample of the stats is what the store holds
# (statfs's used is the usage record's bytes, never below what waits) and
# used only falls. The thread is held before its first piece and after its
# second (the shim), so what waits is seen on any machine; then it runs
# free and the samples go on until it is over.
head -c 640M /dev/zero >"$D/big"
sync "$D/big"
before=$(stat_of bytes_used)
hold_later
rm "$D/big"
: >"$T/samples"
later_held || fail "the reclaim's thread never came to its first piece"
sample
later_pieces 2 "$M/a/stats" || fail "not held after 2 pieces: $(grep reclaim "$M/a/stats" | tr '\n' ' ')"
sample
release_later
i=0
while [ $i -lt 2400 ]; do
	sample
	case "$s" in *" 0 0 1 ") break ;; esac
	i=$((i + 1))
	sleep 0.05
done
[ "$(stat_of reclaimed)" = 1 ] || fail "the large file was not reclaimed in the background (reclaimed=$(stat_of reclaimed))"
[ "$(stat_of bytes_used)" = 0 ] || fail "bytes_used=$(stat_of bytes_used) after the reclaim"
[ "$(stat_of reclaim_pieces)" -ge 3 ] || fail "640 MiB freed in $(stat_of reclaim_pieces) pieces (bounded: 64 MiB each)"
awk -v before="$before" '
	{ u = $2; if (NR > 1 && u > last) { print "used grew: " last " -> " u; bad = 1 }
	  if (u > before) { print "used above the file: " u; bad = 1 }
	  if ($3 > 0 && u < $4) { print "used " u " below what waits " $4; bad = 1 }
	  # statfs is read after the stats: at most what they said
	  if ($1 > u) { print "statfs shows " $1 " used, the usage record " u; bad = 1 }
	  if ($3 > 0) seen++; last = u }
	END { if (seen < 2) { print "saw the reclaim waiting in " seen " samples, not in 2 (held)"; bad = 1 } exit bad }' "$T/samples" \
	|| fail "stats while reclaiming: $(tail -3 "$T/samples")"
[ $FAILS = 0 ] && ok "640 MiB freed in the background in $(stat_of reclaim_pieces) pieces; $(wc -l <"$T/samples") samples consistent"

# 2b. fairness: one delivery thread serves every store, a reclaim one
# piece per turn. While store a frees 1 GiB (16 pieces), an expiry on
# store b that falls due fires before a's reclaim is over (it waited for
# the whole file when the thread freed a file before going back to its
# round). No timing: the order of what the stats and the names show.
# A try decides only when at least 3 of a's pieces were left as b's
# expiry was set (an idle machine may free most of the 1 GiB before the
# shell sets it): then a fair thread fires it with a piece still to go.
B=$T/b
mkdir -p "$B"
xset mount "name=b,store=$T/sb,mountpoint=$B,create" || fail "mount b: $(xget error)"
try=0
while :; do
	try=$((try + 1))
	: >"$B/soon"
	head -c 1G /dev/zero >"$D/huge"
	sync "$D/huge"
	p0=$(stat_of reclaim_pieces)
	r0=$(stat_of reclaimed)
	rm "$D/huge"
	wait_for 60 sh -c "[ \$(sed -n 's/^reclaim_pieces=//p' '$M/a/stats') -gt $p0 ]" || fail "no piece of a freed"
	setfattr -n user.dbfs.expire -v "@$(date +%s)" "$B/soon"   # due now
	set_at=$(( $(stat_of reclaim_pieces) - p0 ))
	waiting=$(stat_of reclaim_files)
	wait_for 120 sh -c "[ ! -e '$B/soon' ]" || fail "b's expiry did not fire"
	left=$(stat_of reclaim_files)
	pieces=$(( $(stat_of reclaim_pieces) - p0 ))
	wait_for 120 sh -c "[ \$(sed -n 's/^reclaimed=//p' '$M/a/stats') -gt $r0 ]" || fail "a's reclaim did not end"
	if [ "$waiting" = 1 ] && [ "$set_at" -le 13 ]; then
		[ "$left" = 1 ] || fail "b's expiry fired only after a's reclaim was over (a: reclaim_files=$left, $pieces pieces done; $set_at when it was set)"
		break
	fi
	[ $try -lt 5 ] || { fail "a's 1 GiB reclaim was (nearly) over before b's expiry was set, in $try tries"; break; }
done
xset unmount b || fail "unmount b: $(xget error)"
[ $FAILS = 0 ] && ok "b's expiry fired while a's 1 GiB reclaim ran ($pieces of its pieces done by then)"

# 3. SIGKILL in the middle (held after a piece): fsck accepts the store,
# the next mount goes on
head -c 640M /dev/urandom >"$D/big2"
sync "$D/big2"
p0=$(stat_of reclaim_pieces)
hold_later
rm "$D/big2"
later_held || fail "the reclaim's thread never came to its first piece"
later_pieces $((p0 + 1)) "$M/a/stats" || fail "not held after 1 piece: $(grep reclaim "$M/a/stats" | tr '\n' ' ')"
kill -KILL $MPID
release_later
wait $MPID 2>/dev/null
# what it still held when killed (the mount point is stale until mfs clears it)
"$FSCK" -v "$T/s" >"$T/fsck.out" 2>&1 || fail "dbfs-fsck after the kill: $(cat "$T/fsck.out")"
grep -q "being freed in the background" "$T/fsck.out" || fail "no reclaim left by the kill: $(cat "$T/fsck.out")"
restart_manager a || { fail "mfs did not come back"; exit 1; }
wait_for 120 sh -c "[ \"\$(sed -n 's/^bytes_used=//p' '$M/a/stats')\" = 0 ]" \
	|| fail "the reclaim did not go on after the restart: $(grep -E 'bytes_used|reclaim' "$M/a/stats")"
[ "$(stat_of reclaim_files)" = 0 ] || fail "reclaim_files=$(stat_of reclaim_files) at the end"
# by the queue's thread of the new process, not by the mount itself
[ "$(stat_of reclaimed)" = 1 ] || fail "the restarted mfs reclaimed $(stat_of reclaimed) files, expected 1"
[ "$(used)" = 0 ] || fail "statfs still shows $(used) bytes used"
stop_pid $MPID || fail "exit"
"$FSCK" "$T/s" >"$T/fsck.out" 2>&1 || fail "dbfs-fsck at the end: $(cat "$T/fsck.out")"
grep -q " 0 orphans; clean" "$T/fsck.out" || fail "dbfs-fsck at the end: $(cat "$T/fsck.out")"
[ $FAILS = 0 ] && ok "SIGKILL mid-reclaim: fsck accepts the store, the next mount finishes it"
exit 0
