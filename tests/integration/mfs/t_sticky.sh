#!/bin/sh
# A client that waits for each answer stays with one worker thread
# (mfs/sticky.h), through a real mount: 2048 O_DIRECT reads by dd with
# four workers waiting. A request can change worker only after the worker
# gave the DBFS back (releases: a request that took over 10 ms, one queued
# behind others), and then for at most MFS_STICKY_WINDOW + 1 = 9 requests
# (the "+ 1" below: for a release just before the count began). Counters,
# no timing.
. "$(dirname "$0")/lib.sh"

M=$T/mfs
# the pool's stickiness: over FUSE over io_uring (enable_uring=Y) the rings serve
# the requests and hand some to the workers, which is not what this counts
start_manager "$M" threads=4,uring=off
mkdir -p "$T/ma"
xset mount "name=a,store=$T/sa,mountpoint=$T/ma,create" || fail "mount a"
stat_of() { xget "stats.$1" | sed -n "s/^$2=//p"; }
count_from_here() {
	h0=$(stat_of a handoffs)
	r0=$(stat_of a releases)
}
one_worker_served() { # what
	h=$(($(stat_of a handoffs) - h0))
	r=$(($(stat_of a releases) - r0))
	echo "$1: handoffs $h, releases $r"
	[ "$h" -le $((9 * (r + 1))) ] && ok "one worker served $1 ($h handoffs, $r releases)" ||
		fail "$h requests of $1 changed worker with only $r releases"
}

dd if=/dev/zero of="$T/ma/f" bs=1M count=1 conv=fsync 2>/dev/null || fail "write f"
# the writes overlap (writeback): one calm pass first, so the count below
# starts with the DBFS on one worker
dd if="$T/ma/f" of=/dev/null bs=4k count=256 iflag=direct 2>/dev/null || fail "dd"
count_from_here
i=0
while [ $i -lt 8 ]; do
	dd if="$T/ma/f" of=/dev/null bs=4k count=256 iflag=direct 2>/dev/null || fail "dd $i"
	i=$((i + 1))
done
one_worker_served "the one-at-a-time reader"

# Creating files one after another: the kernel sends each close's RELEASE
# in the background, queued while the shell already looks up the next name
# (tools/bench/fs's create row); that alone must not take the DBFS off its
# worker.
count_from_here
i=0
while [ $i -lt 500 ]; do
	: >"$T/ma/c$i" || fail "create c$i"
	i=$((i + 1))
done
one_worker_served "the creates"

# Unlinking them one after another: each unlink's FORGET waits behind the
# shell's next requests for up to 8 reads in 24 (the kernel's forget_batch),
# and each of those finds it queued; that alone must not give the DBFS back
# (sticky.h: mfs_sticky_note_from). Before that rule: about one release per
# 8 unlinks (60 for 500); a request that takes over 10 ms on a busy machine
# still releases it, so a few are allowed.
count_from_here
rm -f "$T"/ma/c* || fail "unlink c*" # one process: unlink after unlink
one_worker_served "the unlinks"
r=$(($(stat_of a releases) - r0))
[ "$r" -le 20 ] && ok "the unlinks kept their worker ($r releases)" ||
	fail "the unlinks gave the DBFS back $r times (FORGETs queued behind them)"
