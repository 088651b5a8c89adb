#!/bin/bash
# Soak test of mfs (issue 15): the real daemon, as root with allow_other,
# serving several DBFSs on the disk with mixed workloads at once, while the
# manager is driven through its control protocol (mounts, unmounts, also
# forced while busy, config changes, forget and re-create, commands by an
# unprivileged user, refused ones too) and SIGKILLed every few minutes.
#
# Checked throughout, each check a failure if it does not hold:
#  - no workload sees an error it was not told to expect, and every byte
#    read back is what was written (tests/soak/soakload.py);
#  - after each SIGKILL: every store passes dbfs-fsck --allow-orphans; the
#    restarted mfs brings the registry back (the same DBFSs mounted and
#    unmounted, their quota_bytes and iops), one mount per mount point, and
#    every file written and fsynced before the kill is there byte for byte;
#  - refused commands fail with the right errno and leave a reason;
#  - the mfs process's memory, fds and threads stay flat within each restart
#    epoch (samples every few seconds; the warm-up dropped, the first and the
#    last quarter of the rest compared; see TOLERANCES below);
#  - a clean stop at the end exits 0, leaves nothing mounted, and leaves every
#    store clean for a strict dbfs-fsck.
# Prints a report; exits 0 only if every check passed.
#
# Needs root, /dev/fuse, setfattr/getfattr, setpriv, tar, /usr/bin/python3;
# uses sqlite3 if installed. Everything lives in one temporary directory
# (--dir), which is removed at the end; only what this script started is
# unmounted and killed, on every exit path.
set -u

usage() {
	cat <<EOF
Usage: $0 [options]
  --duration D        how long to run (default \$SOAK_DURATION or 1h; 600, 90s,
                      10m, 1h, 1h30m)
  --dir DIR           where the temporary directory (stores, mounts) goes
                      (default \$SOAK_DIR or /var/tmp: stores belong on a disk)
  --restart-every A-B SIGKILL and restart mfs every A to B (random; default 3m-6m)
  --dbfs N            DBFSs with workloads (default 6, at least 2)
  --sample S          seconds between resource samples (default 3)
  --seed N            random seed (default: random, printed)
  --clear-stale       after each SIGKILL, lazily unmount the dead mounts before
                      mfs restarts (a workaround for issue 15.6: the restarted
                      mfs stacks new mounts on dead ones whose attributes the
                      kernel has cached; without it, that is reported as a failure)
  --keep              keep the temporary directory (stores, logs) at the end
  --mfs PATH          the mfs binary (default: \$MFS or build/mfs/mfs)
  --fsck PATH         dbfs-fsck (default: \$DBFS_FSCK or build/tools/fsck/dbfs-fsck)
  -h, --help          this text
EOF
}

# duration_s D: seconds in D (N, Ns, Nm, Nh, combinations like 1h30m)
duration_s() {
	local d=$1 total=0 n
	[[ $d =~ ^[0-9]+$ ]] && { echo "$d"; return 0; }
	[[ $d =~ ^([0-9]+[hms])+$ ]] || return 1
	while [[ $d =~ ^([0-9]+)([hms])(.*)$ ]]; do
		n=${BASH_REMATCH[1]}
		case ${BASH_REMATCH[2]} in
		h) total=$((total + n * 3600)) ;;
		m) total=$((total + n * 60)) ;;
		s) total=$((total + n)) ;;
		esac
		d=${BASH_REMATCH[3]}
	done
	echo "$total"
}

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DURATION=$(duration_s "${SOAK_DURATION:-1h}") || { echo "bad SOAK_DURATION" >&2; exit 2; }
BASE=${SOAK_DIR:-/var/tmp}
RESTART_MIN=180
RESTART_MAX=360
NDBFS=6
SAMPLE=3
SEED=""
KEEP=0
CLEAR_STALE=0
MFS=${MFS:-$ROOT/build/mfs/mfs}
DBFS_FSCK=${DBFS_FSCK:-$ROOT/build/tools/fsck/dbfs-fsck}
PY=/usr/bin/python3
LOAD=$HERE/soakload.py

# TOLERANCES, per restart epoch, after WARMUP seconds, medians of the first
# and of the last quarter of the remaining samples: RssAnon (the heap; VmRSS
# also counts the LMDB maps' pages, which grow with the data read) may grow
# by RSS_PCT percent plus RSS_ABS_KIB; fds (compared at equal numbers of
# DBFSs mfs holds, its /dev/fuse descriptors, not of mounts: an unmounted
# DBFS keeps its descriptors while its store closes, which takes seconds on
# a busy disk) by FD_TOL; threads by THR_TOL. An epoch with fewer than
# MIN_SAMPLES samples after the warm-up is reported but not judged.
WARMUP=60
RSS_PCT=10
RSS_ABS_KIB=8192
FD_TOL=3
THR_TOL=1
MIN_SAMPLES=20

while [ $# -gt 0 ]; do
	case $1 in
	--duration) DURATION=$(duration_s "${2:-}") || { usage >&2; exit 2; }; shift ;;
	--dir) BASE=${2:?}; shift ;;
	--restart-every)
		a=${2%%-*} b=${2#*-}
		RESTART_MIN=$(duration_s "$a") && RESTART_MAX=$(duration_s "$b") ||
			{ usage >&2; exit 2; }
		[ "$RESTART_MAX" -ge "$RESTART_MIN" ] || { usage >&2; exit 2; }
		shift ;;
	--dbfs) NDBFS=${2:?}; shift ;;
	--sample) SAMPLE=${2:?}; shift ;;
	--seed) SEED=${2:?}; shift ;;
	--keep) KEEP=1 ;;
	--clear-stale) CLEAR_STALE=1 ;;
	--mfs) MFS=${2:?}; shift ;;
	--fsck) DBFS_FSCK=${2:?}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
[ "$NDBFS" -ge 2 ] 2>/dev/null || { echo "--dbfs: at least 2" >&2; exit 2; }

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	echo "SKIP: needs root and /dev/fuse"
	exit 77
fi
for p in "$MFS" "$DBFS_FSCK" "$PY"; do
	[ -x "$p" ] || { echo "not an executable: $p (build first: ninja -C build)" >&2; exit 2; }
done
for c in setfattr getfattr setpriv tar; do
	command -v $c >/dev/null || { echo "SKIP: $c is not installed"; exit 77; }
done
HAVE_SQLITE=0
command -v sqlite3 >/dev/null && HAVE_SQLITE=1
[ -n "$SEED" ] || SEED=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
RANDOM=$SEED

T=$(mktemp -d "$BASE/mfs-soak.XXXXXX") || exit 2
chmod 755 "$T"
M=$T/mfs
U=65534
# rootdir: root's empty directory, which the user may not mount on
mkdir -p "$M" "$T/mnt" "$T/store" "$T/ops" "$T/dis" "$T/user" "$T/rootdir"
: >"$T/errors"
: >"$T/samples"
chown $U:$U "$T/user"
mkdir "$T/user/mp" "$T/user/mp2"
chown $U:$U "$T/user/mp" "$T/user/mp2"

MPID=""
MWAIT=""
EPOCH=0
SAMPLER=""
HOLDER=""
declare -A WP      # name -> worker pids (each leads its own process group)
declare -A KINDS   # name -> workload kinds
declare -A OPTS    # name -> mount options
declare -A WANT    # name -> mounted | unmounted (what the registry must say)
declare -A CONF_Q  # name -> quota_bytes last set
declare -A CONF_I  # name -> iops last set
declare -A CTL     # kind -> count of the soak's own operations and checks
NAMES=""
START=$(date +%s)
DEADLINE=$((START + DURATION))
FAILS=0
DONE=0

log() { echo "[soak $(date +%H:%M:%S)] $*"; }
inc() { CTL[$1]=$((${CTL[$1]:-0} + ${2:-1})); }
fail() {
	echo "$(date +%H:%M:%S) soak: $*" >>"$T/errors"
	echo "[soak $(date +%H:%M:%S)] FAIL: $*" >&2
	FAILS=$((FAILS + 1))
}
check() { inc checks; } # one check that passed

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds; 1 after the bound
wait_for() {
	local limit=$(($1 * 10)) i=0
	shift
	while ! "$@" 2>/dev/null; do
		i=$((i + 1))
		[ $i -ge $limit ] && return 1
		sleep 0.1
	done
	return 0
}
is_dead() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
	[ -z "$st" ] || [ "$st" = Z ]
}
mounts_at() { awk -v m="$1" '$5 == m { n++ } END { print n + 0 }' /proc/self/mountinfo; }
is_mounted() { [ "$(mounts_at "$1")" -gt 0 ]; }
not_mounted() { [ "$(mounts_at "$1")" -eq 0 ]; }

# The control protocol. Called in this shell (not in $(...)): user.mfs.error
# is kept per user and parent process.
xset() { setfattr -n "user.mfs.$1" -v "$2" "$M" 2>"$T/xset.err"; }
xget() { getfattr --only-values -n "user.mfs.$1" "$M" 2>/dev/null; }
as_user() { setpriv --reuid=$U --regid=$U --clear-groups "$@"; }
uset() { as_user setfattr -n "user.mfs.$1" -v "$2" "$M" 2>"$T/xset.err"; }
# last refused command's reason, for root (xerr) or the user (uerr), in $ERR
xerr() { getfattr --only-values -n user.mfs.error "$M" >"$T/err.out" 2>/dev/null; ERR=$(cat "$T/err.out"); }
uerr() { as_user getfattr --only-values -n user.mfs.error "$M" >"$T/err.out" 2>/dev/null; ERR=$(cat "$T/err.out"); }
state_of() { xget list | tr ',' '\n' | awk -v n="name=$1" '$0 == n { f = 1; next } f && /^state=/ { sub("state=", ""); print; exit }'; }
in_state() { [ "$(state_of "$1")" = "$2" ]; }
stat_of() { xget "stats.$1" | sed -n "s/^$2=//p"; }

# clean_unmount NAME: unmount a DBFS whose workloads were stopped. Another
# program on the host may hold its mount a moment (stress-ng's io stressor
# syncfs()es every mounted file system through an open descriptor): EBUSY
# while only processes that are not ours hold it is retried for 20 s, and
# noted. ERR holds the last refusal.
clean_unmount() {
	local n=$1 mp=$T/mnt/$1 i h p
	for i in $(seq 40); do
		xset unmount "$n" && { [ "$i" -gt 1 ] && log "note: unmount of $n took $i tries (held by: $h)"; return 0; }
		xerr
		case $ERR in EBUSY*) ;; *) return 1 ;; esac
		h=$(holders "$mp")
		# one of ours (the soak's own session; its workloads were stopped
		# and waited for before) is a real failure
		for p in $(echo "$h" | tr ';' '\n' | awk '{ print $1 }'); do
			[ "$(ps -o sid= -p "$p" 2>/dev/null | tr -d ' ')" = "$(ps -o sid= -p $$ | tr -d ' ')" ] && return 1
		done
		sleep 0.5
	done
	return 1
}

# user_unmount_u1: the user's unmount of u1, with clean_unmount's patience
# for a moment's hold by another program on the host (the user's own
# commands have all returned by then). ERR holds the last refusal.
user_unmount_u1() {
	local i
	for i in $(seq 40); do
		uset unmount u1 && { [ "$i" -gt 1 ] && log "note: user unmount of u1 took $i tries"; return 0; }
		uerr
		case $ERR in EBUSY*) sleep 0.5 ;; *) return 1 ;; esac
	done
	return 1
}

# ---- mfs ---------------------------------------------------------------------

start_mfs() {
	EPOCH=$((EPOCH + 1))
	"$MFS" -f -o "state=$T/state,allow_other" "$M" >>"$T/mfs.log" 2>&1 &
	MPID=$!
	MWAIT=$MPID
	echo "$EPOCH $MPID" >"$T/mfs.pid.tmp" && mv "$T/mfs.pid.tmp" "$T/mfs.pid"
	wait_for 30 getfattr -n user.mfs.status "$M" >/dev/null ||
		{ tail -20 "$T/mfs.log" >&2; fail "mfs (epoch $EPOCH) did not serve its manager mount"; return 1; }
	log "mfs started, pid $MPID, epoch $EPOCH"
}

# Samples: epoch time pid VmRSS VmHWM RssAnon fds threads mounted-DBFSs
# ring-threads DBFSs-held
sampler() {
	local e p rss hwm anon thr fds mnt rings held
	trap - EXIT INT TERM
	while [ ! -e "$T/sampler.stop" ]; do
		read -r e p <"$T/mfs.pid" 2>/dev/null || { sleep "$SAMPLE"; continue; }
		if [ -r "/proc/$p/status" ] && ! is_dead "$p"; then
			read -r rss hwm anon thr < <(awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 }
				/^RssAnon:/ { a = $2 } /^Threads:/ { t = $2 } END { print r, h, a, t }' \
				"/proc/$p/status" 2>/dev/null)
			fds=$(ls "/proc/$p/fd" 2>/dev/null | wc -l)
			mnt=$(awk -v t="$T/" 'index($5, t) == 1 && $5 != t "mfs" && $0 ~ / - fuse/' \
				/proc/self/mountinfo | wc -l)
			# io_uring queue threads start once, when the kernel first
			# offers the ring to a mount (enable_uring is system-wide:
			# other tests on the host flip it), and stay
			rings=$(cat "/proc/$p"/task/*/comm 2>/dev/null | grep -c '^mfs-ring')
			# the sessions mfs holds: one /dev/fuse each, the manager's too
			held=$(find "/proc/$p/fd" -lname /dev/fuse 2>/dev/null | wc -l)
			[ -n "${thr:-}" ] && [ "$fds" -gt 0 ] &&
				echo "$e $EPOCHREALTIME $p $rss $hwm $anon $fds $thr $mnt $rings $((held - 1))" >>"$T/samples"
		fi
		: >"$T/sampler.beat"
		sleep "$SAMPLE"
	done
}

# The sampler must keep sampling: in the 40-minute run it once stopped at a
# restart. Say where it is stuck, and start a new one.
check_sampler() {
	local age
	[ -e "$T/sampler.beat" ] || return 0
	age=$(($(date +%s) - $(stat -c %Y "$T/sampler.beat")))
	[ "$age" -gt $((SAMPLE * 5 + 20)) ] || return 0
	fail "the resource sampler stalled for ${age}s: $(ps -o pid,stat,wchan:24,args --ppid "$SAMPLER" 2>/dev/null | tail -n +2 | head -3 | tr '\n' ';') sampler state $(cut -d' ' -f3 "/proc/$SAMPLER/stat" 2>/dev/null)"
	kill -KILL "$SAMPLER" 2>/dev/null
	wait "$SAMPLER" 2>/dev/null
	sampler &
	SAMPLER=$!
}

# ---- workloads -----------------------------------------------------------------

start_workers() {
	local n=$1 k pids=""
	for k in ${KINDS[$n]}; do
		# setsid: each workload leads its own process group (tar, sqlite3 and
		# rm die with it)
		setsid "$PY" "$LOAD" "$k" "$T/mnt/$n" "$T" "$n" "$RANDOM$RANDOM" 2>>"$T/load.log" &
		pids="$pids $!"
	done
	WP[$n]=$pids
}

stop_workers() {
	local n=$1 p i
	for p in ${WP[$n]:-}; do kill -TERM -- "-$p" 2>/dev/null; done
	# (a bound for a hang, not a time: at load 42 a workload took more than
	# 15 s to stop, what it waited for unrecorded; the failure says it now)
	for p in ${WP[$n]:-}; do
		i=0
		while ! is_dead "$p" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
		is_dead "$p" || { fail "workload $p on $n did not stop on SIGTERM in 60 s: $(ps -o pid=,stat=,wchan:24=,args= -g "$p" 2>/dev/null | head -4 | tr -s ' ' | tr '\n' ';')"; kill -KILL -- "-$p" 2>/dev/null; }
		wait "$p" 2>/dev/null
		# its children (tar, rm, sqlite3) may outlive it a moment and keep
		# files open: wait for the whole group (its id is not reused while
		# a member lives)
		i=0
		while pgrep -g "$p" >/dev/null && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
		pgrep -g "$p" >/dev/null && { fail "workload $p's children on $n did not exit: $(pgrep -a -g "$p" | head -3 | tr '\n' ';')"; kill -KILL -- "-$p" 2>/dev/null; }
	done
	WP[$n]=""
}

# holders DIR: the processes with a file or their cwd under DIR
holders() { "$PY" "$LOAD" holders "$1" 2>/dev/null | head -5 | tr '\n' ';'; }

# Workloads that died on their own (an error: they stop only when told to)
reap_workers() {
	local n p alive st why
	for n in $NAMES; do
		alive=""
		for p in ${WP[$n]:-}; do
			if is_dead "$p"; then
				wait "$p" 2>/dev/null
				st=$?
				why=$(grep "/$p: " "$T/errors" | tail -1)
				[ -n "$why" ] || why=$(tail -2 "$T/load.log" | tr '\n' ';')
				fail "a workload on $n (pid $p) stopped on its own (exit $st): $why"
			else
				alive="$alive $p"
			fi
		done
		WP[$n]=$alive
	done
}

verify_manifest() {
	local n=$1
	[ -f "$T/manifest.$n" ] || return 0
	if "$PY" "$LOAD" verify "$T/manifest.$n" "$T/mnt/$n" >"$T/verify.out" 2>&1; then
		check
		inc durable_files_verified "$(sed -n 's/^\([0-9]*\) durable files checked.*/\1/p' "$T/verify.out")"
	else
		fail "$n ($2): durable data lost or wrong: $(head -5 "$T/verify.out" | tr '\n' ';')"
	fi
}

# ---- the DBFSs -----------------------------------------------------------------

mount_dbfs() { # name [extra]: mount with its registered options, or create it
	local n=$1 v
	v="name=$n,store=$T/store/$n,mountpoint=$T/mnt/$n,create"
	[ -n "${OPTS[$n]}" ] && v="$v,${OPTS[$n]}"
	if xset mount "$v"; then
		inc mounts
		WANT[$n]=mounted
		check
		return 0
	fi
	xerr
	fail "mount $n: $ERR"
	return 1
}

setup_dbfs() {
	local i=1 n kinds
	local all="churn,xattr bigseq rand4k rename,tar churn,rename,xattr tar,churn"
	[ $HAVE_SQLITE = 1 ] && all="churn,xattr bigseq rand4k,sqlite rename,tar churn,rename,xattr tar,churn"
	# shellcheck disable=SC2206
	local set=($all)
	local opts=("" "durability=full" "" "" "writeback_cache=1" "")
	while [ $i -le "$NDBFS" ]; do
		n=s$i
		NAMES="$NAMES $n"
		kinds=${set[$(((i - 1) % 6))]}
		KINDS[$n]="${kinds//,/ } durable"
		OPTS[$n]=${opts[$(((i - 1) % 6))]}
		CONF_Q[$n]=0
		CONF_I[$n]=0
		mkdir -p "$T/mnt/$n"
		mount_dbfs "$n" || return 1
		i=$((i + 1))
	done
	CYCLER=s$NDBFS # the DBFS that gets unmounted, forgotten and re-created
}

# ---- actions -------------------------------------------------------------------

act_config() {
	local n=s$((RANDOM % (NDBFS - 1) + 1)) q i m
	q=$(echo 0 16G 64G 1T | tr ' ' '\n' | sed -n "$((RANDOM % 4 + 1))p")
	i=$(echo 0 2000 20000 | tr ' ' '\n' | sed -n "$((RANDOM % 3 + 1))p")
	m=$(echo 0 32M 256M | tr ' ' '\n' | sed -n "$((RANDOM % 3 + 1))p")
	if xset config "name=$n,quota_bytes=$q,iops=$i,mem=$m"; then
		inc configs
		CONF_Q[$n]=$(numfmt --from=iec "$q")
		CONF_I[$n]=$i
		check_config "$n" "after config"
	else
		xerr
		fail "config $n quota_bytes=$q,iops=$i,mem=$m: $ERR"
	fi
	# refused: an option that cannot change while mounted, and a bad value;
	# neither may change anything
	if xset config "name=$n,writemap=0"; then fail "config writemap=0 of mounted $n accepted"; else
		xerr; case $ERR in EINVAL*) check; inc refused ;; *) fail "config writemap of mounted $n: '$ERR'" ;; esac
	fi
	if xset config "name=$n,iops=-5"; then fail "config iops=-5 accepted"; else
		xerr; case $ERR in EINVAL*) check; inc refused ;; *) fail "config iops=-5: '$ERR'" ;; esac
	fi
	check_config "$n" "after refused configs"
}

check_config() {
	local n=$1 s q i
	s=$(xget "stats.$n")
	q=$(printf '%s\n' "$s" | sed -n 's/^quota_bytes=//p')
	i=$(printf '%s\n' "$s" | sed -n 's/^iops_limit=//p')
	if [ "$q" = "${CONF_Q[$n]}" ] && [ "$i" = "${CONF_I[$n]}" ]; then
		check
	else
		fail "$n $2: quota_bytes=$q iops_limit=$i, want ${CONF_Q[$n]} and ${CONF_I[$n]}"
	fi
}

# expect_user_refused ERRNAME VERB VALUE: the unprivileged user's command fails with it
expect_user_refused() {
	if uset "$2" "$3"; then
		fail "user $U: $2 '$3' accepted, expected $1"
		return
	fi
	uerr
	case $ERR in
	"$1 "*) check; inc refused ;;
	*) fail "user $U: $2 '$3': error '$ERR', expected $1" ;;
	esac
}

act_user() {
	local n=s$((RANDOM % (NDBFS - 1) + 1))
	inc user_commands 7
	as_user getfattr --only-values -n user.mfs.status "$M" >"$T/u.out" 2>/dev/null &&
		grep -q "^pid=$MPID$" "$T/u.out" && check || fail "user $U cannot read status"
	as_user cat "$M/.list" >"$T/u.out" 2>/dev/null && grep -q "name=$n," "$T/u.out" && check ||
		fail "user $U cannot read .list"
	expect_user_refused EPERM unmount "$n"
	expect_user_refused EPERM config "name=$n,iops=1"
	expect_user_refused EPERM forget "$n"
	expect_user_refused EACCES mount "name=u2,store=$T/user/s2,mountpoint=$T/rootdir,create"
	expect_user_refused EACCES mount "name=u2,store=$T/store/u2,mountpoint=$T/user/mp2,create"
	[ -e "$T/store/u2" ] && fail "refused mount left $T/store/u2"
	[ "$(state_of "$n")" = "${WANT[$n]}" ] && check || fail "$n changed by refused user commands"
	# the user's own DBFS: mount (create the first time), write, quota, unmount
	if [ "${WANT[u1]:-none}" != mounted ]; then
		if uset mount "name=u1,store=$T/user/s1,mountpoint=$T/user/mp,create"; then
			WANT[u1]=mounted
			inc mounts
			check
		else
			uerr
			fail "user $U mounting its own u1: $ERR"
			return
		fi
	fi
	if as_user sh -c "head -c 100000 /dev/urandom >'$T/user/mp/f' && sync '$T/user/mp/f'"; then
		check
	else
		fail "user $U cannot write in its own DBFS"
	fi
	# EDQUOT: a quota below what is there refuses more data
	if uset config "name=u1,quota_bytes=64K"; then
		inc configs
		if as_user sh -c "head -c 200000 /dev/zero >'$T/user/mp/g'" 2>"$T/u.err"; then
			fail "u1: wrote 200 KB past quota_bytes=64K"
		elif grep -q "quota exceeded" "$T/u.err"; then
			check
		else
			fail "u1 over quota: $(cat "$T/u.err")"
		fi
		as_user rm -f "$T/user/mp/g"
		uset config "name=u1,quota_bytes=0" && inc configs || { uerr; fail "u1 quota back: $ERR"; }
	else
		uerr
		fail "user $U config of its own u1: $ERR"
	fi
	if [ $((RANDOM % 2)) = 0 ]; then
		if user_unmount_u1; then
			inc unmounts
			WANT[u1]=unmounted
			not_mounted "$T/user/mp" && check || fail "u1 still mounted after unmount"
		else
			uerr
			fail "user $U unmount of its own u1: $ERR"
		fi
	fi
}

# The cycler DBFS: unmount (plain, refused while busy, forced while busy),
# forget and mount again (same store, or a new one).
act_cycle() {
	local n=$CYCLER mp=$T/mnt/$CYCLER how
	how=$((RANDOM % 5))
	if [ -z "${WANT[$n]:-}" ]; then # an earlier cycle failed: register it again
		stop_workers "$n"
		mount_dbfs "$n" && start_workers "$n"
		return
	fi
	if [ "${WANT[$n]}" = unmounted ]; then # left unmounted by case 4
		xset mount "name=$n" || { xerr; fail "mount $n by name: $ERR"; return; }
		inc mounts
		WANT[$n]=mounted
		verify_manifest "$n" "after staying unmounted"
		start_workers "$n"
		return
	fi
	case $how in
	0) # clean unmount and mount by name
		stop_workers "$n"
		clean_unmount "$n" || { fail "unmount $n: $ERR; holders: $(holders "$mp")"; start_workers "$n"; return; }
		inc unmounts
		WANT[$n]=unmounted
		not_mounted "$mp" && in_state "$n" unmounted && check || fail "$n: after unmount: $(state_of "$n")"
		xset mount "name=$n" || { xerr; fail "mount $n by name: $ERR"; return; }
		inc mounts
		WANT[$n]=mounted
		verify_manifest "$n" "after unmount and mount"
		;;
	1) # busy: refused without force, then forced while the workloads run
		setsid sh -c "exec 3<'$mp/w-durable'; exec sleep 100000" &
		HOLDER=$!
		wait_for 5 test -e "/proc/$HOLDER/fd/3" || true
		sleep 0.5
		if xset unmount "$n"; then
			inc unmounts
			WANT[$n]=unmounted
			log "note: unmount of $n with a file held open was accepted"
		else
			xerr
			case $ERR in EBUSY*) check; inc refused ;; *) fail "busy unmount of $n: '$ERR', expected EBUSY" ;; esac
			touch "$T/dis/$n"
			if xset unmount "$n,force"; then
				inc unmounts
				inc forced_unmounts
				WANT[$n]=unmounted
				wait_for 20 not_mounted "$mp" && check || fail "$n still mounted after a forced unmount"
			else
				xerr
				fail "forced unmount of busy $n: $ERR"
			fi
		fi
		kill -KILL -- "-$HOLDER" 2>/dev/null
		wait "$HOLDER" 2>/dev/null
		HOLDER=""
		stop_workers "$n"
		rm -f "$T/dis/$n"
		in_state "$n" unmounted && check || fail "$n after forced unmount: $(state_of "$n")"
		wait_for 10 not_mounted "$mp" || fail "$mp: a mount is left after forced unmount"
		xset mount "name=$n" || { xerr; fail "mount $n after forced unmount: $ERR"; return; }
		inc mounts
		WANT[$n]=mounted
		verify_manifest "$n" "after a forced unmount"
		;;
	4) # unmount and leave it so for a while (across a restart, maybe)
		stop_workers "$n"
		clean_unmount "$n" || { fail "unmount $n: $ERR; holders: $(holders "$mp")"; start_workers "$n"; return; }
		inc unmounts
		WANT[$n]=unmounted
		not_mounted "$mp" && in_state "$n" unmounted && check || fail "$n: after unmount: $(state_of "$n")"
		return
		;;
	2 | 3) # forget; mount again on the same store (2) or on a new one (3)
		stop_workers "$n"
		clean_unmount "$n" || { fail "unmount $n: $ERR; holders: $(holders "$mp")"; start_workers "$n"; return; }
		inc unmounts
		WANT[$n]=unmounted
		# refused: forget a mounted DBFS is EBUSY (checked on s1)
		if xset forget s1; then fail "forget of mounted s1 accepted"; else
			xerr; case $ERR in EBUSY*) check; inc refused ;; *) fail "forget s1: '$ERR', expected EBUSY" ;; esac
		fi
		xset forget "$n" || { xerr; fail "forget $n: $ERR"; return; }
		inc forgets
		unset "WANT[$n]"
		xget list | grep -q "name=$n," && fail "$n still listed after forget" || check
		if [ $how = 3 ]; then
			rm -rf "${T:?}/store/$n" "$T/manifest.$n"
			inc recreate_new_store
		else
			inc recreate_same_store
		fi
		CONF_Q[$n]=0
		CONF_I[$n]=0
		mount_dbfs "$n" || return
		verify_manifest "$n" "after forget and re-create"
		;;
	esac
	start_workers "$n"
}

# SIGKILL mfs mid-workload, check the stores, restart, check everything came back
act_restart() {
	local n st m
	log "SIGKILL mfs $MPID (epoch $EPOCH)"
	touch "$T/dis/ALL"
	kill -KILL "$MPID"
	wait "$MWAIT" 2>/dev/null
	MPID=""
	inc restarts
	restart_checks
}

# after mfs stopped (SIGKILL, or on its own): check the stores, start it
# again, check that everything came back
restart_checks() {
	local n st m
	for n in $NAMES; do stop_workers "$n"; done
	for st in "$T"/store/* "$T/user/s1"; do
		[ -e "$st/data.mdb" ] || continue
		"$DBFS_FSCK" --allow-orphans "$st" >"$T/fsck.out" 2>&1 && check ||
			fail "dbfs-fsck --allow-orphans $st after SIGKILL: exit $?: $(tail -5 "$T/fsck.out" | tr '\n' ';')"
		inc fsck_runs
	done
	if [ $CLEAR_STALE = 1 ]; then
		for m in $(awk -v t="$T/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
			umount -l "$m" 2>/dev/null
		done
	fi
	start_mfs || return 1
	for n in "${!WANT[@]}"; do
		if [ "${WANT[$n]}" = mounted ]; then
			if wait_for 60 in_state "$n" mounted; then
				check
			else
				fail "$n not mounted again after restart: $(xget list | grep "name=$n,")"
				xset mount "name=$n" || { xerr; fail "mount $n by name after restart: $ERR"; }
			fi
		else
			in_state "$n" unmounted && check || fail "$n: $(state_of "$n") after restart, want unmounted"
		fi
	done
	for n in $NAMES; do
		[ "${WANT[$n]:-}" = mounted ] || continue
		check_config "$n" "after restart"
		[ "$(mounts_at "$T/mnt/$n")" = 1 ] && check ||
			fail "$T/mnt/$n: $(mounts_at "$T/mnt/$n") mounts after restart (stacked or missing)"
		verify_manifest "$n" "after SIGKILL"
	done
	rm -f "$T/dis/ALL"
	for n in $NAMES; do [ "${WANT[$n]:-}" = mounted ] && start_workers "$n"; done
	# (the loop's status is its last test's: a DBFS left unmounted last must
	# not end the run as if the restart had failed)
	return 0
}

# ---- the end -------------------------------------------------------------------

clean_stop() {
	local n st rc
	for n in $NAMES; do stop_workers "$n"; done
	for n in $NAMES; do [ "${WANT[$n]:-}" = mounted ] && verify_manifest "$n" "at the end"; done
	kill -TERM "$MPID"
	if wait_for 60 is_dead "$MPID"; then
		wait "$MWAIT"
		rc=$?
		[ $rc = 0 ] && check || fail "mfs exited $rc on SIGTERM"
	else
		fail "mfs $MPID did not exit within 60 s of SIGTERM"
		kill -KILL "$MPID"
		wait "$MWAIT" 2>/dev/null
	fi
	MPID=""
	n=$(awk -v t="$T/" 'index($5, t) == 1' /proc/self/mountinfo | wc -l)
	[ "$n" = 0 ] && check || fail "$n mounts left under $T after a clean stop"
	for st in "$T"/store/* "$T/user/s1"; do
		[ -e "$st/data.mdb" ] || continue
		"$DBFS_FSCK" "$st" >"$T/fsck.out" 2>&1 && check ||
			fail "dbfs-fsck $st after a clean stop: exit $?: $(tail -5 "$T/fsck.out" | tr '\n' ';')"
		inc fsck_runs
	done
}

report() {
	local elapsed=$(($(date +%s) - START)) k errs
	echo
	echo "==== mfs soak report ===="
	echo "seed $SEED, clear-stale $CLEAR_STALE, duration $((elapsed / 60))m$((elapsed % 60))s (asked ${DURATION}s), $NDBFS DBFSs + 1 user DBFS, store dir $BASE"
	echo "restarts (SIGKILL): ${CTL[restarts]:-0}, unexpected stops of mfs: ${CTL[unexpected_stops]:-0}, epochs: $EPOCH"
	echo "mounts: ${CTL[mounts]:-0}, unmounts: ${CTL[unmounts]:-0} (forced while busy: ${CTL[forced_unmounts]:-0}), forgets: ${CTL[forgets]:-0} (re-created on the same store ${CTL[recreate_same_store]:-0}, on a new one ${CTL[recreate_new_store]:-0})"
	echo "config changes: ${CTL[configs]:-0}, user commands: ${CTL[user_commands]:-0}, refused as expected: ${CTL[refused]:-0}"
	echo "dbfs-fsck runs: ${CTL[fsck_runs]:-0}, durable files verified: ${CTL[durable_files_verified]:-0}, checks passed: ${CTL[checks]:-0}"
	echo "workload operations:"
	cat "$T"/ops/* 2>/dev/null | awk '{ n[$1] += $2 } END { for (k in n) printf "  %-18s %d\n", k, n[k] }' | sort
	echo "resources per epoch (mfs pid; tolerances: RssAnon +${RSS_PCT}%+$((RSS_ABS_KIB / 1024))MiB, fds +$FD_TOL, threads +$THR_TOL, after ${WARMUP}s warm-up):"
	if "$PY" "$LOAD" analyse "$T/samples" "$WARMUP" "$MIN_SAMPLES" "$RSS_PCT" "$RSS_ABS_KIB" \
		"$FD_TOL" "$THR_TOL" >"$T/analyse.out" 2>&1; then
		sed 's/^/  /' "$T/analyse.out"
	else
		sed 's/^/  /' "$T/analyse.out"
		echo "$(date +%H:%M:%S) soak: resource growth (see above)" >>"$T/errors"
	fi
	echo "  samples: $(wc -l <"$T/samples"), peak VmRSS over the run: $(awk '$4 > m { m = $4 } END { printf "%d MiB", m / 1024 }' "$T/samples")"
	errs=$(wc -l <"$T/errors")
	echo "errors: $errs"
	sed 's/^/  /' "$T/errors" | head -50
	if grep -q -E "AddressSanitizer|LeakSanitizer|runtime error:" "$T/mfs.log" 2>/dev/null; then
		echo "  sanitizer reports in mfs.log"
		errs=$((errs + 1))
	fi
	if [ "$errs" = 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
	[ "$errs" = 0 ]
}

cleanup() {
	local rc=$? n p m
	trap - EXIT INT TERM HUP
	[ $DONE = 1 ] || echo "[soak] interrupted or failed early (status $rc); cleaning up" >&2
	touch "$T/sampler.stop" "$T/dis/ALL"
	for n in $NAMES; do
		for p in ${WP[$n]:-}; do kill -KILL -- "-$p" 2>/dev/null; done
	done
	[ -n "$HOLDER" ] && kill -KILL -- "-$HOLDER" 2>/dev/null
	if [ -n "$MPID" ] && ! is_dead "$MPID"; then
		kill -TERM "$MPID" 2>/dev/null
		wait_for 30 is_dead "$MPID" || kill -KILL "$MPID" 2>/dev/null
	fi
	[ -n "$SAMPLER" ] && { kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null; }
	# unmount whatever is still mounted under $T, deepest first
	for m in $(awk -v t="$T/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null
	done
	if [ $DONE = 1 ] && [ $rc = 0 ] && [ $KEEP = 0 ]; then
		rm -rf "$T"
	elif [ -n "$(awk -v t="$T/" 'index($5, t) == 1' /proc/self/mountinfo)" ]; then
		echo "[soak] mounts are left under $T; not removing it" >&2
	elif [ $KEEP = 1 ]; then
		echo "[soak] kept $T" >&2
	else
		# keep the logs of a failed run, not the stores
		rm -rf "$T/store" "$T/user/s1" "$T/user/s2"
		echo "[soak] logs kept in $T (mfs.log, errors, samples, load.log)" >&2
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---- run -------------------------------------------------------------------------

log "seed $SEED, ${DURATION}s, clear-stale $CLEAR_STALE, restarts every ${RESTART_MIN}-${RESTART_MAX}s, $NDBFS DBFSs, in $T"
"$PY" "$LOAD" mktree "$T/tree" && tar -cf "$T/tree.tar" -C "$T/tree" . && rm -rf "$T/tree" ||
	{ fail "cannot make the tar workload's archive"; exit 1; }
start_mfs || exit 1
sampler &
SAMPLER=$!
setup_dbfs || exit 1
for n in $NAMES; do start_workers "$n"; done
next_restart=$(($(date +%s) + RESTART_MIN + RANDOM % (RESTART_MAX - RESTART_MIN + 1)))
while [ "$(date +%s)" -lt "$DEADLINE" ]; do
	sleep $((4 + RANDOM % 8))
	# (a command to a dead manager would set an xattr on the bare directory)
	if is_dead "$MPID"; then
		touch "$T/dis/ALL"
		wait "$MWAIT" 2>/dev/null
		fail "mfs $MPID stopped on its own (epoch $EPOCH): $(grep -v "warning: refused" "$T/mfs.log" | grep -m1 -A1 "signal\|stopping\|fatal\|error" | tail -2 | tr '\n' ';')"
		inc unexpected_stops
		MPID=""
		for n in $NAMES; do stop_workers "$n"; done
		restart_checks || { fail "mfs could not be started again (epoch $EPOCH)"; break; }
		next_restart=$(($(date +%s) + RESTART_MIN + RANDOM % (RESTART_MAX - RESTART_MIN + 1)))
		continue
	fi
	reap_workers
	check_sampler
	now=$(date +%s)
	[ "$now" -ge "$DEADLINE" ] && break
	if [ "$now" -ge "$next_restart" ] && [ $((DEADLINE - now)) -gt 60 ]; then
		act_restart || { fail "mfs could not be started again (epoch $EPOCH)"; break; }
		next_restart=$(($(date +%s) + RESTART_MIN + RANDOM % (RESTART_MAX - RESTART_MIN + 1)))
		continue
	fi
	case $((RANDOM % 6)) in
	0 | 1) act_config ;;
	2 | 3) act_user ;;
	4 | 5) act_cycle ;;
	esac
done
log "time is up; stopping"
if [ -n "$MPID" ] && ! is_dead "$MPID"; then clean_stop; fi
touch "$T/sampler.stop"
wait "$SAMPLER" 2>/dev/null
SAMPLER=""
DONE=1
report
