#!/bin/sh
# File expiry through a real mount (issue 19): setfattr user.dbfs.expire
# +SECONDS / @EPOCH removes the file at its time; bad values are refused
# with a clear errno; getfattr shows the absolute time; rewriting
# reschedules, removing cancels; the schedule follows renames and takes
# every hard link; an open file stays readable through its descriptor; the
# removal is an `expire` event in the feed; schedules survive a clean
# restart and a SIGKILL (one falls due while mfs is down); dbfs-fsck is
# clean afterwards. "Not yet removed" is checked against a file due at the
# same time or earlier that was removed already: no sleeps, no timing
# thresholds.
. "$(dirname "$0")/lib.sh"

command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
PY=/usr/bin/python3
[ -x $PY ] || { echo "SKIP: no $PY"; exit 77; }
FSCK=$(dirname "$MFS")/../tools/fsck/dbfs-fsck
chmod 755 "$T"
M=$T/mfs
D=$T/d
mkdir -p "$D"
start_manager "$M" allow_other
xset mount "name=a,store=$T/s,mountpoint=$D,create" || { fail "mount: $(xget error)"; exit 1; }
xset subscribe "name=a,sub=c" || { fail "subscribe: $(xget error)"; exit 1; }
SUB=$M/a/subscriptions/c

cp "$(dirname "$0")/feed_drain.py" "$T/drain.py" # reads until EAGAIN
# every event so far, appended to $T/events (the subscription is not
# acknowledged: each drain gives everything again)
events() { $PY "$T/drain.py" "$SUB" >"$T/events"; }
gone() { [ ! -e "$1" ] && [ ! -L "$1" ]; }
stat_of() { sed -n "s/^$1=//p" "$M/a/stats"; }
expire() { setfattr -n user.dbfs.expire -v "$1" "$2"; }

# 1. bad values: the errno says what is wrong; nothing is set
touch "$D/v"
for bad in "" "+" "@" "1" "+1.5" "+-1" " +1" "+1 " "+1s" "tomorrow" "+0x10"; do
	if expire "$bad" "$D/v" 2>"$T/err"; then
		fail "value '$bad' accepted"
	elif ! grep -q "Invalid argument" "$T/err"; then
		fail "value '$bad': $(cat "$T/err"), expected EINVAL"
	fi
done
for bad in "+999999999999999999999" "@253402300800" "+253402300799"; do
	expire "$bad" "$D/v" 2>"$T/err" && fail "value '$bad' accepted"
	grep -q "out of range" "$T/err" || fail "value '$bad': $(cat "$T/err"), expected ERANGE"
done
mkdir "$D/dir"
expire +1 "$D/dir" 2>"$T/err" && fail "a directory accepted an expiry"
grep -q "Is a directory" "$T/err" || fail "directory: $(cat "$T/err"), expected EISDIR"
chmod 666 "$D/v"
setpriv --reuid=65534 --regid=65534 --clear-groups setfattr -n user.k -v 1 "$D/v" \
	|| fail "another user cannot write the file's xattrs at all"
setpriv --reuid=65534 --regid=65534 --clear-groups setfattr -n user.dbfs.expire -v +1 "$D/v" \
	2>"$T/err" && fail "a user who does not own the file scheduled its removal"
grep -q "not permitted" "$T/err" || fail "not the owner: $(cat "$T/err"), expected EPERM"
getfattr --absolute-names -n user.dbfs.expire "$D/v" >/dev/null 2>&1 && fail "a refused value was stored"
[ $FAILS = 0 ] && ok "bad values refused: EINVAL, ERANGE, EISDIR, EPERM"

# 2. getfattr shows the absolute time; +N is never early
t0=$(date +%s)
expire +3600 "$D/v"
v=$(getfattr --absolute-names --only-values -n user.dbfs.expire "$D/v")
t1=$(date +%s)
case "$v" in
@*) e=${v#@}
    [ "$e" -ge $((t0 + 3600)) ] && [ "$e" -le $((t1 + 3601)) ] || fail "+3600 stored as $v (now $t0)" ;;
*) fail "+3600 stored as '$v'" ;;
esac
expire "@4102444800" "$D/v"
[ "$(getfattr --absolute-names --only-values -n user.dbfs.expire "$D/v")" = "@4102444800" ] || fail "@EPOCH not kept"
f0=$FAILS
[ $FAILS = 0 ] && ok "getfattr shows $v for +3600"

# 3. it fires, as an expire event; rescheduling, cancelling, renames,
# hard links and an open file, all due at one time
f0=$FAILS
mkdir "$D/sub"
for f in fire later sooner cancel moved link open same; do echo "$f data" >"$D/$f"; done
ln "$D/link" "$D/sub/link2"
# a reader that holds "open" before its time is set
$PY - "$D/open" "$T/openread" "$T/opened" <<'PYEOF' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
open(sys.argv[3], "w").close()
while os.path.exists(sys.argv[1]):
    time.sleep(0.05)
open(sys.argv[2], "wb").write(os.pread(fd, 100, 0))
PYEOF
OP=$!
PIDS="$PIDS $OP"
wait_for 20 test -e "$T/opened" || fail "the reader did not open the file"
# (8 s: the set-up below must be done before "fire" goes, even on a loaded machine)
due=$(($(date +%s) + 8))
expire "@$due" "$D/fire"
expire "@$due" "$D/later"; expire "@$((due + 3600))" "$D/later"   # moved out
expire "@$((due + 3600))" "$D/sooner"; expire "@$due" "$D/sooner"  # moved in
expire "@$due" "$D/cancel"; setfattr -x user.dbfs.expire "$D/cancel"
expire "@$due" "$D/moved"; mv "$D/moved" "$D/sub/renamed"
expire "@$due" "$D/link"
expire "@$due" "$D/open"
expire "@$due" "$D/same"; expire "@$due" "$D/same"   # the same time twice: removed once
wait_for 25 gone "$D/fire" || fail "the file was not removed at its time"
for f in sooner sub/renamed link sub/link2 open same; do
	wait_for 5 gone "$D/$f" || fail "$f was not removed"
done
for f in later cancel; do
	[ -e "$D/$f" ] || fail "$f was removed (rescheduled later / cancelled)"
done
wait_for 10 is_dead $OP || { fail "the reader of the open file hangs"; kill $OP; }
wait $OP 2>/dev/null
[ "$(cat "$T/openread" 2>/dev/null)" = "open data" ] || fail "the open file was not readable after its expiry"
ls "$D" >"$T/ls"
grep -q -x fire "$T/ls" && fail "readdir still lists the removed file"
events
for p in /fire /sooner /sub/renamed /open /same; do
	[ "$(grep -c " expire [0-9]* $p parent=" "$T/events")" = 1 ] \
		|| fail "expected one expire event of $p: $(grep " $p " "$T/events" | tail -3)"
done
grep -q " expire [0-9]* /link parent=" "$T/events" && grep -q " expire [0-9]* /sub/link2 parent=" "$T/events" \
	|| fail "no expire event per hard link"
grep -E -q " (unlink|expire) [0-9]* /(later|cancel) " "$T/events" && fail "an event for a file not due"
[ "$(stat_of expire_fired)" = 6 ] || fail "expire_fired=$(stat_of expire_fired), expected 6"
[ "$(stat_of expire_pending)" = 2 ] || fail "expire_pending=$(stat_of expire_pending), expected 2 (v, later)"
[ $FAILS = $f0 ] && ok "fires as expire events; reschedule, cancel, rename, links, open file; $(grep expire_late_p99 "$M/a/stats")"

# 4. restarts: a schedule survives a clean restart and a SIGKILL, and one
# that fell due while mfs was down fires when it is back
f0=$FAILS
for how in TERM KILL; do
	echo x >"$D/r$how"; echo x >"$D/down$how"
	now=$(date +%s)
	expire "@$((now + 4))" "$D/r$how"
	expire "@$((now + 1))" "$D/down$how"
	kill -$how $MPID
	wait $MPID 2>/dev/null
	# down until downHOW is due (the clock, not a guess)
	wait_for 10 sh -c "[ \$(date +%s) -gt $((now + 1)) ]"
	restart_manager a || { fail "$how: mfs did not come back"; break; }
	wait_for 10 gone "$D/down$how" || fail "$how: the file due while mfs was down is still there"
	# still there, unless its time came meanwhile (a slow restart)
	[ -e "$D/r$how" ] || [ "$(date +%s)" -ge $((now + 4)) ] || fail "$how: r$how removed before its time"
	wait_for 15 gone "$D/r$how" || fail "$how: the schedule did not survive the restart"
done
[ -e "$D/later" ] && [ -e "$D/v" ] || fail "a file not due went in the restarts"
[ "$(stat_of expire_pending)" = 2 ] || fail "expire_pending=$(stat_of expire_pending) after the restarts"
[ $FAILS = $f0 ] && ok "schedules survive SIGTERM and SIGKILL; one due while down fires at the restart"

# 5. dbfs-fsck is clean, and sees a damaged index
stop_pid $MPID || fail "exit"
"$FSCK" "$T/s" >"$T/fsck.out" 2>&1 || fail "dbfs-fsck: $(cat "$T/fsck.out")"
if command -v mdb_load >/dev/null; then
	# a row naming no inode (999999), due at 5
	printf 'VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n 00000000000f423f\n 0000000000000005\nDATA=END\n' |
		mdb_load -s expire "$T/s" || fail "mdb_load"
	"$FSCK" "$T/s" >"$T/fsck.out" 2>&1 && fail "dbfs-fsck missed a row naming no inode"
	grep -q "expiry index: the row of inode 999999" "$T/fsck.out" || fail "dbfs-fsck: $(cat "$T/fsck.out")"
	"$FSCK" --repair "$T/s" >"$T/fsck.out" 2>&1
	"$FSCK" "$T/s" >"$T/fsck.out" 2>&1 || fail "dbfs-fsck after --repair: $(cat "$T/fsck.out")"
else
	echo "SKIP part: no mdb_load"
fi
[ $FAILS = 0 ] && ok "dbfs-fsck clean after all this; it reports a damaged index, --repair mends it"
exit 0
