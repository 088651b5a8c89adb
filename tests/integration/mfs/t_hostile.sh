#!/bin/sh
# A hostile user (uid 65534) against an mfs started by root with allow_other:
# swapped path components (rename, symlinks, RENAME_EXCHANGE) never make mfs
# unmount or mount over what the user does not own; a store needs the
# caller's access; a sticky directory of another user is no mount point;
# crashes leave no stacked mounts; refused commands leave no files; user
# strings reach the log escaped; per-user limits hold; and every verb on
# root's DBFS is refused.
. "$(dirname "$0")/lib.sh"

command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
PY=/usr/bin/python3 # the system's, which every user may run
[ -x $PY ] || { echo "SKIP: no $PY (RENAME_EXCHANGE helper)"; exit 77; }
U=65534
as_user() { setpriv --reuid=$U --regid=$U --clear-groups "$@"; }
uset() { as_user setfattr -n "user.mfs.$1" -v "$2" "$M" 2>/dev/null; }
uerr() { as_user getfattr --only-values -n user.mfs.error "$M" 2>/dev/null; }
mounts_at() { awk -v m="$1" '$5 == m { n++ } END { print n + 0 }' /proc/self/mountinfo; }
state_of() { xget list | sed -n "s/^name=$1,state=\([a-z]*\).*/\1/p"; }
chmod 755 "$T"
M=$T/mfs
start_manager "$M" "allow_other,user_max_dbfs=3"

# root's own DBFSs, in root's directories
mkdir -p "$T/rootd/mp" "$T/rootd2/mp"
echo keep >"$T/rootd2/mp/root-file"
xset mount "name=rootfs,store=$T/sroot,mountpoint=$T/rootd/mp,create" || fail "root mount"
echo "root data" >"$T/rootd/mp/f"
mkdir -p "$T/u/x/mp" "$T/u/y/mp" "$T/u/s"
chown -R $U:$U "$T/u"

# 1. unmount acts on the mount mfs made, not on what the path leads to now
uset mount "name=u1,store=$T/u/s/1,mountpoint=$T/u/x/mp,create" || fail "u1: $(uerr)"
as_user mv "$T/u/x" "$T/u/x2" && as_user ln -s "$T/rootd" "$T/u/x" || fail "swap x"
uset unmount u1 || fail "unmount u1: $(uerr)"
is_mounted "$T/rootd/mp" && [ "$(cat "$T/rootd/mp/f")" = "root data" ] \
	&& ok "1: root's DBFS survives an unmount through a swapped path" \
	|| fail "1: root's DBFS was unmounted"
not_mounted "$T/u/x2/mp" && [ "$(state_of u1)" = unmounted ] && ok "1: u1 itself unmounted" \
	|| fail "1: u1 state $(state_of u1), mounts at x2/mp: $(mounts_at "$T/u/x2/mp")"
uset forget u1 || fail "forget u1: $(uerr)"

# 3. RENAME_EXCHANGE of a path component while mounting: never root's directory
as_user mkdir -p "$T/u/race/a/mp"
as_user ln -s "$T/rootd2" "$T/u/race/b"
cat >"$T/exch.py" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
d = os.open(sys.argv[1], os.O_DIRECTORY)
stop = sys.argv[2]
while not os.path.exists(stop):
    libc.renameat2(d, b"a", d, b"b", 2)  # RENAME_EXCHANGE
EOF
rm -f "$T/stop-exch"
as_user $PY "$T/exch.py" "$T/u/race" "$T/stop-exch" &
XP=$!
PIDS="$PIDS $XP"
bad=0
good=0
try=0
while [ $try -lt 150 ]; do
	uset mount "name=race,store=$T/u/s/race,mountpoint=$T/u/race/a/mp,create" && {
		good=$((good + 1))
		[ "$(mounts_at "$T/rootd2/mp")" != 0 ] && bad=$((bad + 1))
		uset unmount race || xset unmount "race,force"
	}
	[ "$(mounts_at "$T/rootd2/mp")" != 0 ] && { bad=$((bad + 1)); umount -l "$T/rootd2/mp"; }
	uset forget race
	try=$((try + 1))
done
touch "$T/stop-exch"
wait $XP
[ $bad = 0 ] && [ "$(cat "$T/rootd2/mp/root-file")" = keep ] \
	&& ok "3: 150 mounts under RENAME_EXCHANGE ($good accepted) never landed on root's directory" \
	|| fail "3: mounted over root's directory $bad times ($good accepted)"
[ $good -gt 0 ] || fail "3: no mount was accepted during the race: it proves nothing"

# 4. a store needs the caller's access: root's store in a 0700 directory
mkdir -p "$T/secret" "$T/rootm"
chmod 700 "$T/secret"
xset mount "name=sec,store=$T/secret/store,mountpoint=$T/rootm,create" || fail "sec"
echo secret >"$T/rootm/s"
chmod 644 "$T/rootm/s"
xset unmount sec || fail "unmount sec"
xset forget sec || fail "forget sec"
as_user mkdir -p "$T/u/peek"
uset mount "name=peek,store=$T/secret/store,mountpoint=$T/u/peek,ro" \
	&& fail "4: nobody mounted root's store read-only" || true
uerr | grep -q "^EACCES" && ok "4: EACCES mounting a store nobody cannot reach: $(uerr)" \
	|| fail "4: $(uerr)"
not_mounted "$T/u/peek" || fail "4: peek is mounted"
xset mount "name=sec,store=$T/secret/store,mountpoint=$T/rootm" \
	&& [ "$(cat "$T/rootm/s")" = secret ] && ok "4: root mounts its store (no EBUSY)" \
	|| fail "4: root's mount: $(xget error)"
xset unmount sec
xset forget sec
# the store directory itself readable, but its files not
mkdir -p "$T/open"
chmod 755 "$T/open"
xset mount "name=sec2,store=$T/open/store,mountpoint=$T/rootm,create" || fail "sec2"
xset unmount sec2
xset forget sec2
chmod 755 "$T/open/store"
uset mount "name=peek,store=$T/open/store,mountpoint=$T/u/peek,ro" \
	&& fail "4: nobody opened root's 0600 store files" || true
uerr | grep -q "^EACCES" && ok "4: EACCES on a store whose files nobody cannot read" \
	|| fail "4: $(uerr)"

# a store an older mfs made for a user (its files root's) is given to the user
xset mount "name=old,store=$T/u/s/old,mountpoint=$T/rootm,create" || fail "old: $(xget error)"
echo "old data" >"$T/rootm/f"
xset unmount old && xset forget old || fail "old unmount"
chown $U:$U "$T/u/s/old"
[ "$(stat -c %u "$T/u/s/old/data.mdb")" = 0 ] || fail "setup: data.mdb is not root's"
uset mount "name=old,store=$T/u/s/old,mountpoint=$T/u/peek" && [ "$(cat "$T/u/peek/f")" = "old data" ] \
	&& [ "$(stat -c %u "$T/u/s/old/data.mdb")" = $U ] \
	&& ok "4: a user's store with root's files is mounted and its files given to the user" \
	|| fail "4: old store: $(uerr)"
uset unmount old && uset forget old || fail "old: $(uerr)"

# 5. a sticky directory of another user is no mount point (as fusermount3)
mkdir -p "$T/sticky"
chmod 1777 "$T/sticky"
uset mount "name=st,store=$T/u/s/st,mountpoint=$T/sticky,create" \
	&& fail "5: nobody mounted over root's sticky directory" || true
uerr | grep -q "^EACCES" && ok "5: EACCES on root's sticky 1777 directory: $(uerr)" \
	|| fail "5: $(uerr)"
not_mounted "$T/sticky" || fail "5: sticky is mounted"
[ -e "$T/u/s/st" ] && fail "7: refused mount left its new store $T/u/s/st"

# 7. refused commands leave no files
mkdir -p "$T/plain" "$T/u/plain"
uset mount "name=pl,store=$T/u/plain,mountpoint=$T/u/peek" && fail "7: plain dir mounted"
[ -z "$(ls -A "$T/u/plain")" ] && ok "7: a refused plain directory stays empty" \
	|| fail "7: left in the plain directory: $(ls -A "$T/u/plain")"
xset mount "name=pl,store=$T/plain,mountpoint=$T/rootm" && fail "7: plain dir mounted"
[ -z "$(ls -A "$T/plain")" ] || fail "7: left in root's plain directory: $(ls -A "$T/plain")"
had_lock=0
[ -e /dbfs.lock ] && had_lock=1
xset mount "name=dotdot,store=/..,mountpoint=$T/rootm" && fail "7: store=/.. accepted"
[ $had_lock = 1 ] || [ ! -e /dbfs.lock ] && ok "7: store=/.. left no /dbfs.lock" \
	|| { fail "7: store=/.. left /dbfs.lock"; rm -f /dbfs.lock; }
xset mount "name=huge,store=$T/huge,mountpoint=$T/rootm,create,map_size=16000000T" \
	&& fail "7: map_size=16000000T accepted"
[ ! -e "$T/huge" ] && ok "7: a create that failed left no directory" \
	|| fail "7: left $T/huge: $(ls -A "$T/huge")"

# 8. user strings in log lines are escaped
as_user setfattr -n "user.mfs.bogus
injected line" -v x "$M" 2>/dev/null
uset mount "name=n1,store=$T/u/s/n
forged: entry,mountpoint=$T/u/peek"
wait_for 5 grep -q "bogus" "$T/mfs.log" || fail "8: no log line for the bogus attribute"
grep -q "^injected line" "$T/mfs.log" && fail "8: a newline reached the log unescaped"
grep -q "^forged: entry" "$T/mfs.log" && fail "8: a newline in a value reached the log"
grep -q 'bogus\\ninjected line' "$T/mfs.log" && ok "8: a newline is logged escaped" \
	|| fail "8: $(grep -A1 bogus "$T/mfs.log" | head -3)"

# 10. per-user limits: user_max_dbfs=3 at manager start
for n in 1 2 3 4; do
	as_user mkdir -p "$T/u/l$n"
	if uset mount "name=l$n,store=$T/u/s/l$n,mountpoint=$T/u/l$n,create"; then
		[ $n = 4 ] && fail "10: a 4th DBFS was allowed"
	else
		[ $n = 4 ] && uerr | grep -q "^EDQUOT" && ok "10: EDQUOT for the 4th DBFS: $(uerr)" \
			|| fail "10: l$n: $(uerr)"
	fi
done
[ ! -e "$T/u/s/l4" ] || fail "10: the refused 4th left its store"
for n in 1 2 3; do
	uset unmount "l$n" && uset forget "l$n" || fail "10: unmount/forget l$n: $(uerr)"
done
uset mount "name=l4,store=$T/u/s/l4,mountpoint=$T/u/l4,create" && ok "10: room again after forget" \
	|| fail "10: l4 after forgetting three: $(uerr)"
uset unmount l4 && uset forget l4 || fail "10: l4: $(uerr)"
# quotas add up to at most user_max_bytes (a second manager, same checks)
M2=$T/mfs2
mkdir -p "$M2"
"$MFS" -f -o "state=$T/state2,allow_other,user_max_bytes=10M" "$M2" >>"$T/mfs.log" 2>&1 &
PIDS="$PIDS $!"
M2PID=$!
wait_for 10 is_mounted "$M2" || fail "10: second manager"
u2set() { as_user setfattr -n "user.mfs.$1" -v "$2" "$M2" 2>/dev/null; }
u2err() { as_user getfattr --only-values -n user.mfs.error "$M2" 2>/dev/null; }
as_user mkdir -p "$T/u/q1" "$T/u/q2"
u2set mount "name=q1,store=$T/u/s/q1,mountpoint=$T/u/q1,create" && fail "10: no quota accepted"
u2err | grep -q "^EDQUOT.*quota_bytes= of at most 10485760" && ok "10: a quota is required" \
	|| fail "10: $(u2err)"
u2set mount "name=q1,store=$T/u/s/q1,mountpoint=$T/u/q1,create,quota_bytes=6M" \
	|| fail "10: q1 6M: $(u2err)"
u2set mount "name=q2,store=$T/u/s/q2,mountpoint=$T/u/q2,create,quota_bytes=6M" \
	&& fail "10: quotas over user_max_bytes accepted"
u2err | grep -q "^EDQUOT" && ok "10: EDQUOT when quotas add up to more: $(u2err)" || fail "$(u2err)"
u2set config "name=q1,quota_bytes=11M" && fail "10: config over user_max_bytes accepted"
u2err | grep -q "^EDQUOT" && ok "10: config is limited too" || fail "10: config: $(u2err)"
u2set config "name=q1,quota_bytes=4M" || fail "10: config within the limit: $(u2err)"
u2set mount "name=q2,store=$T/u/s/q2,mountpoint=$T/u/q2,create,quota_bytes=6M" \
	&& ok "10: room after lowering a quota" || fail "10: q2: $(u2err)"
stop_pid $M2PID || fail "10: second manager exit"

# root is not limited
for n in 1 2 3 4; do
	mkdir -p "$T/r$n"
	xset mount "name=r$n,store=$T/sr$n,mountpoint=$T/r$n,create" || fail "10: root r$n"
done

# every verb on root's DBFS is refused, and changes nothing (its feed is
# its owner's: EACCES; root's subscription rs stays, none is added)
xset subscribe "name=rootfs,sub=rs" || fail "root's subscribe: $(xget error)"
conf_of() { xget dbfs.$1 | grep -E "^(state|mountpoint|store|owner|options|want|connection)="; }
conf0=$(conf_of rootfs)
for v in "unmount rootfs" "unmount rootfs,force" "config name=rootfs,iops=1" "forget rootfs" \
	"mount name=rootfs,store=$T/u/s/x,mountpoint=$T/u/peek" "sync rootfs" \
	"subscribe name=rootfs,sub=us" "unsubscribe name=rootfs,sub=rs"; do
	uset ${v%% *} "${v#* }" && fail "verb ${v%% *} by nobody accepted on rootfs"
	uerr | grep -q -e "^EPERM" -e "^EEXIST" -e "^EACCES" || fail "verb $v: $(uerr)"
done
subs=$(xget stats.rootfs | sed -n 's/^feed_sub\.\([^=]*\)=.*/\1/p' | tr '\n' ' ')
[ "$subs" = "rs " ] || fail "rootfs's subscriptions after the refused verbs: '$subs'"
[ "$(conf_of rootfs)" = "$conf0" ] ||
	fail "rootfs's status changed: $(xget dbfs.rootfs)"
xset unsubscribe "name=rootfs,sub=rs" || fail "root's unsubscribe: $(xget error)"
is_mounted "$T/rootd/mp" && ok "every verb refused on root's DBFS" || fail "rootfs lost"

# 2 and 6. after SIGKILL: no re-mount through a swapped path, no stacked mounts
uset mount "name=u2,store=$T/u/s/2,mountpoint=$T/u/y/mp,create" || fail "u2: $(uerr)"
kills=0
while [ $kills -lt 3 ]; do
	kill -KILL $MPID
	wait $MPID 2>/dev/null
	"$MFS" -f -o "state=$T/state,allow_other,user_max_dbfs=3" "$M" >>"$T/mfs.log" 2>&1 &
	MPID=$!
	PIDS="$PIDS $MPID"
	wait_for 10 sh -c "getfattr -n user.mfs.status '$M' >/dev/null" || fail "no restart"
	wait_for 20 sh -c "[ \"\$(getfattr --only-values -n user.mfs.list '$M' |
		sed -n 's/^name=rootfs,state=\([a-z]*\).*/\1/p')\" = mounted ]" || fail "rootfs back"
	kills=$((kills + 1))
done
[ "$(mounts_at "$T/rootd/mp")" = 1 ] && ok "6: one mount after 3 SIGKILLs and restarts" \
	|| fail "6: $(mounts_at "$T/rootd/mp") mounts stacked at rootd/mp"
wait_for 20 sh -c "getfattr --only-values -n user.mfs.list '$M' | grep -q 'name=u2,state=mounted'" \
	|| fail "u2 not back"
kill -KILL $MPID
wait $MPID 2>/dev/null
# the stale mount is at y/mp; y becomes a symlink to a root directory
as_user mv "$T/u/y" "$T/u/y2"
as_user ln -s "$T/rootd2" "$T/u/y"
"$MFS" -f -o "state=$T/state,allow_other,user_max_dbfs=3" "$M" >>"$T/mfs.log" 2>&1 &
MPID=$!
PIDS="$PIDS $MPID"
wait_for 10 sh -c "getfattr -n user.mfs.status '$M' >/dev/null" || fail "no restart"
wait_for 20 sh -c "getfattr --only-values -n user.mfs.list '$M' | grep -q 'name=u2,state=failed'" \
	&& ok "2: re-mount through a swapped path refused: $(xget dbfs.u2 | grep reason)" \
	|| fail "2: u2 is $(state_of u2)"
[ "$(mounts_at "$T/rootd2/mp")" = 0 ] && [ "$(cat "$T/rootd2/mp/root-file")" = keep ] \
	&& ok "2: nothing mounted over root's directory" || fail "2: mounted over rootd2/mp"
stop_pid $MPID || fail "exit"
n=$(awk -v t="$T" 'index($5, t) == 1' /proc/self/mountinfo | wc -l)
[ "$n" = 0 ] && ok "a clean stop leaves no mount behind" || fail "$n mounts left under $T"
