#!/bin/sh
# A burst of writes in the default durability mode reuses freed pages
# between durable points (issue 16, dbfs/held.c). The pin of the durable
# point keeps every page freed after it from reuse until the next point,
# so without points asked for by the freed pages, a tar -x of 2,000 small
# files within one commit_interval (here an hour: no point by time at all)
# grew data.mdb by about 117,000 pages (58 a file, every copy-on-write a
# new page at the end of the file). With them it stays within the live
# pages plus a few limits of churn: the bound below is a quarter of that.
# Pages are counted by LMDB itself (mdb_stat -e), never by time.
#
#   t_held.sh MFS
. "$(dirname "$0")/lib.sh"

command -v mdb_stat >/dev/null || { echo "SKIP: needs mdb_stat (lmdb-utils)"; exit 77; }
command -v tar >/dev/null || { echo "SKIP: needs tar"; exit 77; }
# durable points (and their pins) are made only for a store on a disk
case "$(stat -f -c %T "$T")" in
tmpfs | ramfs) echo "SKIP: $T is in memory: no durable points there"; exit 77 ;;
esac

S=$T/s
D=$T/d
M=$T/mfs
N=2000
BOUND=30000
mkdir -p "$S" "$D" "$T/src/tree"

# 2,000 files of 1-3 KiB in 20 directories, tarred
i=0
while [ $i -lt $N ]; do
	sub=$T/src/tree/d$((i / 100))
	[ -d "$sub" ] || mkdir "$sub"
	head -c $((1024 + (i * 37) % 2048)) /dev/urandom >"$sub/f$i.c"
	i=$((i + 1))
done
tar -cf "$T/tree.tar" -C "$T/src" tree || { fail "tar -c"; exit 1; }
rm -rf "$T/src"

start_manager "$M"
xset mount "name=s,store=$S,mountpoint=$D,create,commit_interval=3600" ||
	{ cat "$T/xset.err" "$T/mfs.log" >&2; fail "mount"; exit 1; }

used() { mdb_stat -e "$S" | awk -F': *' '/Number of pages used/ { print $2 }'; }
stat_of() { awk -F= -v k="$1" '$1 == k { print $2 }' "$M/s/stats"; }

p0=$(used)
h0=$(stat_of flushes_held)
tar -xf "$T/tree.tar" -C "$D" || fail "tar -x"
p1=$(used)
h1=$(stat_of flushes_held)
n=$(find "$D/tree" -type f | wc -l)
[ "$n" -eq $N ] && ok "tar -x made $n files" || fail "tar -x made $n files, not $N"
echo "pages used: $p0 before, $p1 after; points asked for by freed pages: ${h0:-?} -> ${h1:-?}"
[ "${h1:-0}" -gt "${h0:-0}" ] && ok "the burst asked for $((h1 - h0)) durable points (flushes_held)" ||
	fail "no durable point was asked for by the freed pages (flushes_held ${h0:-?} -> ${h1:-?})"
[ $((p1 - p0)) -le $BOUND ] && ok "the burst grew the store by $((p1 - p0)) pages (at most $BOUND)" ||
	fail "the burst grew the store by $((p1 - p0)) pages, more than $BOUND: freed pages are not reused"
# every file reads back
cmp -s "$D/tree/d19/f1999.c" /dev/null && fail "a file read back empty"
tar -df "$T/tree.tar" -C "$D" >/dev/null 2>&1 && ok "the tree reads back as tarred" || fail "tar -d: the tree differs"
xset unmount s || fail "unmount"
