#!/bin/sh
# The worker that a DBFS whose client waits for each answer stays with
# (mfs/sticky.h) runs on the client's CPU (mfs/colocate.h): with a client
# pinned to one CPU, then to another, some thread of mfs is allowed on that
# CPU alone within a bounded wait, and the DBFS's colocations counter
# grew. Without colocate.c no thread of mfs is ever pinned (no rings:
# uring=off). Counters and affinities, no timing.
. "$(dirname "$0")/lib.sh"
[ "$(nproc)" -ge 2 ] || { echo "SKIP: one CPU"; exit 77; }
command -v taskset >/dev/null || { echo "SKIP: no taskset (util-linux)"; exit 77; }

M=$T/mfs
start_manager "$M" threads=4,uring=off
mkdir -p "$T/ma"
xset mount "name=a,store=$T/sa,mountpoint=$T/ma,create" || fail "mount a"
stat_of() { xget "stats.$1" | sed -n "s/^$2=//p"; }
# pinned_to CPU: is some thread of mfs allowed on CPU alone?
pinned_to() {
	grep -q -x "Cpus_allowed_list:[[:space:]]*$1" /proc/"$MPID"/task/*/status
}
# the two CPUs the clients use: the first two this test may run on
CPUS=$(taskset -c -p $$ | sed 's/.*: //' | tr ',' '\n' |
	awk -F- '{ for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c }' | head -2)
[ "$(echo "$CPUS" | wc -l)" -eq 2 ] || { echo "SKIP: fewer than 2 CPUs allowed"; exit 77; }

set -- $CPUS
X=$1 Y=$2
[ -n "$(stat_of a colocations)" ] || fail "no colocations counter in stats.a"
moved_since() { [ "$(stat_of a colocations)" -gt "$1" ]; }

# client CPU: one thread creating files one after another, pinned to CPU,
# until told to stop (or 200,000 files); shell builtins only, so one client
# thread (one pid) makes every request
n=0
client() {
	n=$((n + 1))
	rm -f "$T/stop"
	taskset -c "$1" sh -c 'i=0; while [ ! -e "$1/stop" ] && [ $i -lt 200000 ]; do
		: >"$1/ma/c$2_$i" || exit 1; i=$((i + 1)); done' sh "$T" "$n" &
	CPID=$!
	PIDS="$PIDS $CPID"
}
stop_client() {
	: >"$T/stop"
	wait_for 20 is_dead "$CPID" || fail "client $n did not stop"
	wait "$CPID" || fail "client $n failed"
}
where() { grep -h Cpus_allowed_list /proc/"$MPID"/task/*/status | sort | uniq -c | tr '\n' ' '; }

# The first client: its worker ends up on its CPU (it may be there already:
# the mount's own requests came from mfs). Each next client, on the other
# CPU, must move it.
client "$X"
wait_for 30 pinned_to "$X" && ok "a worker runs on the client's CPU $X" ||
	fail "no thread of mfs on CPU $X alone, the client's ($(where))"
stop_client
for c in "$Y" "$X"; do
	c0=$(stat_of a colocations)
	client "$c"
	wait_for 30 moved_since "$c0" && wait_for 30 pinned_to "$c" &&
		ok "the worker moved to the client's CPU $c (colocations $c0 -> $(stat_of a colocations))" ||
		fail "no move to CPU $c: colocations $c0 -> $(stat_of a colocations); $(where)"
	stop_client
done
