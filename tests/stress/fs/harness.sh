#!/bin/sh
# Harness for the DBFS stress and crash tests: a private temporary directory,
# one mfs daemon started and stopped (or killed) by us, bounded waits on every
# condition, and cleanup on every exit path. Sourced; needs MFS_BIN and
# DBFS_FSCK (set by meson). Exit code 77 means "skipped" to meson.
#
# After h_init: $T the temporary directory, $MNT the mount point, $STORE the
# store directory, $OUT a directory outside the mount for logs.
# H_KEEP=DIR: on failure, copy the store and the logs there for a post-mortem.

set -eu

T=""
H_TMPFS=""
MNT=""
STORE=""
OUT=""
MFS_PID=""
MFS_LOG=""
POLLS=100 # 0.1 s each: ~10 s for any one condition

log() { echo "[$(basename "$0")] $*" >&2; }
die() { log "FAIL: $*"; exit 1; }
skip() { log "SKIP: $*"; exit 77; }

is_mounted() { mountpoint -q "$1" 2>/dev/null; }
not_mounted() { ! mountpoint -q "$1" 2>/dev/null; }
mfs_alive() { [ -n "$MFS_PID" ] && kill -0 "$MFS_PID" 2>/dev/null; }
mfs_gone() { ! mfs_alive; }

# Poll until "$@" succeeds, at most POLLS times 0.1 s; 1 on timeout.
wait_for() {
	i=0
	while ! "$@"; do
		i=$((i + 1))
		[ "$i" -ge "$POLLS" ] && return 1
		sleep 0.1
	done
	return 0
}

h_log_dump() {
	if [ -n "$MFS_LOG" ] && [ -s "$MFS_LOG" ]; then
		log "--- mfs log (last 30 lines) ---"
		tail -n 30 "$MFS_LOG" >&2
	fi
}

h_need_dbfs() {
	[ -n "${MFS_BIN:-}" ] || skip "MFS_BIN is not set (mfs is not built)"
	[ -x "$MFS_BIN" ] || die "MFS_BIN=$MFS_BIN is not an executable"
	[ -n "${DBFS_FSCK:-}" ] && [ -x "$DBFS_FSCK" ] || die "DBFS_FSCK is not set"
	[ -e /dev/fuse ] || skip "no /dev/fuse"
	command -v fusermount3 >/dev/null 2>&1 || skip "fusermount3 is not installed"
}

h_init() {
	T=$(mktemp -d "${TMPDIR:-/tmp}/mfs-stress.XXXXXX")
	trap h_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	MNT="$T/mnt"
	STORE="$T/store"
	OUT="$T/out"
	MFS_LOG="$T/mfs.log"
	mkdir "$MNT" "$STORE" "$OUT"
	# The store on its own tmpfs when we may mount one: fast, and nothing
	# but this store in it.
	if [ "$(id -u)" -eq 0 ] &&
		mount -t tmpfs -o "size=${STORE_SIZE:-4g}" mfs-stress-store "$STORE" 2>/dev/null; then
		H_TMPFS="$STORE" # unmounted by h_cleanup even if a test changes STORE
	fi
}

# h_start [extra -o options]: start mfs on $STORE at $MNT, wait for the mount.
h_start() {
	opts="create"
	[ -n "${1:-}" ] && opts="$opts,$1"
	"$MFS_BIN" -f --dbfs "$STORE" -o "$opts" "$MNT" >>"$MFS_LOG" 2>&1 &
	MFS_PID=$!
	i=0
	while ! is_mounted "$MNT"; do
		if ! mfs_alive; then
			wait "$MFS_PID" && rc=0 || rc=$?
			MFS_PID=""
			h_log_dump
			die "mfs exited with status $rc before mounting $MNT"
		fi
		i=$((i + 1))
		[ "$i" -ge "$POLLS" ] && { h_log_dump; die "mfs did not mount $MNT within 10 s"; }
		sleep 0.1
	done
}

# Unmount and wait for our mfs to exit; 1 if anything had to be forced or
# mfs exited non-zero.
h_stop() {
	stop_rc=0
	if is_mounted "$MNT"; then
		if ! wait_for fusermount3 -u "$MNT" 2>/dev/null; then
			log "fusermount3 -u $MNT kept failing; lazy unmount"
			fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
			stop_rc=1
		fi
	fi
	if [ -n "$MFS_PID" ]; then
		if ! wait_for mfs_gone; then
			log "mfs $MFS_PID still running 10 s after unmount; SIGTERM"
			kill -TERM "$MFS_PID" 2>/dev/null || true
			wait_for mfs_gone || kill -KILL "$MFS_PID" 2>/dev/null || true
			stop_rc=1
		fi
		wait "$MFS_PID" && st=0 || st=$?
		[ "$st" -ne 0 ] && { log "mfs exited with status $st"; stop_rc=1; }
		MFS_PID=""
	fi
	return $stop_rc
}

# A crash: SIGKILL our mfs and clear the dead mount.
h_crash() {
	[ -n "$MFS_PID" ] || die "h_crash: no mfs running"
	kill -KILL "$MFS_PID"
	wait "$MFS_PID" 2>/dev/null || true
	MFS_PID=""
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	wait_for not_mounted "$MNT" || die "could not clear the dead mount $MNT"
}

# h_fsck EXPECTED [options]: run dbfs-fsck on $STORE, fail unless it exits EXPECTED.
h_fsck() {
	want=$1
	shift
	"$DBFS_FSCK" "$@" "$STORE" >"$T/fsck.out" 2>&1 && got=0 || got=$?
	if [ "$got" -ne "$want" ]; then
		log "dbfs-fsck $* $STORE exited $got, expected $want:"
		head -n 50 "$T/fsck.out" >&2
		return 1
	fi
	return 0
}

h_cleanup() {
	h_rc=$?
	trap - EXIT INT TERM
	set +e
	cd /
	[ "$h_rc" -ne 0 ] && [ "$h_rc" -ne 77 ] && h_log_dump
	# H_CHILD: our other children (pids, space separated), killed first.
	if [ -n "${H_CHILD:-}" ]; then
		# shellcheck disable=SC2086
		kill -KILL $H_CHILD 2>/dev/null
		# shellcheck disable=SC2086
		wait $H_CHILD 2>/dev/null
	fi
	if [ -n "$T" ]; then
		h_stop || { [ "$h_rc" -eq 0 ] && h_rc=1; }
		if [ -n "${H_KEEP:-}" ] && [ "$h_rc" -ne 0 ]; then
			mkdir -p "$H_KEEP" && cp -a "$OUT" "$STORE" "$MFS_LOG" "$H_KEEP/" 2>/dev/null
			log "kept the store, the logs and the workload's files in $H_KEEP"
		fi
		if [ -n "${H_TMPFS:-}" ] && is_mounted "$H_TMPFS"; then
			umount "$H_TMPFS" 2>/dev/null || umount -l "$H_TMPFS"
		fi
		if is_mounted "$MNT" || { [ -n "${H_TMPFS:-}" ] && is_mounted "$H_TMPFS"; }; then
			log "left a mount behind in $T; not removing it"
		else
			rm -rf "$T"
		fi
	fi
	exit $h_rc
}
