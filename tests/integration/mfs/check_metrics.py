#!/usr/bin/python3
"""Check the manager's `metrics` file with a real Prometheus parser.

Usage: check_metrics.py FILE DBFS EXPECT...
  EXPECT is NAME{label=value,...}=N (a sample that must equal N) or
  NAME{label=value,...}>=N.

It parses FILE with prometheus_client's text_string_to_metric_families
(Debian's python3-prometheus-client), then checks: every family is one of
the expected names with the expected type; every name has the mfs_ prefix;
counters end in _total; only bounded labels appear; the latency histogram of
DBFS has the buckets 2^15..2^32 ns and +Inf, cumulative, with +Inf equal to
_count; mfs_dbfs_info of DBFS is 1; and every EXPECT. Prints one line per
problem and exits 1 if there was any.
"""
import re
import sys

from prometheus_client.parser import text_string_to_metric_families

TYPES = {
    "mfs_dbfs_info": "gauge",
    "mfs_requests": "counter",
    "mfs_operations": "counter",
    "mfs_read_bytes": "counter",
    "mfs_written_bytes": "counter",
    "mfs_errors": "counter",
    "mfs_request_duration_seconds": "histogram",
    "mfs_throttled": "counter",
    "mfs_capped": "counter",
    "mfs_inflight_requests": "gauge",
    "mfs_commits": "counter",
    "mfs_flushes": "counter",
    "mfs_used_bytes": "gauge",
    "mfs_used_inodes": "gauge",
    "mfs_quota_bytes": "gauge",
    "mfs_quota_inodes": "gauge",
    "mfs_store_file_bytes": "gauge",
    "mfs_cache_bytes": "gauge",
    "mfs_cache_limit_bytes": "gauge",
    "mfs_feed_events": "counter",
    "mfs_feed_lag_events": "gauge",
}
LABELS = {"dbfs", "op", "errno", "le", "mountpoint", "store", "state"}

problems = []


def problem(text):
    problems.append(text)
    print("metrics: " + text)


def main():
    path, dbfs = sys.argv[1], sys.argv[2]
    text = open(path, encoding="utf-8").read()
    # the format's own rules the parser is lenient about
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("# TYPE ") or line.startswith("# HELP ") or line == "":
            continue
        if not re.match(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eInfa]+$', line):
            problem("line %d is not a sample line: %r" % (n, line))
    if not text.endswith("\n"):
        problem("the text does not end with a newline")
    samples = {}
    seen = set()
    for fam in text_string_to_metric_families(text):
        seen.add(fam.name)
        want = TYPES.get(fam.name)
        if want is None:
            problem("unexpected family %s" % fam.name)
        elif fam.type != want:
            problem("%s is a %s, expected %s" % (fam.name, fam.type, want))
        if not fam.name.startswith("mfs_"):
            problem("%s lacks the mfs_ prefix" % fam.name)
        for s in fam.samples:
            if fam.type == "counter" and not s.name.endswith("_total"):
                problem("counter sample %s does not end in _total" % s.name)
            for k in s.labels:
                if k not in LABELS:
                    problem("%s has an unbounded label %s" % (s.name, k))
            key = s.name + "{" + ",".join(
                "%s=%s" % (k, v) for k, v in sorted(s.labels.items()) if k != "dbfs") + "}"
            if s.labels.get("dbfs") == dbfs:
                samples[key] = s.value
    for name in TYPES:
        if name not in seen:
            problem("family %s missing" % name)
    if samples.get("mfs_dbfs_info{mountpoint=%s,state=mounted,store=%s}" % (
            sys.argv[3], sys.argv[4])) != 1:
        problem("no mfs_dbfs_info 1 for %s with its mount point and store" % dbfs)
    # the histogram: buckets 2^15..2^32 ns, +Inf, cumulative
    prev = -1
    for k in range(15, 33):
        le = "%.10g" % ((1 << k) / 1e9)
        found = [v for key, v in samples.items()
                 if key.startswith("mfs_request_duration_seconds_bucket{")
                 and abs(float(re.search(r"le=([^,}]+)", key).group(1)) - (1 << k) / 1e9) < 1e-12]
        if len(found) != 1:
            problem("bucket le=%s: %d samples" % (le, len(found)))
            continue
        if found[0] < prev:
            problem("bucket le=%s not cumulative" % le)
        prev = found[0]
    inf = samples.get("mfs_request_duration_seconds_bucket{le=+Inf}")
    count = samples.get("mfs_request_duration_seconds_count{}")
    if inf is None or count is None or inf != count or inf < prev:
        problem("+Inf bucket %s, _count %s, last bucket %s" % (inf, count, prev))
    for e in sys.argv[5:]:
        m = re.match(r"^(.*\})(>=|=)(\d+)$", e)
        key, op, n = m.group(1), m.group(2), int(m.group(3))
        v = samples.get(key)
        if v is None or (op == "=" and v != n) or (op == ">=" and v < n):
            problem("%s is %s, expected %s %d" % (key, v, op, n))
    sys.exit(1 if problems else 0)


main()
