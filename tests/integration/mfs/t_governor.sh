#!/bin/sh
# Governor limits, checked through counters (no timing thresholds):
# max_concurrent caps requests in flight, iops and bandwidth buckets hold a
# DBFS back (throttled counter), limits change live with config and show in
# stats; another DBFS keeps working meanwhile.
. "$(dirname "$0")/lib.sh"

M=$T/mfs
start_manager "$M" threads=4,governor=latency
mkdir -p "$T/ma" "$T/mb"
xset mount "name=a,store=$T/sa,mountpoint=$T/ma,create,max_concurrent=1" || fail "mount a"
xset mount "name=b,store=$T/sb,mountpoint=$T/mb,create" || fail "mount b"
stat_of() { xget "stats.$1" | sed -n "s/^$2=//p"; }

writers() { # dir count
	i=0
	wp=""
	while [ $i -lt 8 ]; do
		dd if=/dev/zero of="$1/w$i" bs=64k count="$2" conv=fsync 2>/dev/null &
		wp="$wp $!"
		i=$((i + 1))
	done
	for p in $wp; do wait "$p" || fail "writer $p"; done
}
writers "$T/ma" 16
[ "$(stat_of a peak_inflight)" = 1 ] && ok "max_concurrent=1 holds: peak 1" \
	|| fail "peak_inflight $(stat_of a peak_inflight)"
writers "$T/mb" 16
# informational: how many requests b had in flight without a cap
echo "b (no cap) peaked at $(stat_of b peak_inflight) requests in flight"

xset config "name=a,max_concurrent=0,iops=200" || fail "config iops"
[ "$(stat_of a iops_limit)" = 200 ] && ok "iops limit live" || fail "iops_limit"
t0=$(stat_of a throttled)
i=0
while [ $i -lt 60 ]; do echo $i >"$T/ma/n$i"; i=$((i + 1)); done
[ "$(stat_of a throttled)" -gt "$t0" ] && ok "iops bucket throttled a ($(stat_of a throttled))" \
	|| fail "not throttled"
[ "$(cat "$T/mb/w0" | wc -c)" = 1048576 ] && ok "b unaffected" || fail "b"

xset config "name=a,iops=0,bandwidth=4M" || fail "config bandwidth"
[ "$(stat_of a bandwidth_limit)" = 4194304 ] || fail "bandwidth_limit"
t0=$(stat_of a throttled)
dd if=/dev/zero of="$T/ma/big" bs=1M count=6 conv=fsync 2>/dev/null || fail "dd"
[ "$(stat_of a throttled)" -gt "$t0" ] && ok "bandwidth bucket throttled a" || fail "bw not throttled"
xset config "name=a,bandwidth=0" && [ "$(stat_of a bandwidth_limit)" = 0 ] && ok "limits removed" \
	|| fail "remove limits"

# The express lane (governor=latency): while b has concurrent requests (8 writers), the
# requests of a, a single client, are served by the express thread; b's are
# not. Counters only: the writers run until a's client has done its work.
x0=$(stat_of a express)
touch "$T/ma/q"
writers_on "$T/mb/x" 256k 8
# a's client: getxattr (never cached by the kernel) in a loop until the
# express thread served some of it (bounded: 600 rounds), then stop the writers
n=0
while [ "$(stat_of a express)" -le "$x0" ] && [ $n -lt 600 ]; do
	getfattr -n user.none "$T/ma/q" >/dev/null 2>&1
	n=$((n + 1))
done
writers_off
[ "$(stat_of a express)" -gt "$x0" ] && ok "express thread served a ($(stat_of a express))" \
	|| fail "express never served a"
[ "$(stat_of b express)" = 0 ] && ok "b (heavy) not on the express lane" \
	|| fail "b on the express lane: $(stat_of b express)"
