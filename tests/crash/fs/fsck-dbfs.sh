#!/bin/sh
# dbfs-fsck on stores written by a real DBFS: every kind of inode, xattrs,
# hard links, a large directory, and a file unlinked while open when the
# daemon is killed. The store must check clean except for that orphan
# (reported strictly, a note with --allow-orphans), --repair must reclaim
# it, and the repaired store must mount with every file intact. Last, files
# unlinked while open and closed just before a clean unmount: once the
# daemon is gone, no orphan may be left (a clean store has none).
. "$(dirname "$0")/../../stress/fs/harness.sh"

h_need_dbfs
h_init
h_start "${MFS_OPTS:-}"
h_fsck 8 || die "dbfs-fsck must refuse a mounted store"
cd "$MNT"
mkdir -p a/b/c big
head -c 300000 /dev/urandom >a/file
cp a/file "$OUT/file"
ln a/file a/b/hard
ln -s ../file a/b/sym
mkfifo a/fifo
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind("a/sock")' 2>/dev/null || true
setfattr -n user.k -v value a/file 2>/dev/null || true
truncate -s 10000000 a/sparse
printf tail >>a/sparse
i=0
while [ "$i" -lt 500 ]; do
	: >"big/f$i"
	i=$((i + 1))
done
rm big/f1*
mv a/b/c c2
# An open file, unlinked: an orphan until the next mount.
head -c 70000 /dev/urandom >orphan
sh -c 'exec 3<orphan; rm orphan; echo ready >"$1/ready"; exec sleep 3600' sh "$OUT" &
H_CHILD=$!
wait_for test -s "$OUT/ready" || die "the orphan's holder did not start"
sync -f .
cd /
h_crash
kill "$H_CHILD" 2>/dev/null
wait "$H_CHILD" 2>/dev/null || true
H_CHILD=""

h_fsck 0 --allow-orphans || die "store inconsistent after the crash"
h_fsck 1 || die "a strict check must report the orphan"
grep -q "orphan" "$T/fsck.out" || die "the orphan is not named in the report"
h_fsck 4 --repair || die "--repair must reclaim the orphan and report exit 4"
h_fsck 0 || die "not clean after --repair"
h_fsck 0 --repair || die "--repair of a clean store must exit 0"

h_start "${MFS_OPTS:-}"
cmp "$MNT/a/file" "$OUT/file" || die "a/file differs after the repair"
cmp "$MNT/a/b/hard" "$OUT/file" || die "a/b/hard differs after the repair"
[ "$(stat -c %h "$MNT/a/file")" = 2 ] || die "a/file has $(stat -c %h "$MNT/a/file") links"
[ "$(readlink "$MNT/a/b/sym")" = ../file ] || die "a/b/sym is wrong"
[ -p "$MNT/a/fifo" ] || die "a/fifo is gone"
[ "$(stat -c %s "$MNT/a/sparse")" = 10000004 ] || die "a/sparse has the wrong size"
[ "$(tail -c 4 "$MNT/a/sparse")" = tail ] || die "a/sparse has the wrong tail"
[ -d "$MNT/c2" ] && [ ! -e "$MNT/a/b/c" ] || die "the renamed directory is wrong"
[ "$(ls "$MNT/big" | wc -l)" = 389 ] || die "big/ has $(ls "$MNT/big" | wc -l) entries"
[ ! -e "$MNT/orphan" ] || die "the orphan has a name again"
h_stop || die "unclean unmount"
h_fsck 0 || die "not clean after the last mount"

# A store on the temporary directory's own file system (not the harness's
# tmpfs): slower commits widen the window between the last close and the
# unmount.
STORE="$T/store-disk"
mkdir "$STORE"
round=1
while [ "$round" -le 20 ]; do
	h_start "${MFS_OPTS:-}"
	sh -c 'cd "$1" && exec 3<>u3 4<>u4 5<>u5 6<>u6 7<>u7 8<>u8 9<>u9 &&
		for k in 3 4 5 6 7 8 9; do
			head -c 100000 /dev/zero >"/proc/self/fd/$k" && rm "u$k" || exit 1
		done' sh "$MNT" || die "round $round: writing the unlinked files failed"
	h_stop || die "round $round: unclean unmount"
	h_fsck 0 || die "round $round: files unlinked while open, all closed before a clean" \
		"unmount, are still orphans after the daemon exited"
	round=$((round + 1))
done
log "ok"
