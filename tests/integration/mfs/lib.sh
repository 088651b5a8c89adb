# Shared helpers of the mfs integration tests (sourced, POSIX sh).
#
# Every test: runs in its own temporary directory ($T), waits for conditions
# with a bound (wait_for), starts daemons only through start_* (their pids are
# remembered) and, on every exit path, unmounts what it mounted under $T and
# kills only the processes it started.
#
# Usage: . lib.sh; needs MFS (path of the mfs binary) in the environment or
# as $1 of the test.

set -u
MFS=${MFS:-${1:-}}
[ -x "$MFS" ] || { echo "usage: $0 PATH-TO-mfs" >&2; exit 2; }
MFSCTL=${MFSCTL:-$(dirname "$MFS")/../tools/mfsctl/mfsctl}
if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	echo "SKIP: needs root and /dev/fuse"
	exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/mfs-test.XXXXXX")
PIDS=""
FAILS=0

cleanup() {
	rc=$?
	# unmount everything under $T, deepest first
	for m in $(awk -v t="$T" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null
	done
	# only our own children: a pid waited for long ago may belong to
	# anybody by now (pids wrap within minutes on a busy machine)
	live=""
	for p in $PIDS; do
		is_child "$p" && live="$live $p"
	done
	for p in $live; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in $live; do
		i=0
		while ! is_dead "$p" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		is_child "$p" && kill -KILL "$p" 2>/dev/null
	done
	# a sanitizer build reports into the daemons' logs
	if cat "$T"/*.log 2>/dev/null | grep -E -q "AddressSanitizer|LeakSanitizer|runtime error:"; then
		cat "$T"/*.log | grep -E -A20 "AddressSanitizer|LeakSanitizer|runtime error:" | head -60 >&2
		FAILS=$((FAILS + 1))
	fi
	rm -rf "$T"
	[ $FAILS -gt 0 ] && rc=1
	exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() {
	echo "FAIL: $*" >&2
	FAILS=$((FAILS + 1))
}

ok() {
	echo "ok: $*"
}

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds; false after the bound
wait_for() {
	limit=$(($1 * 20))
	shift
	i=0
	while ! "$@" 2>/dev/null; do
		i=$((i + 1))
		[ $i -ge $limit ] && return 1
		sleep 0.05
	done
	return 0
}

# mount_holders DIR: every process holding something under DIR (its cwd,
# root, an open file or a mapping), a line each: what a busy unmount met
mount_holders() {
	for p in /proc/[0-9]*; do
		for l in "$p/cwd" "$p/root" "$p"/fd/*; do
			t=$(readlink "$l" 2>/dev/null) || continue
			case "$t" in "$1" | "$1"/*) echo "  ${p#/proc/} $(cat "$p/comm" 2>/dev/null) ${l#"$p"/} -> $t" ;; esac
		done
		grep -qsF " $1/" "$p/maps" && echo "  ${p#/proc/} $(cat "$p/comm" 2>/dev/null) maps a file under $1"
	done
}

# unmount_retried NAME DIR: unmount DBFS NAME (mounted at DIR) through the
# manager, retried while busy for 20 s; a first attempt refused prints who
# held DIR then, for the log (the busy unmount after the shared tests'
# workloads is not explained yet, issue 21)
unmount_retried() {
	xset unmount "$1" && return 0
	{
		echo "unmount $1 refused at first: $(cat "$T/xset.err"); holding $2:"
		mount_holders "$2"
	} >&2
	wait_for 20 xset unmount "$1"
}

is_mounted() {
	awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

not_mounted() {
	! is_mounted "$1"
}

# is pid $1 still a child of this shell (not reaped, not reused)?
is_child() {
	[ "$(sed 's/.*) [A-Za-z] \([0-9]*\) .*/\1/' "/proc/$1/stat" 2>/dev/null)" = "$$" ]
}

# a child that exited stays a zombie until waited for: count it as dead
is_dead() {
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
	[ -z "$st" ] || [ "$st" = Z ]
}

# start_manager MOUNTPOINT [extra -o options]: foreground manager, log in $T
start_manager() {
	mkdir -p "$1"
	o="state=$T/state"
	[ -n "${2:-}" ] && o="$o,$2"
	"$MFS" -f -o "$o" "$1" >>"$T/mfs.log" 2>&1 9>&- &
	MPID=$!
	PIDS="$PIDS $MPID"
	wait_for 10 is_mounted "$1" || { cat "$T/mfs.log" >&2; fail "manager did not mount"; exit 1; }
}

# start_dbfs MOUNTPOINT OPTIONS LOG: `mfs --dbfs $S` (the store in S) in the
# foreground, its log in $T/LOG.log, its pid in DPID; the test ends if it
# does not mount
start_dbfs() {
	"$MFS" -f --dbfs "$S" -o "$2" "$1" >>"$T/$3.log" 2>&1 9>&- &
	DPID=$!
	PIDS="$PIDS $DPID"
	wait_for 20 is_mounted "$1" || { cat "$T/$3.log" >&2; fail "$1 not mounted"; exit 1; }
}

# restart_manager NAME: a new manager on $T/state at $M (after a kill or a
# stop); true once DBFS NAME is mounted again (its stats say so: after a
# SIGKILL the stale mount is in the mount table already)
restart_manager() {
	"$MFS" -f -o "state=$T/state" "$M" >>"$T/mfs.log" 2>&1 &
	MPID=$!
	PIDS="$PIDS $MPID"
	wait_for 20 sh -c "getfattr -n user.mfs.status '$M' >/dev/null 2>&1" &&
		wait_for 60 grep -q -x "state=mounted" "$M/$1/stats"
}

# stop_pid PID: SIGTERM, bounded wait, return its exit status
stop_pid() {
	kill -TERM "$1" 2>/dev/null
	wait_for 20 is_dead "$1" || { fail "pid $1 did not exit on SIGTERM"; return 1; }
	wait "$1" 2>/dev/null
}

# xset ATTR VALUE: setfattr on the manager root ($M); prints nothing, returns its status
xset() {
	setfattr -n "user.mfs.$1" -v "$2" "$M" 2>"$T/xset.err"
}

# xget ATTR: value of user.mfs.ATTR on $M
xget() {
	getfattr --only-values -n "user.mfs.$1" "$M" 2>/dev/null
}

# record_after NAME: wait (10 s at most) for a usage record of DBFS NAME
# taken after what was done before the call (stats' record_time is the
# second the record was taken at or after). metrics' request counters
# and the history come from the records (mfs(8), ACCOUNTING).
record_since() {
	r=$(xget "stats.$1" | awk -F= '$1 == "record_time" { print $2 }')
	[ "${r:-0}" -ge "$2" ]
}
record_after() {
	wait_for 10 record_since "$1" $(($(date +%s) + 1)) || fail "no usage record of $1 after now"
}

# expect_refused ERRNAME ATTR VALUE [REASON-PATTERN]: the command must fail
# with that errno (as setfattr prints it) and user.mfs.error must name it.
expect_refused() {
	en=$1 attr=$2 val=$3 pat=${4:-}
	short=$(printf '%.100s' "$val")
	if xset "$attr" "$val"; then
		fail "$attr '$short' was accepted, expected $en"
		return
	fi
	err=$(xget error)
	case "$err" in
	"$en "*) ;;
	*) fail "$attr '$short': error is '$err', expected $en"; return ;;
	esac
	if [ -n "$pat" ] && ! printf '%s' "$err" | grep -q -- "$pat"; then
		fail "$attr '$short': reason '$err' does not match '$pat'"
		return
	fi
	ok "$attr refused with $en: $(printf '%s' "$err" | head -1)"
}

# writers_on PREFIX BS COUNT: 8 writers, each writing PREFIX<i> (dd BS COUNT,
# conv=fsync) over and over until writers_off; their pids are in PIDS.
WP=""
writers_on() {
	rm -f "$T/stopw"
	WP=""
	i=0
	while [ $i -lt 8 ]; do
		(while [ ! -e "$T/stopw" ]; do
			dd if=/dev/zero of="$1$i" bs="$2" count="$3" conv=fsync 2>/dev/null || break
		done) &
		WP="$WP $!"
		i=$((i + 1))
	done
	PIDS="$PIDS $WP"
}
writers_off() {
	touch "$T/stopw"
	for p in $WP; do wait "$p"; done
	WP=""
}

# shim_mfs SHIM: write $T/mfs-shim, which runs $MFS with the LD_PRELOAD shim
# SHIM (tests/fault); under AddressSanitizer its runtime must come first in
# the preload list. Start it with: MFS=$T/mfs-shim start_manager ...
shim_mfs() {
	asan=$(ldd "$MFS" | awk '/libasan/ { print $3 }')
	printf '#!/bin/sh\nLD_PRELOAD="%s" exec "%s" "$@"\n' "${asan:+$asan }$1" "$MFS" >"$T/mfs-shim"
	chmod +x "$T/mfs-shim"
}

# Holding the queue's delivery thread before a piece of reclaim work, so
# that a test sees what waits on any machine (tests/fault/eio_shim.c).
# later_shim SHIM: from here on $MFS runs under the shim, with $FAULT_DIR;
# hold_later / release_later: the thread stops before its next piece, or
# goes on; later_held: wait until it stopped; later_pieces N STATS: let it
# take pieces one by one until the DBFS's STATS file shows reclaim_pieces=N
later_shim() {
	[ -f "$1" ] || { echo "no shim $1" >&2; exit 2; }
	export FAULT_DIR="$T/faulty"
	mkdir -p "$FAULT_DIR"
	shim_mfs "$1"
	MFS=$T/mfs-shim
	trap 'rc=$?; release_later; (exit $rc); cleanup' EXIT
}
hold_later() { : >"$FAULT_DIR/holdlater"; }
release_later() { rm -f "$FAULT_DIR/holdlater"; }
later_held() { wait_for 60 sh -c "[ -e '$FAULT_DIR/later_held' ] && [ ! -e '$FAULT_DIR/step' ]"; }
later_pieces() {
	n=0
	while [ "$(sed -n 's/^reclaim_pieces=//p' "$2")" -lt "$1" ]; do
		[ $((n += 1)) -le 100 ] || return 1
		: >"$FAULT_DIR/step"
		later_held || return 1
	done
	[ "$(sed -n 's/^reclaim_pieces=//p' "$2")" = "$1" ]
}

# bg NAME CMD...: run a command in the background, its status in $T/NAME.rc
# and its output in $T/NAME.out; done_ok NAME: it ended with status 0
bg() {
	n=$1
	shift
	rm -f "$T/$n.rc"
	("$@" >"$T/$n.out" 2>&1; echo $? >"$T/$n.rc") &
	PIDS="$PIDS $!"
}
done_ok() { [ -f "$T/$1.rc" ] && [ "$(cat "$T/$1.rc")" = 0 ]; }

# uring_param_hold: this test may set the fuse module's enable_uring. The
# setting is system-wide: hold a lock that every copy of such a test takes
# too (runs of two checkouts, or CI beside a developer's run, would
# otherwise put back each other's setting), and put the setting back as
# found on every exit path (INT, TERM and HUP exit through the trap), first
# thing, before the slower cleanup. Skips the test (77) where the kernel
# has no FUSE over io_uring. Then: uring_param Y|N. The lock is fd 9:
# what the test starts in the background should not inherit it (9>&-;
# start_manager and start_dbfs do so), or a process left hanging holds
# it for the next test.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
uring_param_hold() {
	[ -w "$URING_PARAM" ] || { echo "SKIP: this kernel has no FUSE over io_uring ($URING_PARAM)"; exit 77; }
	lockdir=/run/lock
	[ -d "$lockdir" ] && [ -w "$lockdir" ] || lockdir=/tmp
	exec 9>>"$lockdir/mfs-fuse-enable_uring.lock"
	flock -w 90 9 || { echo "FAIL: another run held $lockdir/mfs-fuse-enable_uring.lock for 90 s" >&2; exit 1; }
	uring_was=$(cat "$URING_PARAM")
	trap '_rc=$?; echo "$uring_was" >"$URING_PARAM" 2>/dev/null; (exit $_rc); cleanup' EXIT
}
uring_param() { echo "$1" >"$URING_PARAM" || { echo "SKIP: cannot write $URING_PARAM"; exit 77; }; }
