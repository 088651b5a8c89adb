#!/bin/sh
# Accounting (issue 20): the `metrics` file parsed by a real Prometheus
# parser, its counters equal to the operations made; rates over 1/10/60 s
# in NAME/stats, user.mfs.stats.NAME and mfsctl stats that rise under load
# and fall back; the usage history in NAME/usage, surviving a restart of
# mfs; the reserved name "metrics".
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
CHECK=$(dirname "$0")/check_metrics.py
$PY -c 'import prometheus_client' 2>/dev/null ||
	{ echo "SKIP: no python3-prometheus-client (tools/deps installs it)"; exit 77; }

M=$T/mfs
start_manager "$M"
mkdir -p "$T/m1"
xset mount "name=one,store=$T/s1,mountpoint=$T/m1,create" || fail "mount one"
wait_for 10 is_mounted "$T/m1" || { fail "one not mounted"; exit 1; }

# the reserved name
mkdir -p "$T/mx"
expect_refused EINVAL mount "name=metrics,store=$T/sx,mountpoint=$T/mx,create" reserved

# metrics' request counters are those of the last usage record, which
# came through the accountant's queue (up to a second behind): before a
# scrape, wait for a record taken after what was just done (record_after)

# operations with known counts: 20 mkdirs, 7 rmdirs refused (ENOTEMPTY),
# 3 writes of 5000 bytes each through O_DIRECT-free files synced
mkdir "$T/m1/full" && : >"$T/m1/full/x" || fail "setup"
before=$(mktemp "$T/before.XXXX")
record_after one
cp "$M/metrics" "$before"
i=0
while [ $i -lt 20 ]; do mkdir "$T/m1/d$i" || fail "mkdir d$i"; i=$((i + 1)); done
i=0
while [ $i -lt 7 ]; do rmdir "$T/m1/full" 2>/dev/null && fail "rmdir of a full dir worked"; i=$((i + 1)); done
record_after one
cp "$M/metrics" "$T/metrics"
# counts from the difference of two scrapes (the kernel's own lookups
# and getattrs around them are not the test's to predict)
val() { v=$(grep "^$1{dbfs=\"one\"$2} " "$3" | awk '{ print $2 }'); echo "${v:-0}"; }
d_mkdir=$(( $(val mfs_operations_total ',op="mkdir"' "$T/metrics") - $(val mfs_operations_total ',op="mkdir"' "$before") ))
[ "$d_mkdir" = 20 ] || fail "mkdir counted $d_mkdir times, made 20"
b_rmdir=$(val mfs_operations_total ',op="rmdir"' "$before")
b_enotempty=$(val mfs_errors_total ',errno="ENOTEMPTY"' "$before")
$PY "$CHECK" "$T/metrics" one "$T/m1" "$T/s1" \
	"mfs_operations_total{op=rmdir}=$((b_rmdir + 7))" \
	"mfs_errors_total{errno=ENOTEMPTY}=$((b_enotempty + 7))" \
	"mfs_operations_total{op=mkdir}>=21" "mfs_requests_total{}>=28" \
	"mfs_used_inodes{}>=23" || fail "metrics check"
ok "metrics parse; mkdir, rmdir and ENOTEMPTY counted exactly"

# requests equal the histogram's count once nothing is in flight
req=$(val mfs_requests_total '' "$T/metrics")
cnt=$(val mfs_request_duration_seconds_count '' "$T/metrics")
[ "$req" = "$cnt" ] || fail "requests $req, latency count $cnt"

# bytes written: 3 files of 5000 bytes, synced
for f in a b c; do
	head -c 5000 /dev/zero >"$T/m1/$f" && sync "$T/m1/$f" || fail "write $f"
done
w0=$(val mfs_written_bytes_total '' "$T/metrics")
record_after one
cp "$M/metrics" "$T/metrics.w"
w1=$(val mfs_written_bytes_total '' "$T/metrics.w")
[ $((w1 - w0)) = 15000 ] || fail "written bytes grew by $((w1 - w0)), wrote 15000"

# rates: under load the 1 s rate is above 0; idle, it falls back to 0
rate() { awk -F'[=,]' -v k="$1" '$1 == k { print $2 + 0 }' "$M/one/stats"; }
busy() { r=$(rate ops_rate); [ "${r%.*}" -gt 50 ]; }
idle() { r=$(rate ops_rate); [ "$r" = 0 ]; }
# setxattr always reaches the file system (stat would be answered from the
# kernel's attribute cache)
(while [ ! -e "$T/stopload" ]; do setfattr -n user.k -v v "$T/m1/a"; done) &
LP=$!
PIDS="$PIDS $LP"
wait_for 20 busy || fail "ops_rate (1 s) not above 50 under load: $(grep _rate "$M/one/stats")"
# the same rates in user.mfs.stats.NAME and in mfsctl stats
ctl() { sh "$MFSCTL" -m "$M" "$@"; }
xattr_busy() { xget stats.one | grep -q '^ops_rate=[1-9][0-9]*\.[0-9]*,[0-9.]*,[0-9.]*$'; }
ctl_busy() { ctl stats one | grep -q '^ops_rate  *[1-9][0-9]*\.[0-9]*,[0-9.]*,[0-9.]*$'; }
wait_for 20 xattr_busy || fail "user.mfs.stats.one: no ops_rate above 0: $(xget stats.one | grep _rate)"
if [ -f "$MFSCTL" ]; then
	wait_for 20 ctl_busy || fail "mfsctl stats: no ops_rate above 0: $(ctl stats one | grep _rate)"
fi
touch "$T/stopload"
wait "$LP"
grep -q '^ops_rate=[0-9.]*,[0-9.]*,[0-9.]*$' "$M/one/stats" || fail "ops_rate is not 1s,10s,60s"
wait_for 20 idle || fail "ops_rate (1 s) not back to 0 when idle: $(grep ops_rate "$M/one/stats")"
ok "rates rise under load and fall back"

# the history's rows carry requests by operation and errors by errno: over
# every row since the mount, exactly the 21 mkdirs, 7 rmdirs and 7
# ENOTEMPTY made (the first record counts from the mount), and the flushes
# of the syncs
kind_sum() { # column kind
	grep -v '^#' "$M/one/usage" | awk -v c="$1" -v k="$2" '{ n = split($c, a, ",")
		for (i = 1; i <= n; i++) { split(a[i], p, ":"); if (p[1] == k) s += p[2] } }
		END { print s + 0 }'
}
head -1 "$M/one/usage" | grep -q ' feed_lag flushes_per_s ops_by_kind errors_by_errno$' ||
	fail "usage header: $(head -1 "$M/one/usage")"
[ "$(kind_sum 17 mkdir)" = 21 ] || fail "history: $(kind_sum 17 mkdir) mkdirs, made 21"
[ "$(kind_sum 17 rmdir)" = 7 ] || fail "history: $(kind_sum 17 rmdir) rmdirs, made 7"
[ "$(kind_sum 18 ENOTEMPTY)" = 7 ] || fail "history: $(kind_sum 18 ENOTEMPTY) ENOTEMPTY, got 7"
fl=$(grep -v '^#' "$M/one/usage" | awk '{ s += $16 * $3 } END { print s + 0 }')
fs=$(awk -F= '$1 == "flushes" { print $2 }' "$M/one/stats")
# (3 syncs at least; the flusher may add one after the last record)
[ "$fl" -ge 3 ] && [ "$fl" -le "$fs" ] || fail "history: $fl flushes, stats say $fs"
# stats.NAME shows the same record's totals by kind
grep -q '^record_ops_by_kind=\(.*,\)*mkdir:21\(,.*\)*$' "$M/one/stats" || fail "stats: $(grep ^record_ "$M/one/stats")"
grep -q '^record_errors_by_errno=\(.*,\)*ENOTEMPTY:7\(,.*\)*$' "$M/one/stats" || fail "stats: $(grep ^record_ "$M/one/stats")"
ok "history and stats carry requests by operation, errors by errno, flushes"

# the history: rows of the busy seconds, and they survive a restart
rows() { grep -v '^#' "$M/one/usage" | awk '$4 > 0' | wc -l; }
grep -v '^#' "$M/one/usage" | awk '$4 > 0 { print $1 }' >"$T/busy.before"
n=$(rows)
[ "$n" -ge 2 ] || fail "usage has $n busy rows: $(head -5 "$M/one/usage")"
head -1 "$M/one/usage" | grep -q '^# time date span_s ops_per_s' || fail "usage header"
# mfsctl usage: the same rows, as a table and as JSON, within the range
if [ -f "$MFSCTL" ]; then
	j=$(ctl usage one --json -p) || fail "mfsctl usage --json"
	jn=$(printf '%s' "$j" | grep -o '"ops_per_s":[1-9]' | wc -l)
	[ "$jn" = "$n" ] || fail "mfsctl usage --json has $jn busy rows, the file $n: $j"
	# its rows parse as JSON, with the kinds as objects of counts
	k=$(printf '%s' "$j" | $PY -c 'import json, sys
rows = json.load(sys.stdin)
print(sum(r["ops_by_kind"].get("mkdir", 0) for r in rows),
      sum(r["errors_by_errno"].get("ENOTEMPTY", 0) for r in rows),
      sum(1 for r in rows if r["flushes_per_s"] > 0) > 0)') || fail "mfsctl usage --json: not JSON: $j"
	[ "$k" = "21 7 True" ] || fail "mfsctl usage --json: mkdir, ENOTEMPTY, flushes: $k"
	tn=$(ctl usage one -p --since 1h | awk 'NR > 1 && $3 > 0' | wc -l)
	[ "$tn" = "$n" ] || fail "mfsctl usage table has $tn busy rows, the file $n"
	first=$(head -1 "$T/busy.before")
	tn=$(ctl usage one -p --from "$((first + 1))" | awk 'NR > 1 && $3 > 0' | wc -l)
	[ "$tn" = $((n - 1)) ] || fail "usage --from after the first busy row: $tn rows, expected $((n - 1))"
	ctl usage one --since 5x >/dev/null 2>&1; rc=$?
	[ $rc = 2 ] || fail "usage --since 5x: exit $rc, expected 2"
	ctl usage one --since 1h --from "1 hour ago" >/dev/null 2>&1; rc=$?
	[ $rc = 2 ] || fail "usage --since with --from: exit $rc, expected 2"
	ctl usage nosuch >/dev/null 2>&1; rc=$?
	[ $rc = 1 ] || fail "usage of an unknown DBFS: exit $rc, expected 1"
	ok "mfsctl usage: $n busy rows, ranges, refusals"
fi
stop_pid "$MPID" || fail "mfs did not stop"
start_manager "$M"
wait_for 10 is_mounted "$T/m1" || fail "one not remounted"
n2=$(rows)
grep -v '^#' "$M/one/usage" | awk '$4 > 0 { print $1 }' >"$T/busy.after"
missing=$(grep -v -x -F -f "$T/busy.after" "$T/busy.before" | wc -l)
[ "$missing" = 0 ] || fail "after a restart $missing of the $n busy rows are gone"
ok "usage history: $n busy rows, $n2 after a restart"

exit $FAILS
