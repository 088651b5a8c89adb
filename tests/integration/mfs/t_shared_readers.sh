#!/bin/sh
# A shared store (issue 21) keeps reusing freed pages after one of its
# processes was killed in the middle of a read (issue 16). LMDB resets its
# reader table only when an open finds no other process using the store;
# a killed process's slot that held a snapshot keeps every page freed
# after it from being reused, so without mdb_reader_check (dbfs/readers.c)
# the survivor's store grows with every write.
#
#   t_shared_readers.sh MFS SHIM
#
# SHIM (holdread_shim.so) makes process B hold a read of a marked file
# inside its LMDB read transaction; the test then kills B with SIGKILL and
# checks, in the survivor A: stats count the cleared slot, `mdb_stat -r`
# lists no slot of B, and rewriting a 2 MiB file twenty times in place
# grows data.mdb's used pages by next to nothing once the first rewrites
# filled the free list (pinned: each rewrite takes ~600 new pages).
. "$(dirname "$0")/lib.sh"

SHIM=${2:?usage: t_shared_readers.sh MFS SHIM}
S=$T/s
A=$T/a
B=$T/b
M=$T/mfs
mkdir -p "$S" "$A" "$B"
SO=shared,durability=full # the store is on a disk here
command -v mdb_stat >/dev/null || { echo "SKIP: needs mdb_stat (lmdb-utils)"; exit 77; }

start_manager "$M"
xset mount "name=s,store=$S,mountpoint=$A,create,$SO" ||
	{ cat "$T/xset.err" "$T/mfs.log" >&2; fail "manager: shared mount"; exit 1; }
MFS0=$MFS
shim_mfs "$SHIM"
MFS=$T/mfs-shim
HOLDREAD_READY=$T/held start_dbfs "$B" "$SO" b
PB=$DPID
MFS=$MFS0

# pages used: LMDB's last page number + 1
used() { mdb_stat -e "$S" | awk -F': *' '/Number of pages used/ { print $2 }'; }
stat_of() { awk -F= -v k="$1" '$1 == k { print $2 }' "$M/s/stats"; }
# does the reader table list a slot of pid $1?
has_slot() { mdb_stat -r "$S" | awk -v p="$1" '$1 == p { f = 1 } END { exit !f }'; }

{ printf 'MFS-HOLD-READ'; head -c 8000 /dev/zero; } >"$A/hold"
head -c 2097152 /dev/urandom >"$A/churn"
bg reader cat "$B/hold"
wait_for 20 test -e "$T/held" || { cat "$T/b.log" >&2; fail "B never held the read"; exit 1; }
has_slot "$PB" && ok "B holds a reader slot ($(mdb_stat -r "$S" | awk -v p="$PB" '$1 == p' | head -1))" ||
	fail "no reader slot of B: $(mdb_stat -r "$S")"
c0=$(stat_of readers_cleared)

kill -KILL "$PB"
wait_for 20 is_dead "$PB" || fail "B did not die"
wait "$PB" 2>/dev/null
wait_for 10 sh -c "[ \$(awk -F= '\$1 == \"readers_cleared\" { print \$2 }' '$M/s/stats') -gt ${c0:-0} ]" &&
	ok "A's stats count the dead reader's slots: readers_cleared=$(stat_of readers_cleared)" ||
	fail "readers_cleared stayed ${c0:-?} in A"
has_slot "$PB" && fail "the reader table still lists B's slot: $(mdb_stat -r "$S")" ||
	ok "mdb_stat -r lists no slot of B"

# churn in the survivor: in-place rewrites free the file's old pages
rewrite() {
	i=0
	while [ $i -lt "$1" ]; do
		dd if=/dev/urandom of="$A/churn" bs=1M count=2 conv=notrunc 2>/dev/null ||
			{ fail "rewrite $i"; return; }
		i=$((i + 1))
	done
}
p0=$(used)
rewrite 10
p1=$(used)
rewrite 20
p2=$(used)
echo "pages used: $p0 before, $p1 after 10 rewrites, $p2 after 20 more"
[ $((p2 - p1)) -lt 256 ] && ok "20 rewrites of 2 MiB grew the store by $((p2 - p1)) pages: freed pages reused" ||
	fail "20 rewrites of 2 MiB grew the store by $((p2 - p1)) pages: a dead reader pins the free list"
# the manager's DBFS still serves
[ "$(head -c 13 "$A/hold")" = MFS-HOLD-READ ] && ok "A still serves" || fail "A: hold unreadable"
