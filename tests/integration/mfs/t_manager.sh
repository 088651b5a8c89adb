#!/bin/sh
# The manager: every verb through setfattr/getfattr, the read-only folders,
# several DBFSs doing I/O at once, config live, unmount, forget, and a clean
# stop on SIGTERM with nothing left mounted.
. "$(dirname "$0")/lib.sh"

M=$T/mfs
start_manager "$M"

names=$(getfattr -d -m - "$M" 2>/dev/null | sed -n 's/^\(user\.mfs\.[a-z.]*\)=.*/\1/p' | tr '\n' ' ')
for a in mount unmount config forget list status error; do
	case " $names " in *" user.mfs.$a "*) ;; *) fail "getfattr -d lacks user.mfs.$a: $names" ;; esac
done
ok "getfattr -d -m - lists the verbs"

xget status | grep -q "^version=" && ok "status" || fail "status: $(xget status)"
threads0=$(xget status | sed -n 's/^threads=//p')

for n in a b c; do
	mkdir -p "$T/m$n"
	xset mount "name=$n,store=$T/s$n,mountpoint=$T/m$n,create" || fail "mount $n: $(cat "$T/xset.err")"
done
[ "$(xget list | grep -c 'state=mounted')" = 3 ] && ok "three DBFSs mounted" || fail "list: $(xget list)"
for n in a b c; do is_mounted "$T/m$n" || fail "$T/m$n not mounted"; done
threads3=$(xget status | sed -n 's/^threads=//p')
[ "$threads0" = "$threads3" ] && ok "threads constant: $threads0 with 0 and 3 DBFSs" \
	|| fail "threads $threads0 -> $threads3"

# several DBFSs doing I/O at once
for n in a b c; do
	(
		i=0
		while [ $i -lt 200 ]; do
			echo "$n $i" >"$T/m$n/f$i" || exit 1
			i=$((i + 1))
		done
		i=0
		while [ $i -lt 200 ]; do
			[ "$(cat "$T/m$n/f$i")" = "$n $i" ] || exit 1
			i=$((i + 1))
		done
	) &
	eval "io_$n=\$!"
done
for n in a b c; do
	eval "wait \$io_$n" && ok "I/O on $n" || fail "I/O on $n"
done

# read-only folders
ls "$M" | tr '\n' ' ' | grep -q "a b c" && ok "folders a b c" || fail "ls $M: $(ls "$M")"
grep -q "^state=mounted" "$M/a/status" && ok "a/status" || fail "a/status: $(cat "$M/a/status")"
grep -q "^requests=[1-9]" "$M/a/stats" && ok "a/stats counts requests" || fail "a/stats: $(cat "$M/a/stats")"
grep -q "^options=" "$M/a/config" && ok "a/config" || fail "a/config"
( echo x >"$M/a/status" ) 2>/dev/null && fail "status writable"
touch "$M/new" 2>/dev/null && fail "manager root writable"
xget dbfs.a | grep -q "^mountpoint=$T/ma" && ok "dbfs.a" || fail "dbfs.a: $(xget dbfs.a)"
[ "$(cat "$M/.list")" = "$(xget list)" ] && ok "cat .list = user.mfs.list" || fail ".list"
grep -q "^pid=$MPID" "$M/.status" && ok "cat .status" || fail ".status: $(cat "$M/.status")"
ls -a "$M" | grep -q "^\.list$" || fail ".list not listed"
xget stats.b | grep -q "^write_bytes=[1-9]" && ok "stats.b" || fail "stats.b: $(xget stats.b)"

# live config: a quota, then EDQUOT
xset config "name=c,quota_bytes=64K,max_concurrent=2,iops=100000" || fail "config: $(cat "$T/xset.err")"
xget stats.c | grep -q "^quota_bytes=65536" && ok "config quota live" || fail "quota: $(xget stats.c)"
xget stats.c | grep -q "^max_concurrent=2" || fail "max_concurrent not applied"
if dd if=/dev/zero of="$T/mc/big" bs=64k count=4 conv=fsync 2>"$T/dd.err"; then
	fail "write over the quota succeeded"
else
	grep -qi "quota" "$T/dd.err" && ok "EDQUOT over the quota" || fail "dd: $(cat "$T/dd.err")"
fi
rm -f "$T/mc/big"
grep -q "quota_bytes=64K" "$M/c/config" && ok "config kept in c/config" || fail "c/config: $(cat "$M/c/config")"

# unmount, remount by name (registered configuration), forget
xset unmount b || fail "unmount b: $(cat "$T/xset.err")"
not_mounted "$T/mb" && ok "b unmounted" || fail "b still mounted"
xget list | grep -q "name=b,state=unmounted" || fail "list after unmount: $(xget list)"
xset mount "name=b" || fail "re-mount b by name: $(cat "$T/xset.err")"
[ "$(cat "$T/mb/f7")" = "b 7" ] && ok "b re-mounted by name with its data" || fail "b data"
xset unmount b && xset forget b || fail "forget b: $(cat "$T/xset.err")"
xget list | grep -q "name=b" && fail "b still listed after forget"
[ -f "$T/sb/data.mdb" ] && ok "forget keeps the store" || fail "store removed by forget"
[ -d "$M/b" ] && fail "folder b still there"

# the other DBFSs kept working through all of it
[ "$(cat "$T/ma/f1")" = "a 1" ] && ok "a still serves" || fail "a broken"

# more DBFSs than a 64 KiB attribute holds: list is cut at a line and says
# how many more there are and where the whole list is
long=$T/$(printf '%0200d' 0)
i=0
while [ $i -lt 160 ]; do
	mkdir -p "$long/s$i" "$long/m$i"
	xset mount "name=many$i,store=$long/s$i,mountpoint=$long/m$i,create" ||
		fail "mount many$i: $(cat "$T/xset.err")"
	i=$((i + 1))
done
all=$(wc -l <"$M/.list")
xget list >"$T/list.txt" || fail "user.mfs.list with $all DBFSs"
shown=$(grep -c '^name=' "$T/list.txt")
more=$(tail -n 1 "$T/list.txt" | sed -n 's/^\.\.\. \([0-9]*\) more DBFSs: the whole list is in .*\/\.list$/\1/p')
[ -n "$more" ] && [ $((shown + more)) = "$all" ] && [ "$(wc -c <"$T/list.txt")" -le 65536 ] &&
	ok "user.mfs.list with $all DBFSs: $shown lines and '... $more more'" ||
	fail "list of $all: $shown shown, tail '$(tail -n 1 "$T/list.txt")'"

stop_pid $MPID; rc=$?
[ $rc = 0 ] && ok "manager exits 0 on SIGTERM" || fail "manager exit $rc"
for m in "$M" "$T/ma" "$T/mc" "$long/m0" "$long/m159"; do not_mounted "$m" || fail "$m left mounted"; done
ok "nothing left mounted"
