#!/bin/sh
# Crash test: run crashload on a DBFS, SIGKILL the daemon at a random point,
# clear the dead mount, check the store with dbfs-fsck --allow-orphans (the
# crash state must be consistent), remount, check that every file the log
# says was made durable is there byte for byte (and every durably removed
# name is gone), unmount, check with a strict dbfs-fsck (mounting reclaimed
# the orphans), and go on with the next iteration on the same store.
#
#   crash.sh CRASHLOAD ITERATIONS SEED
#
# SEED "random" picks one (printed). MFS_OPTS: extra mount options.
# FS_TARGET=dir validates the test itself: the workload runs in a plain
# directory and is itself killed; the verification must pass.
. "$(dirname "$0")/../../stress/fs/harness.sh"

load=$1
iters=$2
seed=$3
[ "$seed" = random ] && seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
log "seed $seed, $iters iterations, options '${MFS_OPTS:-}' (reproduce: $0 $load $iters $seed)"
r=$seed

# Next pseudo-random number in [0, $1).
rand() {
	r=$(((r * 1103515245 + 12345) % 2147483648))
	echo $(((r / 65536) % $1))
}

lines() { [ -f "$LOG" ] && wc -l <"$LOG" || echo 0; }
load_gone() { ! kill -0 "$H_CHILD" 2>/dev/null; }

# start_load DIR ITERATION: start the workload; wait until it has logged a
# random number of new records (bounded); returns with it still running.
start_load() {
	target=$(($(lines) + 1 + $(rand 400)))
	"$load" "$1" "$LOG" "$((seed * 1000 + $2))" 100000000 2>"$T/load.err" &
	H_CHILD=$!
	i=0
	while [ "$(lines)" -lt "$target" ]; do
		if load_gone; then
			wait "$H_CHILD" && st=0 || st=$?
			H_CHILD=""
			cat "$T/load.err" >&2
			die "iteration $2: the workload exited ($st) before the crash"
		fi
		i=$((i + 1))
		[ "$i" -ge 600 ] && die "iteration $2: the workload logged nothing for 60 s"
		sleep 0.1
	done
}

stop_load() {
	wait_for load_gone || { kill -KILL "$H_CHILD"; die "the workload hung on the dead mount"; }
	wait "$H_CHILD" 2>/dev/null || true
	H_CHILD=""
}

h_init
LOG="$OUT/log"

if [ "${FS_TARGET:-dbfs}" = dir ]; then
	mkdir "$OUT/data"
	n=1
	while [ "$n" -le "$iters" ]; do
		start_load "$OUT/data" "$n"
		kill -KILL "$H_CHILD"
		stop_load
		"$load" --verify "$OUT/data" "$LOG" || die "iteration $n: verification failed"
		n=$((n + 1))
	done
	log "ok"
	exit 0
fi

h_need_dbfs
h_start "${MFS_OPTS:-}"
n=1
while [ "$n" -le "$iters" ]; do
	start_load "$MNT" "$n"
	h_crash
	stop_load
	h_fsck 0 --allow-orphans || die "iteration $n: the store is inconsistent after the crash"
	h_start "${MFS_OPTS:-}"
	"$load" --verify "$MNT" "$LOG" ||
		die "iteration $n: data made durable before the crash is wrong or missing"
	h_stop || die "iteration $n: unclean unmount"
	h_fsck 0 || die "iteration $n: dbfs-fsck after a remount found problems"
	h_start "${MFS_OPTS:-}"
	n=$((n + 1))
done
h_stop || die "unclean unmount"
log "ok: $iters crashes"
