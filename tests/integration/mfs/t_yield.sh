#!/bin/sh
# CPU yielding of the default governor (mfs(8), GOVERNOR): while b runs 8
# concurrent writers and a's single client keeps a active, the workers
# process b's requests at SCHED_IDLE (b's yielded grows, a's stays 0, a
# worker thread is seen with policy SCHED_IDLE in /proc/PID/task/TID/stat)
# and return to SCHED_OTHER once the load stops; with yield_share=1 the CPU
# share holds b back (yield_waits grows) yet b keeps writing; with CPU hogs on every CPU
# the starvation guard lets b through (starved grows, b keeps writing);
# governor=off never yields; while the kernel offers no FUSE over io_uring
# there is no ring thread. The governor's checks run over /dev/fuse
# (uring=off), whatever the kernel offers. Counters and /proc states only,
# no timing.
. "$(dirname "$0")/lib.sh"

M=$T/mfs
stat_of() { xget "stats.$1" | sed -n "s/^$2=//p"; }

mount_ab() {
	mkdir -p "$T/ma" "$T/mb"
	xset mount "name=a,store=$T/sa,mountpoint=$T/ma,create,attr_timeout=0,entry_timeout=0" ||
		fail "mount a: $(xget error)"
	xset mount "name=b,store=$T/sb,mountpoint=$T/mb,create" || fail "mount b: $(xget error)"
	touch "$T/ma/q"
}

# Policy (field 41 of /proc/PID/task/TID/stat) of every thread but the
# io_uring threads (named mfs-ring*; they wait at SCHED_IDLE by design,
# t_uring.sh checks them): the workers, and the main, control and signal
# threads, which never yield.
worker_policies() {
	for t in /proc/"$MPID"/task/*; do
		case "$(cat "$t/comm" 2>/dev/null)" in
		mfs-ring*) ;;
		*) sed 's/.*) //' "$t/stat" 2>/dev/null | awk '{ print $39 }' ;;
		esac
	done
}
ring_threads() {
	for t in /proc/"$MPID"/task/*; do cat "$t/comm" 2>/dev/null; done | grep -c '^mfs-ring'
}
some_worker_idle() { worker_policies | grep -qx 5; }
no_worker_idle() { ! worker_policies | grep -qx 5; }

# a's client: one request at a time (stat reaches the daemon: attr_timeout=0)
# until COND holds, at most N rounds; sets SEEN_IDLE when a worker was seen
# at SCHED_IDLE meanwhile
client_until() { # N COND...
	n=$1
	shift
	r=0
	while ! "$@" && [ $r -lt "$n" ]; do
		stat "$T/ma/q" >/dev/null || fail "stat on a"
		[ -z "$SEEN_IDLE" ] && some_worker_idle && SEEN_IDLE=1
		r=$((r + 1))
	done
	"$@"
}
b_yielded() { [ "$(stat_of b yielded)" -gt "$Y0" ]; }
b_yielded_enough() { [ "$(stat_of b yielded)" -gt "$Y0" ] && [ -n "$SEEN_IDLE" ]; }
b_starved() { [ "$(stat_of b starved)" -gt "$S0" ]; }
b_waited() { [ "$(stat_of b yield_waits)" -gt 0 ]; }
# b's 8 writers run while a's client goes on until COND (client_until N COND)
under_load() {
	writers_on "$T/mb/w" 1M 4
	client_until "$@"
	r=$?
	writers_off
	return $r
}

offered() { xget status | sed -n 's/^uring_offered=//p'; }
start_manager "$M" threads=4,yield_share=1
off0=$(offered)
mount_ab
# A kernel that offers no FUSE over io_uring gets no ring thread from mfs
# (uring=auto): they would serve nothing, and status says so. (Only when
# nobody turned enable_uring on meanwhile: it is system-wide.)
if [ "$off0" = no ] && [ "$(offered)" = no ]; then
	[ "$(ring_threads)" = 0 ] && xget status | grep -qx 'uring_queues=0' &&
		ok "no ring threads while the kernel offers no rings" ||
		fail "rings not offered, yet $(ring_threads) ring threads, $(xget status | grep uring_queues)"
fi
stop_pid "$MPID" || fail "manager exit status"

# The governor of the /dev/fuse pool (uring=off): where the kernel offers
# rings (enable_uring=Y) they would serve most of b's writes, the workers
# would see b's requests only when handed them, and whether one is caught
# at SCHED_IDLE would be luck (once, at Y, the first phase never ended).
rm -rf "$T/state" "$T/sa" "$T/sb"
start_manager "$M" threads=4,yield_share=1,uring=off
mount_ab
Y0=$(stat_of b yielded)
SEEN_IDLE=""
under_load 3000 b_yielded_enough
ok_y=$?
[ $ok_y = 0 ] && ok "b (8 writers) yielded to a: yielded=$(stat_of b yielded)" ||
	fail "b never yielded (yielded=$(stat_of b yielded), worker seen idle: ${SEEN_IDLE:-no})"
[ -n "$SEEN_IDLE" ] && ok "a worker ran b's requests at SCHED_IDLE" ||
	fail "no worker seen at SCHED_IDLE"
[ "$(stat_of a yielded)" = 0 ] && ok "a (light) never yields" ||
	fail "a yielded $(stat_of a yielded)"
W0=$(stat_of b write_bytes)
SEEN_IDLE=x
under_load 3000 b_waited
ok_w=$?
[ $ok_w = 0 ] && ok "the CPU share held b back: yield_waits=$(stat_of b yield_waits)" ||
	fail "b never held by the CPU share (yield_waits=$(stat_of b yield_waits))"
[ "$(stat_of b write_bytes)" -gt "$W0" ] && ok "b kept writing within its share" ||
	fail "b wrote nothing within its share"
wait_for 10 no_worker_idle && ok "every worker back at SCHED_OTHER after the load" ||
	fail "threads left at SCHED_IDLE: $(worker_policies | tr '\n' ' ')"

# Starvation guard: CPU hogs on every CPU leave a SCHED_IDLE worker almost
# no CPU; b's requests then take long, the guard gives b normal priority
# back, and b keeps writing.
HP=""
ncpu=$(nproc)
i=0
while [ $i -le "$ncpu" ]; do
	(while :; do :; done) &
	HP="$HP $!"
	i=$((i + 1))
done
PIDS="$PIDS $HP"
S0=$(stat_of b starved)
W0=$(stat_of b write_bytes)
SEEN_IDLE=x
writers_on "$T/mb/w" 1M 4
client_until 3000 b_starved
ok_s=$?
for p in $HP; do kill "$p" 2>/dev/null; done
writers_off
[ $ok_s = 0 ] && ok "starvation guard fired under CPU hogs: starved=$(stat_of b starved)" ||
	fail "guard never fired (starved=$(stat_of b starved), yielded=$(stat_of b yielded))"
[ "$(stat_of b write_bytes)" -gt "$W0" ] && ok "b kept writing under the hogs" ||
	fail "b wrote nothing under the hogs"
stop_pid "$MPID" || fail "manager exit status"

# governor=off: no yielding at all
rm -rf "$T/state" "$T/sa" "$T/sb"
start_manager "$M" threads=4,governor=off,yield_share=1,uring=off
mount_ab
Y0=$(stat_of b yielded)
SEEN_IDLE=x
under_load 300 false
[ "$(stat_of b yielded)" = "$Y0" ] && [ "$(stat_of b write_bytes)" -gt 0 ] &&
	ok "governor=off: b wrote and never yielded" || fail "governor=off: yielded=$(stat_of b yielded)"
stop_pid "$MPID" || fail "manager exit status"
