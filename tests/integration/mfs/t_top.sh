#!/bin/sh
# mfsctl top: driven in tmux (80x24) against a DBFS under load: its line
# shows operations per second, which fall to 0 when the load stops, the quiet DBFS
# shows none, 's' changes the sort key, 'q' quits; -b -n COUNT prints
# COUNT plain frames; a bad sort key is a usage error.
. "$(dirname "$0")/lib.sh"

command -v tmux >/dev/null || { echo "SKIP: no tmux (tools/deps installs it)"; exit 77; }
TOP=$(dirname "$MFSCTL")/mfsctl-top
[ -x "$TOP" ] || { echo "SKIP: no mfsctl-top at $TOP"; exit 77; }
SOCK=$T/tmux.sock
trap 'rc0=$?; tmux -S "$SOCK" kill-server 2>/dev/null; (exit $rc0); cleanup' EXIT

M=$T/mfs
start_manager "$M"
mkdir -p "$T/m1" "$T/m2"
ctl() { sh "$MFSCTL" -m "$M" "$@"; }
ctl mount busy "$T/s1" "$T/m1" create || fail "mount busy"
ctl mount quiet "$T/s2" "$T/m2" create quota_bytes=1G || fail "mount quiet"
: >"$T/m1/f"
(while [ ! -e "$T/stopload" ]; do setfattr -n user.k -v v "$T/m1/f"; done) &
LP=$!
PIDS="$PIDS $LP"

# batch frames
out=$(ctl top -b -n 2 -d 0.5) || fail "top -b"
frames=$(printf '%s\n' "$out" | grep -c '^mfs top ')
[ "$frames" = 2 ] || fail "top -b -n 2 printed $frames frames"
ctl top -b -n 1 -s bogus >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || fail "top -s bogus: exit $rc, expected 2"

# the screen
tmux -S "$SOCK" new-session -d -x 80 -y 24 \
	"sh $MFSCTL -m $M top -d 0.5; echo TOP-EXITED; sleep 60" || fail "tmux"
screen() { tmux -S "$SOCK" capture-pane -p; }
# ops/s of DBFS $1 on the screen now
ops() { screen | awk -v n="$1" '$1 == n { print $2 }'; }
shows_busy() { v=$(ops busy); [ -n "$v" ] && [ "$v" != 0 ]; }
wait_for 20 shows_busy || fail "busy shows no ops/s: $(screen)"
first=$(ops busy)
# (its mount's own requests, INIT and the kernel's first lookups, count in
# its first second: a mount's first usage record counts from the mount)
quiet_zero() { [ "$(ops quiet)" = 0 ]; }
wait_for 10 quiet_zero || fail "quiet shows ops/s $(ops quiet)"
screen | grep -q '0/1.0G' || fail "quiet's quota is not shown: $(screen)"
wide=$(screen | awk 'length($0) > 80' | wc -l)
[ "$wide" = 0 ] || fail "$wide lines wider than 80 columns"
screen | grep -q 'sort ops' || fail "default sort is not ops"
# busy sorts first by ops
[ "$(screen | awk '$1 == "busy" || $1 == "quiet" { print $1; exit }')" = busy ] ||
	fail "busy is not first by ops"
# the screen keeps refreshing: once the load stops, busy's rate falls to 0
# (a steady load may show the same rounded rate in every frame)
touch "$T/stopload"
wait "$LP"
idle() { [ "$(ops busy)" = 0 ]; }
wait_for 20 idle || fail "busy's ops/s stayed $(ops busy) after the load stopped"
ok "top shows busy's ops/s moving ($first, then $(ops busy)), quiet at 0"
tmux -S "$SOCK" send-keys s
sorted() { screen | grep -q 'sort read'; }
wait_for 10 sorted || fail "'s' did not change the sort key: $(screen | head -1)"
tmux -S "$SOCK" send-keys q
exited() { screen | grep -q TOP-EXITED; }
wait_for 10 exited || fail "'q' did not quit"
ok "s changes the sort key, q quits"
exit $FAILS
