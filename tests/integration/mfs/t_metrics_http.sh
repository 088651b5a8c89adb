#!/bin/sh
# -o metrics_listen=ADDR:PORT: the metrics over HTTP (libmicrohttpd), the
# same text as the manager's `metrics` file, checked by the Prometheus
# parser; 404 and 405 for other paths and methods; a malformed address
# and a port already taken stop mfs with a message.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
CHECK=$(dirname "$0")/check_metrics.py
$PY -c 'import prometheus_client' 2>/dev/null ||
	{ echo "SKIP: no python3-prometheus-client (tools/deps installs it)"; exit 77; }

# a free port, then held by nothing
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
M=$T/mfs
start_manager "$M" "metrics_listen=127.0.0.1:$PORT"
mkdir -p "$T/m1"
xset mount "name=one,store=$T/s1,mountpoint=$T/m1,create" || fail "mount one"
wait_for 10 is_mounted "$T/m1" || { fail "one not mounted"; exit 1; }
i=0
while [ $i -lt 5 ]; do mkdir "$T/m1/d$i"; i=$((i + 1)); done
record_after one # the counters come from the usage records

# fetch METHOD PATH OUT: prints "STATUS CONTENT-TYPE", the body in OUT
fetch() {
	$PY - "$PORT" "$1" "$2" "$3" <<'PYEOF'
import http.client, sys
port, method, path, out = sys.argv[1:]
c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
c.request(method, path)
r = c.getresponse()
open(out, "wb").write(r.read())
print(r.status, r.getheader("Content-Type"))
PYEOF
}
st=$(fetch GET /metrics "$T/http.txt") || fail "GET /metrics"
[ "$st" = "200 text/plain; version=0.0.4; charset=utf-8" ] || fail "GET /metrics: $st"
$PY "$CHECK" "$T/http.txt" one "$T/m1" "$T/s1" "mfs_operations_total{op=mkdir}=5" ||
	fail "the HTTP metrics do not check"
# the same families and series as the file (values move between reads)
cp "$M/metrics" "$T/file.txt"
series() { grep -v '^#' "$1" | sed 's/ [^ ]*$//' | grep -v 'op="\(lookup\|getattr\)"' | sort; }
series "$T/http.txt" >"$T/a"; series "$T/file.txt" >"$T/b"
cmp -s "$T/a" "$T/b" || fail "HTTP and file series differ: $(diff "$T/a" "$T/b" | head -5)"
ok "GET /metrics: 200, format 0.0.4, parsed, the file's series"
st=$(fetch GET /nothing "$T/x") && [ "${st%% *}" = 404 ] || fail "GET /nothing: $st"
st=$(fetch POST /metrics "$T/x") && [ "${st%% *}" = 405 ] || fail "POST /metrics: $st"
ok "404 and 405"

# a taken port, a malformed address: mfs stops at once with a reason
mkdir -p "$T/mfs2"
"$MFS" -f -o "state=$T/state2,metrics_listen=127.0.0.1:$PORT" "$T/mfs2" >"$T/taken.log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "metrics_listen: Address already in use" "$T/taken.log" ||
	fail "taken port: exit $rc, $(cat "$T/taken.log")"
not_mounted "$T/mfs2" || fail "mfs2 mounted although its port was taken"
"$MFS" -f -o "state=$T/state2,metrics_listen=9464" "$T/mfs2" >"$T/bad.log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "metrics_listen must be ADDR:PORT" "$T/bad.log" ||
	fail "malformed address: exit $rc, $(cat "$T/bad.log")"
ok "a taken port and a malformed address are refused"
exit $FAILS
