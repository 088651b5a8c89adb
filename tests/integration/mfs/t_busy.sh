#!/bin/sh
# Busy DBFSs: unmount without force is EBUSY and changes nothing; force
# detaches it even with a file held open; SIGTERM of the manager while
# `tail -f` holds a file open on a DBFS: every mount vanishes, mfs exits.
. "$(dirname "$0")/lib.sh"

M=$T/mfs
start_manager "$M"
mkdir -p "$T/ma" "$T/mb"
xset mount "name=a,store=$T/sa,mountpoint=$T/ma,create" || fail "mount a"
xset mount "name=b,store=$T/sb,mountpoint=$T/mb,create" || fail "mount b"
echo line >"$T/ma/log"
echo line >"$T/mb/log"

tail -f "$T/ma/log" >/dev/null 2>&1 &
TA=$!
PIDS="$PIDS $TA"
wait_for 10 sh -c "ls -l /proc/$TA/fd | grep -q '$T/ma/log'" || fail "tail did not open"
expect_refused EBUSY unmount a "busy"
is_mounted "$T/ma" && echo more >>"$T/ma/log" && ok "a still mounted and serving" || fail "a"
xset unmount a,force && ok "unmount a,force" || fail "unmount a,force: $(xget error)"
not_mounted "$T/ma" && ok "a gone although a file was open" || fail "a still mounted"
xget list | grep -q "name=a,state=unmounted" || fail "list: $(xget list)"
xset mount "name=a" && [ "$(head -1 "$T/ma/log")" = line ] && ok "a re-mounted" || fail "re-mount a"

tail -f "$T/mb/log" >/dev/null 2>&1 &
TB=$!
PIDS="$PIDS $TB"
wait_for 10 sh -c "ls -l /proc/$TB/fd | grep -q '$T/mb/log'" || fail "tail did not open"
stop_pid $MPID; rc=$?
[ $rc = 0 ] && ok "mfs exits 0 on SIGTERM with a file held open" || fail "exit $rc"
for m in "$M" "$T/ma" "$T/mb"; do not_mounted "$m" || fail "$m left mounted"; done
ok "no mount left"
grep -q "mfs stopped" "$T/mfs.log" && ok "log says so" || fail "log"
