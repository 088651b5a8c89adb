#!/bin/sh
# Crash test: run crashload on a DBFS, SIGKILL the daemon at a random point,
# clear the dead mount, check the store with dbfs-fsck --allow-orphans (the
# crash state must be consistent; every third time, reclaim the orphans with
# dbfs-fsck --repair, which must leave a clean store), remount, check that every file the log
# says was made durable is there byte for byte (and every durably removed
# name is gone), unmount, check with a strict dbfs-fsck (mounting reclaimed
# the orphans), and go on with the next iteration on the same store.
#
#   crash.sh CRASHLOAD ITERATIONS SEED
#
# SEED "random" picks one (printed). MFS_OPTS: extra mount options.
# LOADS=N (default 2) runs N workloads at once, each in its own directory
# with its own log, so that the daemon is killed with concurrent requests
# in flight (group commit). FS_TARGET=dir validates the test itself: the
# workloads run in a plain directory and are themselves killed; the
# verification must pass.
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

loads=${LOADS:-2}

# Records in the first workload's log.
lines() { [ -f "$LOG.1" ] && wc -l <"$LOG.1" || echo 0; }
loads_alive() {
	for p in $H_CHILD; do
		kill -0 "$p" 2>/dev/null || return 1
	done
}
loads_gone() {
	for p in $H_CHILD; do
		kill -0 "$p" 2>/dev/null && return 1
	done
	return 0
}

# start_load DIR ITERATION: start the workloads; wait until the first has
# logged a random number of new records (bounded); return with all running.
start_load() {
	target=$(($(lines) + 1 + $(rand 400)))
	H_CHILD=""
	k=1
	while [ "$k" -le "$loads" ]; do
		"$load" "$1/w$k" "$LOG.$k" "$((seed * 1000 + $2 * 10 + k))" 100000000 \
			2>"$T/load.$k.err" &
		H_CHILD="$H_CHILD $!"
		k=$((k + 1))
	done
	i=0
	while [ "$(lines)" -lt "$target" ]; do
		if ! loads_alive; then
			cat "$T"/load.*.err >&2
			die "iteration $2: a workload exited before the crash"
		fi
		i=$((i + 1))
		[ "$i" -ge 600 ] && die "iteration $2: the workload logged nothing for 60 s"
		sleep 0.1
	done
}

stop_load() {
	if ! wait_for loads_gone; then
		cat "$T"/load.*.err >&2
		die "a workload hung on the dead mount"
	fi
	# shellcheck disable=SC2086
	wait $H_CHILD 2>/dev/null || true
	H_CHILD=""
}

verify() {
	k=1
	while [ "$k" -le "$loads" ]; do
		"$load" --verify "$1/w$k" "$LOG.$k" || return 1
		k=$((k + 1))
	done
}

h_init
LOG="$OUT/log"

if [ "${FS_TARGET:-dbfs}" = dir ]; then
	mkdir "$OUT/data"
	n=1
	while [ "$n" -le "$iters" ]; do
		start_load "$OUT/data" "$n"
		# shellcheck disable=SC2086
		kill -KILL $H_CHILD
		stop_load
		verify "$OUT/data" || die "iteration $n: verification failed"
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
	if [ $((n % 3)) -eq 0 ]; then
		# Reclaim the orphans with dbfs-fsck instead of the next mount.
		"$DBFS_FSCK" --repair "$STORE" >"$T/fsck.out" 2>&1 && st=0 || st=$?
		if [ "$st" -ne 0 ] && [ "$st" -ne 4 ]; then
			cat "$T/fsck.out" >&2
			die "iteration $n: dbfs-fsck --repair exited $st on the crashed store"
		fi
		h_fsck 0 || die "iteration $n: not clean after dbfs-fsck --repair"
	fi
	h_start "${MFS_OPTS:-}"
	verify "$MNT" ||
		die "iteration $n: data made durable before the crash is wrong or missing"
	h_stop || die "iteration $n: unclean unmount"
	h_fsck 0 || die "iteration $n: dbfs-fsck after a remount found problems"
	h_start "${MFS_OPTS:-}"
	n=$((n + 1))
done
h_stop || die "unclean unmount"
log "ok: $iters crashes"
