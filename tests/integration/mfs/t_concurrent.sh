#!/bin/sh
# Concurrent commands: two simultaneous mounts of one name, or of one mount
# point, give exactly one winner; a store held by another mfs is refused;
# two managers run side by side with their own state directories.
. "$(dirname "$0")/lib.sh"

M=$T/mfs
start_manager "$M"
mkdir -p "$T/m1" "$T/m2" "$T/m3" "$T/m4" "$T/m5"

race() { # value1 value2 -> prints the two exit statuses
	setfattr -n user.mfs.mount -v "$1" "$M" 2>"$T/r1" &
	p1=$!
	setfattr -n user.mfs.mount -v "$2" "$M" 2>"$T/r2" &
	p2=$!
	wait $p1; r1=$?
	wait $p2; r2=$?
	echo "$r1 $r2"
}
res=$(race "name=same,store=$T/s1,mountpoint=$T/m1,create" "name=same,store=$T/s2,mountpoint=$T/m2,create")
case "$res" in
"0 1" | "1 0") ok "same name: one winner" ;;
*) fail "same name: $res" ;;
esac
cat "$T/r1" "$T/r2" | grep -q "File exists" && ok "loser got EEXIST" || fail "$(cat "$T/r1" "$T/r2")"
[ "$(xget list | grep -c name=same)" = 1 ] || fail "list: $(xget list)"

res=$(race "name=p,store=$T/s3,mountpoint=$T/m3,create" "name=q,store=$T/s4,mountpoint=$T/m3,create")
case "$res" in
"0 1" | "1 0") ok "same mount point: one winner" ;;
*) fail "same mount point: $res" ;;
esac
cat "$T/r1" "$T/r2" | grep -q "busy" && ok "loser got EBUSY" || fail "$(cat "$T/r1" "$T/r2")"

# a store another mfs holds
mkdir -p "$T/single" "$T/sx"
"$MFS" -f --dbfs "$T/sx" -o create "$T/single" >>"$T/single.log" 2>&1 &
SP=$!
PIDS="$PIDS $SP"
wait_for 10 is_mounted "$T/single" || fail "single"
expect_refused EBUSY mount "name=x,store=$T/sx,mountpoint=$T/m5" ""
not_mounted "$T/m5" || fail "m5 mounted"
stop_pid $SP

# a second manager with its own state directory; the first one's store is refused
mkdir -p "$T/mfs2" "$T/m6"
"$MFS" -f -o "state=$T/state2" "$T/mfs2" >>"$T/mfs2.log" 2>&1 &
P2=$!
PIDS="$PIDS $P2"
wait_for 10 is_mounted "$T/mfs2" || fail "second manager"
used=$(xget list | sed -n 's/.*name=same,.*store=\([^,]*\),.*/\1/p')
setfattr -n user.mfs.mount -v "name=y,store=$used,mountpoint=$T/m6" "$T/mfs2" 2>/dev/null \
	&& fail "second manager opened a store the first holds" || ok "store held by the first manager refused"
getfattr --only-values -n user.mfs.error "$T/mfs2" | grep -q "^EBUSY" || fail "not EBUSY"
setfattr -n user.mfs.mount -v "name=y,store=$T/s6,mountpoint=$T/m6,create" "$T/mfs2" \
	&& ok "second manager mounts its own" || fail "second manager mount"
echo ok >"$T/m6/f" && [ "$(cat "$T/m6/f")" = ok ] || fail "I/O on the second manager's DBFS"
stop_pid $P2 || fail "second manager exit"
not_mounted "$T/m6" || fail "m6 left"
is_mounted "$M" && ok "first manager unaffected" || fail "first manager gone"
