#!/bin/sh
# Run fs-stress (or fs-contend: any program taking DIR SEED OPS MAX MANIFEST
# and --check DIR MANIFEST) on a fresh DBFS, then unmount, check the store
# with dbfs-fsck, remount and verify the files it left against its manifest
# (so the data also survives a clean remount).
#
#   run-stress.sh PROGRAM OPS SEED [MAX_FILE_SIZE]
#
# SEED "random" picks one (printed). PARALLEL=N runs N instances at once
# (seeds SEED..SEED+N-1, each in its own directory: concurrent writers for
# the daemon). FS_TARGET=dir runs fs-stress in a plain temporary directory
# instead, to validate the test itself. MFS_OPTS: extra mount options (e.g.
# durability=none).
. "$(dirname "$0")/harness.sh"

stress=$1
ops=$2
seed=$3
max=${4:-1048576}
[ "$seed" = random ] && seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
log "seed $seed, $ops operations (reproduce: $0 $stress $ops $seed $max)"

par=${PARALLEL:-1}

# run_all DIR: run the instances in DIR, fail if any fails.
run_all() {
	pids=""
	k=0
	while [ "$k" -lt "$par" ]; do
		s=$((seed + k))
		"$stress" "$1" "$s" "$ops" "$max" "$T/manifest.$s" >"$T/stress.$s.log" 2>&1 &
		pids="$pids $!"
		k=$((k + 1))
	done
	bad=0
	k=0
	for p in $pids; do
		s=$((seed + k))
		if ! wait "$p"; then
			log "fs-stress seed $s failed:"
			cat "$T/stress.$s.log" >&2
			bad=1
		fi
		k=$((k + 1))
	done
	return $bad
}

check_all() {
	k=0
	while [ "$k" -lt "$par" ]; do
		"$stress" --check "$1" "$T/manifest.$((seed + k))" || return 1
		k=$((k + 1))
	done
}

if [ "${FS_TARGET:-dbfs}" = dir ]; then
	h_init
	run_all "$OUT" || die "fs-stress failed (seed $seed)"
	check_all "$OUT" || die "manifest check failed (seed $seed)"
	log "ok"
	exit 0
fi

h_need_dbfs
h_init
h_start "${MFS_OPTS:-}"
run_all "$MNT" || die "fs-stress failed on DBFS (seed $seed)"
h_stop || die "unclean unmount"
h_fsck 0 || die "dbfs-fsck found problems after the stress (seed $seed)"
h_start "${MFS_OPTS:-}"
check_all "$MNT" || die "data differs after a remount (seed $seed)"
h_stop || die "unclean unmount"
log "ok"
