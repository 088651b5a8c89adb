#!/bin/sh
# mfsctl tables: sizes in binary units, times as dates, durations, "none" for
# a zero limit; -p (--parsable) prints the exact numbers the manager gave;
# --json is always exact.
. "$(dirname "$0")/lib.sh"

[ -f "$MFSCTL" ] || { echo "SKIP: no mfsctl at $MFSCTL"; exit 77; }
M=$T/mfs
start_manager "$M"
mkdir -p "$T/m1"
ctl() { sh "$MFSCTL" -m "$M" "$@"; }
ctl mount one "$T/s1" "$T/m1" create || fail "mount"
dd if=/dev/zero of="$T/m1/f" bs=1M count=3 conv=fsync 2>/dev/null || fail "write 3 MiB"
ctl config one quota_bytes=10G || fail "config quota_bytes=10G"

# field VALUE-OF-KEY from a two-column table on stdin
field() { awk -v k="$1" '$1 == k { sub(/^[^ ]+ +/, ""); print; exit }'; }
# the same from a JSON object on stdin (numbers only)
jnum() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }

# human(N): what the table must print for N bytes (zfs list style, K = 1024)
human() {
	awk -v n="$1" 'BEGIN {
		if (n < 1024) { print n "B"; exit }
		split("K M G T P E", u, " ")
		for (v = n; v >= 1024 && i < 6; i++) v /= 1024
		printf(v < 10 ? "%.2f%s\n" : v < 100 ? "%.1f%s\n" : "%.0f%s\n", v, u[i])
	}'
}

# list: USED in units, exact with -p and in JSON
bytes=$(ctl list --json | jnum bytes)
[ -n "$bytes" ] && [ "$bytes" -ge 3145728 ] || fail "json bytes: '$bytes'"
used=$(ctl list | awk '$1 == "one" { print $5 }')
case "$used" in
3.0[0-9]M) ok "list shows USED $used for $bytes bytes" ;;
*) fail "list USED is '$used' for $bytes bytes: $(ctl list)" ;;
esac
[ "$used" = "$(human "$bytes")" ] || fail "USED '$used', expected $(human "$bytes")"
used_p=$(ctl list -p | awk '$1 == "one" { print $5 }')
[ "$used_p" = "$bytes" ] && ok "list -p shows the exact $bytes" || fail "list -p USED '$used_p'"
ctl list | head -1 | grep -q "NAME  *STATE  *MOUNTPOINT  *STORE  *USED  *INODES" ||
	fail "list header: $(ctl list | head -1)"

# stats: sizes, limits, quotas
ctl stats one >"$T/st"
ctl stats one -p >"$T/stp"
ctl stats one --json >"$T/stj"
[ "$(field quota_bytes <"$T/st")" = 10.0G ] && ok "quota_bytes 10G shows as 10.0G" ||
	fail "quota_bytes: '$(field quota_bytes <"$T/st")'"
[ "$(field quota_bytes <"$T/stp")" = 10737418240 ] && ok "stats -p: quota_bytes 10737418240" ||
	fail "stats -p quota_bytes: '$(field quota_bytes <"$T/stp")'"
[ "$(field quota_inodes <"$T/st")" = none ] && [ "$(field quota_inodes <"$T/stp")" = 0 ] &&
	ok "no inode quota: none, 0 with -p" || fail "quota_inodes: $(field quota_inodes <"$T/st")"
map=$(jnum map_size <"$T/stj")
[ -n "$map" ] && [ "$(field map_size <"$T/st")" = "$(human "$map")" ] &&
	[ "$(field map_size <"$T/stp")" = "$map" ] && ok "map_size $map: $(human "$map"), exact with -p" ||
	fail "map_size: json '$map', table '$(field map_size <"$T/st")', -p '$(field map_size <"$T/stp")'"
wb=$(jnum write_bytes <"$T/stj")
[ "$(field write_bytes <"$T/st")" = "$(human "$wb")" ] && ok "write_bytes $wb: $(human "$wb")" ||
	fail "write_bytes: '$(field write_bytes <"$T/st")' for $wb"
case "$(field requests <"$T/st")" in
*[!0-9]* | "") fail "requests is not a plain count: '$(field requests <"$T/st")'" ;;
*) ok "counts stay plain numbers" ;;
esac

# show: mounted_since as a date; -p and JSON in seconds since the epoch
since=$(ctl show one --json | jnum mounted_since)
now=$(date +%s)
[ -n "$since" ] && [ "$since" -le "$now" ] && [ "$since" -gt $((now - 3600)) ] ||
	fail "mounted_since '$since' (now $now)"
shown=$(ctl show one | field mounted_since)
[ "$shown" = "$(date -d "@$since" '+%Y-%m-%d %H:%M:%S')" ] && ok "mounted_since shows as the date $shown" ||
	fail "mounted_since shows '$shown' for $since"
[ "$(ctl show one -p | field mounted_since)" = "$since" ] && ok "show -p: mounted_since $since" ||
	fail "show -p: '$(ctl show one -p | field mounted_since)'"

# status: uptime as a duration, rss in units
up=$(ctl status | field uptime)
case "$up" in
*s | *m) ok "uptime shows as the duration '$up'" ;;
*) fail "uptime: '$up'" ;;
esac
case "$(ctl status -p | field uptime)" in
*[!0-9]* | "") fail "status -p uptime: '$(ctl status -p | field uptime)'" ;;
*) ok "status -p: uptime in seconds" ;;
esac
# (rss moves between two calls: its form, not its value)
rss=$(ctl status | field rss)
case "$rss" in
[0-9]*[KMG]) ok "rss shows as $rss" ;;
*) fail "rss: '$rss'" ;;
esac
case "$(ctl status -p | field rss_kib)" in
*[!0-9]* | "") fail "status -p rss_kib: '$(ctl status -p | field rss_kib)'" ;;
*) ok "status -p: rss_kib in KiB" ;;
esac
ctl unmount one || fail "unmount"
stop_pid "$MPID" || fail "exit"
