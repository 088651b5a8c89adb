#!/bin/sh
# Test harness: mount a fresh file system in a private temporary directory and
# tear everything down on every exit path.
#
# Sourced by the test scripts. Environment:
#   FS_TARGET   dbfs (default): start "$MFS_BIN -f --dbfs STORE -o create MNT";
#               tmpfs: mount the kernel's tmpfs instead, to validate the tests
#               themselves against a reference file system.
#   MFS_BIN     the mfs binary (set by meson).
#   DBFS_FSCK   dbfs-fsck (set by meson): run on the store after every unmount.
#   STORE_SIZE  size of the private tmpfs that holds the DBFS store (and, for
#               FS_TARGET=tmpfs, of the mount itself). Default 2g (a limit only).
#   MFS_OPTS    extra -o options for mfs (comma separated).
#
# After fs_mount:  $T is the temporary directory, $MNT the mount point, $OUT a
# directory on another file system (for EXDEV and for reference copies).
#
# Exit code 77 tells meson that a test was skipped.

set -eu

FS_TARGET=${FS_TARGET:-dbfs}
STORE_SIZE=${STORE_SIZE:-2g}
MFS_OPTS=${MFS_OPTS:-}
T=""
MNT=""
OUT=""
STORE=""
MFS_PID=""
MFS_LOG=""
# How many 0.1 s polls to wait for a mount or an exit (bounded, ~10 s).
POLLS=100

log() { echo "[$(basename "$0")] $*" >&2; }
die() { log "FAIL: $*"; exit 1; }
skip() { log "SKIP: $*"; exit 77; }

need_root() { [ "$(id -u)" -eq 0 ] || skip "needs root"; }
need_dbfs() { [ "$FS_TARGET" = dbfs ] || skip "applies to DBFS only (FS_TARGET=$FS_TARGET)"; }
need_prog() {
	for p in "$@"; do
		command -v "$p" >/dev/null 2>&1 || skip "$p is not installed (tools/deps)"
	done
}

# From the mount table, not stat(): a mount whose daemon died fails stat()
# with ENOTCONN but is still there and must still be unmounted.
is_mounted() { awk -v p="$1" '$5 == p { f = 1 } END { exit !f }' /proc/self/mountinfo; }
mount_gone() { ! is_mounted "$MNT"; }

# Poll until "$@" succeeds, at most POLLS times 0.1 s. Returns 1 on timeout.
wait_for() {
	_wf_i=0
	while ! "$@"; do
		_wf_i=$((_wf_i + 1))
		[ "$_wf_i" -ge "$POLLS" ] && return 1
		sleep 0.1
	done
	return 0
}

mfs_alive() { [ -n "$MFS_PID" ] && kill -0 "$MFS_PID" 2>/dev/null; }
mfs_gone() { ! mfs_alive; }

mfs_log_dump() {
	if [ -n "$MFS_LOG" ] && [ -s "$MFS_LOG" ]; then
		log "--- mfs log (last 40 lines) ---"
		tail -n 40 "$MFS_LOG" >&2
	fi
}

# Start serving the DBFS in $STORE at $MNT; extra -o options in $1.
mfs_start() {
	opts="create"
	[ -n "$MFS_OPTS" ] && opts="$opts,$MFS_OPTS"
	[ -n "${1:-}" ] && opts="$opts,$1"
	"$MFS_BIN" -f --dbfs "$STORE" -o "$opts" "$MNT" >>"$MFS_LOG" 2>&1 &
	MFS_PID=$!
	_ms_i=0
	while ! is_mounted "$MNT"; do
		if mfs_gone; then
			wait "$MFS_PID" 2>/dev/null && _ms_rc=0 || _ms_rc=$?
			MFS_PID=""
			mfs_log_dump
			die "mfs exited with status $_ms_rc before mounting $MNT"
		fi
		_ms_i=$((_ms_i + 1))
		if [ "$_ms_i" -ge "$POLLS" ]; then
			mfs_log_dump
			die "mfs did not mount $MNT within 10 s"
		fi
		sleep 0.1
	done
}

# Unmount $MNT and wait for the mfs we started to exit. Never fails silently:
# returns 1 if anything had to be forced.
mfs_stop() {
	_stop_rc=0
	if ! is_mounted "$MNT" && mfs_alive; then
		# Never mounted, or the mount went away: nothing will make it exit.
		kill -TERM "$MFS_PID" 2>/dev/null || true
	fi
	if is_mounted "$MNT" && ! mfs_alive; then
		log "the file system's daemon is gone; clearing its dead mount"
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null ||
			umount -l "$MNT" 2>/dev/null || true
		_stop_rc=1
	fi
	if is_mounted "$MNT"; then
		if ! wait_for fusermount3 -u "$MNT" 2>/dev/null; then
			log "fusermount3 -u $MNT kept failing; lazy unmount"
			fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
			_stop_rc=1
		fi
	fi
	if [ -n "$MFS_PID" ]; then
		if ! wait_for mfs_gone; then
			log "mfs $MFS_PID still running 10 s after unmount; SIGTERM"
			kill -TERM "$MFS_PID" 2>/dev/null || true
			if ! wait_for mfs_gone; then
				kill -KILL "$MFS_PID" 2>/dev/null || true
			fi
			_stop_rc=1
		fi
		if wait "$MFS_PID" 2>/dev/null; then :; else
			_stop_st=$?
			log "mfs exited with status $_stop_st"
			[ "$_stop_st" -ne 0 ] && _stop_rc=1
		fi
		MFS_PID=""
	fi
	return $_stop_rc
}

# Kill the daemon with SIGKILL (a crash) and clear the dead mount.
mfs_crash() {
	[ -n "$MFS_PID" ] || die "mfs_crash: no mfs running"
	kill -KILL "$MFS_PID"
	wait "$MFS_PID" 2>/dev/null || true
	MFS_PID=""
	fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null ||
		umount -l "$MNT" 2>/dev/null || true
	wait_for mount_gone || die "could not clear the dead mount $MNT"
}

# fs_mount [mfs -o options]: create $T, mount the target at $MNT.
fs_mount() {
	T=$(mktemp -d "${TMPDIR:-/tmp}/mfs-fs-test.XXXXXX")
	chmod 0755 "$T" # an unprivileged uid must reach the mount point
	trap fs_cleanup EXIT
	# Interrupted (meson's timeout sends SIGTERM): the daemon may be hung, so
	# the cleanup kills it first instead of waiting for an unmount.
	trap 'FS_INTERRUPTED=1; exit 130' INT
	trap 'FS_INTERRUPTED=1; exit 143' TERM
	trap 'FS_INTERRUPTED=1; exit 129' HUP
	trap 'exit 141' PIPE
	MNT="$T/mnt"
	OUT="$T/out"
	STORE="$T/store"
	MFS_LOG="$T/mfs.log"
	mkdir "$MNT" "$OUT" "$STORE"
	chmod 0777 "$OUT"
	case "$FS_TARGET" in
	tmpfs)
		mount -t tmpfs -o "size=$STORE_SIZE,mode=0755" "mfs-test-tmpfs" "$MNT" ||
			skip "cannot mount tmpfs (needs root)"
		;;
	dbfs)
		[ -n "${MFS_BIN:-}" ] || die "MFS_BIN is not set (meson sets it when mfs is built)"
		[ -x "$MFS_BIN" ] || die "MFS_BIN=$MFS_BIN is not an executable"
		# The store lives on its own small tmpfs so that statfs, ENOSPC and
		# space accounting see nothing but this store.
		if [ "$(id -u)" -eq 0 ]; then
			mount -t tmpfs -o "size=$STORE_SIZE" "mfs-test-store" "$STORE" ||
				die "cannot mount a tmpfs for the store"
		fi
		mfs_start "${1:-}"
		;;
	*) die "unknown FS_TARGET=$FS_TARGET (dbfs or tmpfs)" ;;
	esac
	chmod 0755 "$MNT" || die "chmod of the mount root failed"
}

# Run dbfs-fsck (DBFS_FSCK, set by meson) on the unmounted store: every
# invariant must hold after every test. Returns 1 with its report if not.
fsck_store() {
	[ -n "${DBFS_FSCK:-}" ] || return 0
	if ! "$DBFS_FSCK" "$STORE" >"$T/fsck.log" 2>&1; then
		log "dbfs-fsck $STORE found problems:"
		tail -n 40 "$T/fsck.log" >&2
		return 1
	fi
}

# Unmount and mount again (DBFS: the data must survive; tmpfs: a no-op).
fs_remount() {
	[ "$FS_TARGET" = dbfs ] || return 0
	cd /
	mfs_stop || die "unclean unmount of $MNT"
	fsck_store || die "the store is inconsistent after unmount"
	mfs_start "${1:-}"
}

fs_cleanup() {
	_rc=$?
	trap - EXIT INT TERM HUP PIPE
	set +e
	cd /
	[ "$_rc" -ne 0 ] && [ "$_rc" -ne 77 ] && mfs_log_dump
	if [ -n "$T" ]; then
		case "$FS_TARGET" in
		tmpfs)
			if is_mounted "$MNT"; then
				umount "$MNT" 2>/dev/null || umount -l "$MNT"
			fi
			;;
		dbfs)
			if [ -n "${FS_INTERRUPTED:-}" ] && mfs_alive; then
				log "interrupted: killing mfs $MFS_PID"
				kill -KILL "$MFS_PID" 2>/dev/null
				wait_for mfs_gone
			fi
			if mfs_stop; then
				if [ "$_rc" -eq 0 ] && ! fsck_store; then
					log "FAIL: the store is inconsistent after the test"
					_rc=1
				fi
			else
				[ "$_rc" -eq 0 ] && _rc=1
			fi
			;;
		esac
		if is_mounted "$STORE"; then
			umount "$STORE" 2>/dev/null || umount -l "$STORE"
		fi
		if is_mounted "$MNT" || is_mounted "$STORE"; then
			log "left a mount behind in $T; not removing it"
		else
			rm -rf "$T"
		fi
	fi
	exit "$_rc"
}

# Run a command as an unprivileged user (uid/gid 65534, no groups).
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# Expect a command to fail; fail the test if it succeeds.
must_fail() {
	if "$@" 2>/dev/null; then die "expected failure: $*"; fi
}

# A small tree exercising what archivers and copiers must keep: nested dirs,
# binary and empty files, a sparse file, hard links, symlinks, a FIFO, odd
# names, modes, times, user xattrs (and, as root, owners and trusted xattrs).
make_tree() {
	d=$1
	mkdir -p "$d/a/b/c" "$d/empty dir" "$d/x"
	head -c 200000 /dev/urandom >"$d/a/random.bin"
	: >"$d/a/empty"
	printf 'hello\n' >"$d/a/b/hello.txt"
	printf 'name with spaces\n' >"$d/x/with space & 'quote'"
	printf 'utf8\n' >"$d/x/caf$(printf '\303\251')"
	truncate -s 5000000 "$d/a/sparse"
	printf 'tail' >>"$d/a/sparse"
	ln "$d/a/random.bin" "$d/a/b/c/hardlink.bin"
	ln -s ../random.bin "$d/a/b/symlink"
	ln -s /nonexistent/target "$d/x/dangling"
	mkfifo "$d/x/fifo"
	i=0
	while [ $i -lt 50 ]; do
		printf 'file %d\n' $i >"$d/x/f$i"
		i=$((i + 1))
	done
	chmod 0600 "$d/a/empty"
	chmod 0750 "$d/a/b"
	chmod 1777 "$d/x"
	setfattr -n user.comment -v "a comment" "$d/a/b/hello.txt"
	setfattr -n user.bin -v 0x00010203ff "$d/a/random.bin"
	setfattr -n user.dir -v dirval "$d/a/b/c"
	if [ "$(id -u)" -eq 0 ]; then
		chown 1234:5678 "$d/a/b/hello.txt"
		chown -h 4321:8765 "$d/a/b/symlink"
		setfattr -n trusted.t -v trustedval "$d/a/empty"
	fi
	touch -d '2010-01-02 03:04:05.123456789' "$d/a/b/hello.txt"
	touch -h -d '2011-01-02 03:04:05' "$d/a/b/symlink"
	touch -d '2012-01-02 03:04:05' "$d/a/b/c"
}

# What must be equal between two copies of a tree: names, types, modes,
# owners, sizes, link counts, mtimes (seconds), link targets, contents, xattrs.
tree_manifest() {
	# (directory sizes are file-system specific: left out)
	(cd "$1" && find . -printf '%p|%y|%m|%U|%G|%s|%n|%Ts|%l\n' |
		awk -F'|' -v OFS='|' '$2 == "d" { $6 = "-" } { print }' | sort &&
		find . -type f -exec sha256sum {} + | sort &&
		find . -print0 | sort -z | xargs -0 getfattr -h -d -m - -e hex 2>/dev/null |
		grep -v '^security\.selinux')
}

# Compare two trees; on a difference print it and fail.
same_tree() {
	tree_manifest "$1" >"$T/manifest.a"
	tree_manifest "$2" >"$T/manifest.b"
	if ! diff -u "$T/manifest.a" "$T/manifest.b" >&2; then
		die "trees differ: $1 vs $2"
	fi
	diff -r --no-dereference -x fifo "$1" "$2" >&2 || die "diff -r: $1 vs $2 differ"
}

# Every ACL under a directory, in name order.
acl_manifest() {
	(cd "$1" && find . ! -type l -print0 | sort -z | xargs -0 getfacl -p 2>/dev/null)
}

refuse_settled() { mfs_gone || is_mounted "$MNT"; }

# mfs_refuses WHAT [-o options]: starting mfs on $STORE must fail cleanly:
# exit non-zero (not by a signal) within 10 s with a message, never mount.
mfs_refuses() {
	_what=$1
	_opts=${2:-create}
	"$MFS_BIN" -f --dbfs "$STORE" -o "$_opts" "$MNT" >"$T/refused.log" 2>&1 &
	MFS_PID=$!
	wait_for refuse_settled || true
	if is_mounted "$MNT"; then
		mfs_stop || true
		die "mfs mounted a store that is $_what"
	fi
	if mfs_alive; then
		mfs_stop || true
		die "mfs neither mounted nor exited within 10 s for a store that is $_what"
	fi
	wait "$MFS_PID" && _rf_rc=0 || _rf_rc=$?
	MFS_PID=""
	[ "$_rf_rc" -ne 0 ] || die "mfs exited 0 for a store that is $_what"
	[ "$_rf_rc" -lt 128 ] || { cat "$T/refused.log" >&2; die "mfs died of signal $((_rf_rc - 128)) for a store that is $_what"; }
	[ -s "$T/refused.log" ] || die "mfs gave no message for a store that is $_what"
	log "refused ($_what), exit $_rf_rc: $(head -c 300 "$T/refused.log" | tr '\n' ' ')"
}
