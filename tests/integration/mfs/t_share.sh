#!/bin/sh
# The governor follows usage (issue 20): with -o mem= and two DBFSs, a busy
# one gets a worker share beyond its fair share and more of the cache
# memory than the idle one, both shown in stats and in mfsctl top; when it
# goes idle again both come back (no share, equal cache limits).
. "$(dirname "$0")/lib.sh"

M=$T/mfs
# uring=off: a worker share is a share of the /dev/fuse pool; at
# enable_uring=Y the rings serve the writers and the pool's demand stays
# below one worker (a fresh-clone run at Y: demand 1.33, 0.83, 0.45, share 0)
start_manager "$M" "threads=8,mem=64M,uring=off"
mkdir -p "$T/ma" "$T/mb"
xset mount "name=a,store=$T/sa,mountpoint=$T/ma,create" || fail "mount a"
xset mount "name=b,store=$T/sb,mountpoint=$T/mb,create" || fail "mount b"
wait_for 10 is_mounted "$T/mb" || { fail "b not mounted"; exit 1; }
stat_of() { awk -F= -v k="$2" '$1 == k { print $2 }' "$M/$1/stats"; }
half=33554432

equal() { [ "$(stat_of a cache_limit)" = $half ] && [ "$(stat_of b cache_limit)" = $half ]; }
wait_for 10 equal || fail "idle: cache limits $(stat_of a cache_limit) $(stat_of b cache_limit), expected $half each"
[ "$(stat_of a worker_share)" = 0 ] || fail "idle a has worker_share $(stat_of a worker_share)"
ok "idle: equal cache limits ($half), no worker share"

# 8 writers on a, each fsyncing 64 KiB files: several requests in flight
writers_on "$T/ma/w" 64k 4
shared() {
	s=$(stat_of a worker_share); la=$(stat_of a cache_limit); lb=$(stat_of b cache_limit)
	[ "${s:-0}" -gt 0 ] && [ "$la" -gt "$lb" ]
}
wait_for 30 shared ||
	fail "busy a: worker_share $(stat_of a worker_share), demand $(stat_of a demand), cache $(stat_of a cache_limit) vs b $(stat_of b cache_limit)"
ok "busy a: worker_share $(stat_of a worker_share) (demand $(stat_of a demand)), cache $(stat_of a cache_limit) vs b $(stat_of b cache_limit)"
if [ -x "$(dirname "$MFSCTL")/mfsctl-top" ]; then
	frame=$(sh "$MFSCTL" -m "$M" top -b -n 1 -p)
	wk=$(printf '%s\n' "$frame" | awk '$1 == "a" { print $(NF - 1) }')
	ca=$(printf '%s\n' "$frame" | awk '$1 == "a" { print $NF }')
	cb=$(printf '%s\n' "$frame" | awk '$1 == "b" { print $NF }')
	[ "$wk" != "-" ] && [ "$ca" -gt "$cb" ] || fail "top does not show the shares: $frame"
	ok "top shows a's share $wk and cache $ca (b $cb)"
fi
writers_off
wait_for 40 equal || fail "idle again: cache limits $(stat_of a cache_limit) $(stat_of b cache_limit)"
back() { [ "$(stat_of a worker_share)" = 0 ]; }
wait_for 20 back || fail "idle again: worker_share $(stat_of a worker_share)"
ok "idle again: equal cache limits, no worker share"
exit $FAILS
