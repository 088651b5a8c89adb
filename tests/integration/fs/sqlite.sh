#!/bin/sh
# sqlite3 under concurrent writers (fcntl locks, rollback journal, then WAL
# with its shared-memory mmap): every insert of every writer is there and the
# database passes its integrity check.
. "$(dirname "$0")/lib.sh"
need_prog sqlite3
fs_mount
WRITERS=4
ROWS=150

writer() { # db writer-id
	{
		echo ".timeout 60000"
		echo ".bail on"
		r=0
		while [ $r -lt $ROWS ]; do
			echo "BEGIN IMMEDIATE; INSERT INTO t(w, r, pad) VALUES ($2, $r, randomblob(300)); COMMIT;"
			r=$((r + 1))
		done
	} | sqlite3 "$1" >/dev/null
}

run_mode() { # journal mode
	db="$MNT/$1.db"
	sqlite3 "$db" "PRAGMA journal_mode=$1; CREATE TABLE t(id INTEGER PRIMARY KEY, w INT, r INT, pad BLOB);" >/dev/null ||
		die "$1: create failed"
	pids=""
	w=0
	while [ $w -lt $WRITERS ]; do
		writer "$db" $w &
		pids="$pids $!"
		w=$((w + 1))
	done
	for p in $pids; do
		wait "$p" || die "$1: a writer failed (exit $?)"
	done
	n=$(sqlite3 "$db" "SELECT count(*) FROM t;")
	[ "$n" -eq $((WRITERS * ROWS)) ] || die "$1: $n rows, expected $((WRITERS * ROWS))"
	d=$(sqlite3 "$db" "SELECT count(*) FROM (SELECT DISTINCT w, r FROM t);")
	[ "$d" -eq $((WRITERS * ROWS)) ] || die "$1: $d distinct rows, expected $((WRITERS * ROWS))"
	ic=$(sqlite3 "$db" "PRAGMA integrity_check;")
	[ "$ic" = ok ] || die "$1: integrity_check: $ic"
	log "ok - sqlite3 $1 with $WRITERS concurrent writers"
}
run_mode delete
run_mode wal
fs_remount
for m in delete wal; do
	[ "$(sqlite3 "$MNT/$m.db" "PRAGMA integrity_check;")" = ok ] || die "$m: integrity_check failed after remount"
	n=$(sqlite3 "$MNT/$m.db" "SELECT count(*) FROM t;")
	[ "$n" -eq $((WRITERS * ROWS)) ] || die "$m: $n rows after remount"
done
