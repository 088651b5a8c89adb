#!/bin/sh
# A DBFS created and mounted by an unprivileged user (uid 65534) through an
# mfs that root started with allow_other (issue 18): its owner follows its
# own change feed, replays it, subscribes, reads and acknowledges, without
# any help from root; another unprivileged user gets EACCES on every one of
# those (files, listing, subscribe, ack), and root may still read.
. "$(dirname "$0")/lib.sh"

command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
PY=/usr/bin/python3 # the system's, which every user may run
[ -x $PY ] || { echo "SKIP: no $PY"; exit 77; }
U=65534 O=65533 # the owner, and another unprivileged user
as_user() { setpriv --reuid=$U --regid=$U --clear-groups "$@"; }
as_other() { setpriv --reuid=$O --regid=$O --clear-groups "$@"; }
uset() { as_user setfattr -n "user.mfs.$1" -v "$2" "$M" 2>/dev/null; }
uerr() { as_user getfattr --only-values -n user.mfs.error "$M" 2>/dev/null; }
chmod 755 "$T"
M=$T/mfs
start_manager "$M" allow_other
mkdir -p "$T/u/mp"
chown -R $U:$U "$T/u"
uset mount "name=own,store=$T/u/s,mountpoint=$T/u/mp,create" || { fail "mount: $(uerr)"; exit 1; }
E=$M/own
D=$T/u/mp
xget dbfs.own | grep -q "owner=$U" || fail "the DBFS's owner is not $U: $(xget dbfs.own)"

# drain FILE: every line the feed file has now (O_NONBLOCK until EAGAIN)
cp "$(dirname "$0")/feed_drain.py" "$T/drain.py"
chmod 644 "$T/drain.py"
udrain() { as_user $PY "$T/drain.py" "$1"; }

# 1. the owner's own changes, replayed from 1 by the owner: its uid on them
as_user sh -c "mkdir '$D/dir' && : >'$D/dir/f' && echo hi >>'$D/dir/f'" || fail "1: user's changes"
udrain "$E/events@1" >"$T/replay" 2>"$T/replay.err"
[ "$(cut -d' ' -f3,5 "$T/replay" | tr '\n' ';')" = "mkdir /dir;create /dir/f;write /dir/f;" ] \
	&& ok "1: the owner replays its feed (events@1)" \
	|| fail "1: replay: $(cat "$T/replay" "$T/replay.err")"
grep -c " uid=$U gid=$U " "$T/replay" | grep -qx 3 && ok "1: events carry the owner's uid and gid" \
	|| fail "1: uid/gid: $(cat "$T/replay")"
udrain "$E/events.json@1" | head -1 | grep -q '^{"seq":1,.*"op":"mkdir"' \
	&& ok "1: and the JSON form" || fail "1: json replay"

# 2. the owner follows from now: a blocked read returns the next event
as_user $PY - "$E/events" "$D" <<'PYEOF' && ok "2: the owner follows events (blocking read)" || fail "2: follow"
import os, sys, threading
fd = os.open(sys.argv[1], os.O_RDONLY)
t = threading.Timer(0.3, lambda: open(sys.argv[2] + "/follow", "w").close())
t.start()
data = os.read(fd, 65536)
assert b" create " in data and b" /follow " in data, data
os.close(fd)
PYEOF

# 3. the owner subscribes, reads, acknowledges, resumes after its ack
base=$(udrain "$E/events@1" | tail -1 | cut -d' ' -f1)
uset subscribe "name=own,sub=mine,from=1" && ok "3: the owner subscribes" \
	|| fail "3: subscribe: $(uerr)"
as_user ls "$E/subscriptions" | grep -qx mine && ok "3: the owner lists its subscriptions" \
	|| fail "3: ls subscriptions"
n=$(udrain "$E/subscriptions/mine" | grep -c .)
[ "$n" = "$base" ] && ok "3: the subscription gives all $base events" || fail "3: got $n of $base"
as_user sh -c "echo 2 >'$E/subscriptions/mine'" && ok "3: the owner acknowledges 2" \
	|| fail "3: ack: $(uerr)"
udrain "$E/subscriptions/mine" | head -1 | grep -q "^3 " && ok "3: resumes after the ack" \
	|| fail "3: after ack: $(udrain "$E/subscriptions/mine" | head -2)"
grep -q "^feed_sub.mine=next=3," "$E/stats" && ok "3: stats: next=3" \
	|| fail "3: $(grep feed_sub "$E/stats")"

# 4. another unprivileged user: EACCES on each of them, and nothing changes
denied() { # what, command...: fails with "Permission denied"
	w=$1
	shift
	if as_other "$@" >/dev/null 2>"$T/o.err"; then
		fail "4: another user: $w allowed"
	elif grep -q "Permission denied" "$T/o.err"; then
		ok "4: another user: $w: EACCES"
	else
		fail "4: another user: $w: $(cat "$T/o.err")"
	fi
}
denied "cat events" cat "$E/events"
denied "cat events@1" cat "$E/events@1"
denied "cat events.json" cat "$E/events.json"
denied "ls subscriptions" ls "$E/subscriptions"
denied "cat subscriptions/mine" cat "$E/subscriptions/mine"
denied "ack subscriptions/mine" sh -c "echo 5 >'$E/subscriptions/mine'"
denied "subscribe" setfattr -n user.mfs.subscribe -v "name=own,sub=theirs" "$M"
denied "unsubscribe" setfattr -n user.mfs.unsubscribe -v "name=own,sub=mine" "$M"
grep -q "^feed_sub.mine=next=3," "$E/stats" && ! grep -q "^feed_sub.theirs=" "$E/stats" \
	&& ok "4: the refused commands changed nothing" || fail "4: $(grep feed_sub "$E/stats")"

# 5. root (who started mfs) may still read the user's feed
$PY "$T/drain.py" "$E/events@1" | head -1 | grep -q "^1 .* mkdir " && ok "5: root reads it" \
	|| fail "5: root"
uset unsubscribe "name=own,sub=mine" && ok "5: the owner unsubscribes" || fail "5: $(uerr)"
wait_for 20 uset unmount own || fail "unmount: $(uerr)"
stop_pid $MPID || fail "exit"
