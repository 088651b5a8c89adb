#!/bin/sh
# FUSE over io_uring (mfs/uring.h): with the fuse module's enable_uring on,
# DBFS requests are served over the per-CPU rings (the ring counter of
# stats grows), bytes written and read back through them are right (also
# O_DIRECT and 1 MiB requests), governor limits still hold, a busy unmount
# is refused and a forced one works while another DBFS keeps its ring, and
# SIGTERM with a file held open on a ring-served DBFS takes every mount
# down. Ring threads exist only once the kernel offered rings (mfs started
# at enable_uring=N starts them at the first DBFS mounted after it became
# Y). uring=off keeps DBFSs on /dev/fuse. Counters only, no timing.
. "$(dirname "$0")/lib.sh"

# The setting is system-wide: this test runs alone in its suite
# (is_parallel: false in meson.build) and holds it (uring_param_hold).
uring_param_hold

# mfs started while the kernel offers no rings has no ring thread; the
# rings start with the first DBFS the kernel offers them to
M=$T/mfs
uring_param N
start_manager "$M" threads=4
stat_of() { xget "stats.$1" | sed -n "s/^$2=//p"; }
xget status | grep -q '^uring_queues=0$' && xget status | grep -q '^uring_offered=no$' &&
	ok "enable_uring=N: no ring threads" || fail "enable_uring=N: $(xget status | grep uring)"
uring_param Y
mkdir -p "$T/ma" "$T/mb"
xset mount "name=a,store=$T/sa,mountpoint=$T/ma,create" || fail "mount a: $(xget error)"
xset mount "name=b,store=$T/sb,mountpoint=$T/mb,create" || fail "mount b: $(xget error)"

# data through the rings, two DBFSs at once, buffered and O_DIRECT
head -c 5000000 /dev/urandom >"$T/ref"
cp "$T/ref" "$T/ma/f" & p1=$!
cp "$T/ref" "$T/mb/f" & p2=$!
wait $p1 || fail "cp to a"
wait $p2 || fail "cp to b"
cmp -s "$T/ref" "$T/ma/f" && ok "a: 5 MB read back" || fail "a: bytes differ"
cmp -s "$T/ref" "$T/mb/f" && ok "b: 5 MB read back" || fail "b: bytes differ"
dd if="$T/ref" of="$T/ma/d" bs=1M oflag=direct conv=fsync 2>/dev/null || fail "O_DIRECT write"
dd if="$T/ma/d" of="$T/d.back" bs=4k iflag=direct 2>/dev/null || fail "O_DIRECT read"
cmp -s "$T/ref" "$T/d.back" && ok "O_DIRECT 1M writes, 4K reads round trip" || fail "O_DIRECT bytes"
mkdir "$T/ma/dir" && mv "$T/ma/f" "$T/ma/dir/g" && ln -s g "$T/ma/dir/l" &&
	[ "$(readlink "$T/ma/dir/l")" = g ] && rm "$T/ma/dir/l" "$T/ma/dir/g" && rmdir "$T/ma/dir" &&
	ok "namespace operations" || fail "namespace operations"
setfattr -n user.k -v v "$T/mb/f" && [ "$(getfattr --only-values -n user.k "$T/mb/f")" = v ] &&
	ok "xattrs" || fail "xattrs"
st=$(xget status)
echo "$st" | grep -q '^uring_queues=[1-9]' && echo "$st" | grep -q '^uring_offered=yes' &&
	ok "status shows the rings" || fail "status: $(echo "$st" | grep uring)"
ra=$(stat_of a ring)
rb=$(stat_of b ring)
[ "${ra:-0}" -gt 0 ] && [ "${rb:-0}" -gt 0 ] && ok "requests served over the rings (a $ra, b $rb)" \
	|| fail "ring counters a=$ra b=$rb"

# roaming: 1 MiB reads let a ring thread leave its CPU; small requests on
# each CPU, 5 ms after the last big one, bring every ring thread home
ring_cpus() { # one line per ring thread: its allowed CPUs
	for t in /proc/$MPID/task/*; do
		grep -q '^mfs-ring' "$t/comm" 2>/dev/null && sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$t/status"
	done
}
all_home() {
	for c in $(seq 0 $(($(nproc) - 1))); do
		taskset -c "$c" dd if="$T/ma/d" of=/dev/null bs=4k count=2 iflag=direct 2>/dev/null
	done
	! ring_cpus | grep -q '[-,]'
}
r0=$(xget status | sed -n 's/^uring_roams=//p')
[ -n "$r0" ] || fail "status has no uring_roams"
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
	# the 1 MiB requests above may have left a thread roaming
	[ "$(ring_cpus | wc -l)" -ge 2 ] && wait_for 10 all_home &&
		ok "ring threads named and pinned, one per CPU" || fail "ring threads: $(ring_cpus)"
	for c in $(seq 0 $(($(nproc) - 1))); do
		taskset -c "$c" dd if="$T/ma/d" of="$T/d.big" bs=1M iflag=direct 2>/dev/null || fail "1M read"
	done
	cmp -s "$T/ref" "$T/d.big" || fail "1M O_DIRECT read bytes"
	r1=$(xget status | sed -n 's/^uring_roams=//p')
	[ "$r1" -gt "$r0" ] && ok "1 MiB reads: ring threads roam ($r0 -> $r1)" || fail "no roaming: $r0 -> $r1"
	wait_for 10 all_home && ok "small requests bring ring threads home" ||
		fail "ring threads still roaming: $(ring_cpus)"
fi

# ring threads wait at SCHED_IDLE (policy 5), and a CPU hog next to one
# puts it back at normal priority (0): it must not starve behind the hog.
# On a loaded machine the guard may hold a thread at normal priority for
# a second at any time, so the test counts the waits begun at SCHED_IDLE
# (each poke below begins one once the guard's second is over) rather
# than catching the thread there.
policy_of_ring() { # policy of mfs-ring$1
	for t in /proc/$MPID/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = "mfs-ring$1" ] &&
			sed 's/^.*) //' "$t/stat" | awk '{ print $39 }'
	done
}
uring_count() { xget status | sed -n "s/^uring_$1=//p"; }
poke0() { taskset -c 0 dd if="$T/ma/d" of=/dev/null bs=4k count="$1" iflag=direct 2>/dev/null; }
idle_waits_grow() { poke0 2; [ "$(uring_count idle_waits)" -gt "$w0" ]; }
normal_now() {
	poke0 20
	[ "$(policy_of_ring 0)" = 0 ] && [ "$(uring_count starved)" -gt "$s0" ]
}
if [ "$(id -u)" = 0 ] && command -v taskset >/dev/null; then
	w0=$(uring_count idle_waits)
	[ -n "$w0" ] || fail "status has no uring_idle_waits"
	wait_for 20 idle_waits_grow && ok "ring threads wait at SCHED_IDLE ($w0 -> $(uring_count idle_waits))" ||
		fail "no waits at SCHED_IDLE: $w0 -> $(uring_count idle_waits)"
	s0=$(uring_count starved)
	taskset -c 0 sh -c 'while :; do :; done' & hog=$!
	PIDS="$PIDS $hog"
	wait_for 20 normal_now && ok "a CPU hog puts ring thread 0 at normal priority" ||
		fail "ring 0 at policy $(policy_of_ring 0), starved $s0 -> $(uring_count starved), next to a hog"
	kill "$hog"
	wait "$hog" 2>/dev/null
fi

# governor limits hold on the ring: an IOPS bucket defers requests
xset config "name=a,iops=100" || fail "config iops"
t0=$(stat_of a throttled)
i=0
while [ $i -lt 40 ]; do echo $i >"$T/ma/n$i"; i=$((i + 1)); done
[ "$(stat_of a throttled)" -gt "$t0" ] && ok "iops limit throttles ring requests" \
	|| fail "not throttled"
[ "$(cat "$T/ma/n39")" = 39 ] || fail "throttled writes lost"
xset config "name=a,iops=0" || fail "remove iops"

# busy unmount refused, forced unmount works, b keeps serving
tail -f "$T/ma/n1" >/dev/null 2>&1 & tp=$!
PIDS="$PIDS $tp"
wait_for 5 test -e "/proc/$tp/fd/3" || true
if xset unmount a; then fail "busy unmount accepted"; else ok "busy unmount refused: $(xget error)"; fi
xset unmount "a,force" || fail "forced unmount: $(xget error)"
wait_for 10 not_mounted "$T/ma" && ok "a forced off" || fail "a still mounted"
kill "$tp" 2>/dev/null
dd if="$T/mb/f" of="$T/b.back" bs=64k iflag=direct 2>/dev/null && cmp -s "$T/ref" "$T/b.back" &&
	ok "b still serves after a's forced unmount" || fail "b broken"
rb2=$(stat_of b ring)
[ "$rb2" -gt "$rb" ] && ok "b still on its ring" || fail "b ring $rb -> $rb2"

# SIGTERM with a file held open on b: every mount goes, the daemon exits
tail -f "$T/mb/f" >/dev/null 2>&1 & tp=$!
PIDS="$PIDS $tp"
stop_pid "$MPID" || fail "manager exit status"
not_mounted "$T/mb" && not_mounted "$M" && ok "SIGTERM took every mount down" \
	|| fail "mounts left: $(grep "$T" /proc/self/mountinfo)"
kill "$tp" 2>/dev/null

# uring=off: nothing over a ring
M=$T/mfs2
rm -rf "$T/state"
start_manager "$M" uring=off
mkdir -p "$T/mc"
xset mount "name=c,store=$T/sc,mountpoint=$T/mc,create" || fail "mount c"
cp "$T/ref" "$T/mc/f" && cmp -s "$T/ref" "$T/mc/f" || fail "c bytes"
[ "$(stat_of c ring)" = 0 ] && ok "uring=off: /dev/fuse only" || fail "c ring $(stat_of c ring)"
xget status | grep -q '^uring_queues=0$' && ok "uring=off: no ring threads" || fail "uring=off status"
grep -E '(warning|error): uring' "$T/mfs.log" && fail "ring trouble in the log"
exit 0
