#!/bin/sh
# mfsctl: every command, tables and --json, reasons and exit codes.
. "$(dirname "$0")/lib.sh"

[ -f "$MFSCTL" ] || { echo "SKIP: no mfsctl at $MFSCTL"; exit 77; }
ctl() { sh "$MFSCTL" -m "$M" "$@"; }
M=$T/mfs
start_manager "$M"
mkdir -p "$T/m1" "$T/m,2"
cd "$T" || exit 1
ctl mount one s1 m1 create quota_inodes=500 && ok "mount with relative paths" || fail "mount"
ctl mount two "$T/s,2" "$T/m,2" create durability=full && ok "mount with a comma in paths" \
	|| fail "mount two"
echo x >"$T/m,2/f" || fail "I/O on two"
ctl list >"$T/list" && grep -q "^one  *mounted  *$T/m1 " "$T/list" && ok "list table" \
	|| fail "list: $(cat "$T/list")"
grep -q "^two  *mounted  *$T/m,2 " "$T/list" || fail "list two: $(cat "$T/list")"
ctl --json list | grep -q "^\[{\"name\":\"one\",\"state\":\"mounted\"" && ok "list --json" \
	|| fail "json: $(ctl --json list)"
ctl --json list | grep -q "\"store\":\"$T/s,2\"" || fail "json store: $(ctl --json list)"
ctl show one | grep -q "^mountpoint  *$T/m1" && ok "show" || fail "show: $(ctl show one)"
ctl --json stats one | grep -q '"quota_inodes":500' && ok "stats --json" || fail "stats"
ctl status | grep -q "^version" && ctl --json status | grep -q '"pid":' && ok "status" \
	|| fail "status"
ctl config one iops=1000 && ctl stats one | grep -q "^iops_limit  *1000" && ok "config" \
	|| fail "config"
ctl config one durability=none 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "cannot change while" "$T/err" && ok "refused: exit 1 and the reason" \
	|| fail "refusal: $rc $(cat "$T/err")"
ctl unmount nosuch 2>"$T/err"; [ $? = 1 ] && grep -q "no DBFS named nosuch" "$T/err" \
	|| fail "unmount nosuch"
ctl bogus >/dev/null 2>&1; [ $? = 2 ] && ok "usage error: exit 2" || fail "usage exit"
sh "$MFSCTL" -m "$T" status >/dev/null 2>&1; [ $? = 3 ] && ok "not a manager: exit 3" \
	|| fail "exit 3"
exec 3<"$T/m,2/f"
ctl unmount two 2>/dev/null && fail "busy unmount accepted"
ctl unmount two --force && ok "unmount --force" || fail "force"
exec 3<&-
ctl unmount one && ctl forget one && ok "unmount, forget" || fail "unmount/forget"
[ "$(ctl list | wc -l)" = 2 ] || fail "list after forget: $(ctl list)"
# auto-detection of the manager mount when it is the only one (another
# test's manager may appear meanwhile: then mfsctl must refuse to guess,
# and this check says so instead of failing)
managers() { awk '$3 == "fuse.mfs"' /proc/mounts | wc -l; }
if [ "$(managers)" = 1 ]; then
	if sh "$MFSCTL" status >/dev/null 2>"$T/auto.err"; then
		ok "manager found without -m"
	elif [ "$(managers)" != 1 ]; then
		echo "auto-detect not checked: another manager mount appeared ($(cat "$T/auto.err"))"
	else
		fail "auto-detect: $(cat "$T/auto.err")"
	fi
fi
stop_pid $MPID || fail "exit"
