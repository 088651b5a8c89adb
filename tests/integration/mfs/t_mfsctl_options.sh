#!/bin/sh
# mfsctl: options before or after the command; unknown options, commands and
# argument counts refused with a message and exit 2 before anything is sent;
# the documented exit codes 0, 1, 2 and 3.
. "$(dirname "$0")/lib.sh"

[ -f "$MFSCTL" ] || { echo "SKIP: no mfsctl at $MFSCTL"; exit 77; }
M=$T/mfs
start_manager "$M"
mkdir -p "$T/m1"
ctl() { sh "$MFSCTL" "$@"; }

# expect CODE DESCRIPTION COMMAND...: COMMAND exits CODE; its stderr in $T/err
expect() {
	code=$1 what=$2
	shift 2
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
	if [ "$rc" = "$code" ]; then
		ok "$what: exit $code"
		return 0
	fi
	fail "$what: exit $rc, expected $code; stderr: $(cat "$T/err")"
	return 1
}

expect 0 "mount, -m after the command" ctl mount one "$T/s1" "$T/m1" create -m "$M"
is_mounted "$T/m1" || fail "one is not mounted"

# options after the command are the same options as before it
ctl -m "$M" --json list >"$T/before" 2>&1
ctl list -m "$M" --json >"$T/after" 2>&1
grep -q '^\[{"name":"one","state":"mounted"' "$T/after" && cmp -s "$T/before" "$T/after" &&
	ok "list --json after the command prints the JSON" ||
	fail "list --json: '$(cat "$T/after")' vs '$(cat "$T/before")'"
ctl stats one --json --manager "$M" | grep -q '^{"name":"one",' &&
	ok "stats NAME --json --manager" || fail "stats NAME --json: $(ctl stats one --json --manager "$M" 2>&1)"
ctl --manager="$M" show one --json | grep -q '"mountpoint":"'"$T"'/m1"' &&
	ok "--manager=PATH before, --json after" || fail "--manager=: $(ctl --manager="$M" show one --json 2>&1)"
MFS_MANAGER=$M ctl status --json | grep -q '"pid":' && ok "MFS_MANAGER, status --json" ||
	fail "MFS_MANAGER"

# unknown options: exit 2, a message naming them, nothing done
expect 2 "unknown option after the command" ctl list --bogus -m "$M" &&
	grep -q "unknown option '--bogus'" "$T/err" && ok "its message names it" ||
	fail "message: $(cat "$T/err")"
[ -s "$T/out" ] && fail "a refused list printed: $(cat "$T/out")"
expect 2 "unknown option before the command" ctl -x -m "$M" list &&
	grep -q "unknown option '-x'" "$T/err" || fail "message: $(cat "$T/err")"
expect 2 "unknown option of unmount" ctl -m "$M" unmount one --lazy
is_mounted "$T/m1" && ok "unmount with an unknown option left one mounted" ||
	fail "unmount --lazy unmounted one"
expect 2 "a command's option given to another" ctl -m "$M" list --force
expect 2 "an option without its value" ctl status -m
grep -q "needs a value" "$T/err" || fail "message: $(cat "$T/err")"
expect 2 "a value for a flag" ctl -m "$M" list --json=yes
expect 2 "unknown command" ctl -m "$M" frobnicate
grep -q "unknown command 'frobnicate'" "$T/err" || fail "message: $(cat "$T/err")"
expect 2 "no command" ctl -m "$M"
expect 2 "too many arguments" ctl -m "$M" show one two
expect 2 "too few arguments" ctl -m "$M" mount one "$T/s2"
grep -q "usage: mfsctl mount NAME STORE MOUNTPOINT" "$T/err" || fail "message: $(cat "$T/err")"
expect 2 "usage errors need no manager" ctl -m "$T/nowhere" list --bogus

# "--" ends the options: a value beginning with "-" is an argument
expect 1 "an argument after --" ctl -m "$M" show -- -one
grep -q "no DBFS named -one" "$T/err" || fail "after --: $(cat "$T/err")"

# the other exit codes
expect 1 "the manager refuses" ctl -m "$M" config one durability=none
grep -q "config refused: .*cannot change while" "$T/err" || fail "reason: $(cat "$T/err")"
expect 1 "no such DBFS" ctl stats nosuch -m "$M"
expect 3 "not a manager" ctl status -m "$T"
grep -q "not a reachable mfs manager" "$T/err" || fail "message: $(cat "$T/err")"

# a flag of a command, before or after its argument
exec 3>"$T/m1/f"
expect 1 "busy unmount" ctl -m "$M" unmount one
expect 0 "unmount -f after the name" ctl unmount one -f -m "$M"
exec 3>&-
not_mounted "$T/m1" && ok "one unmounted" || fail "one still mounted"
expect 0 "mount again" ctl -m "$M" mount one "$T/s1" "$T/m1"
expect 0 "the umount alias, --force before the name" ctl -m "$M" umount --force one
stop_pid "$MPID" || fail "exit"
