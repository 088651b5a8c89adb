#!/bin/sh
# Permissions: with allow_other another user (nobody) may read status,
# control only the DBFSs it created (EPERM on others'), and needs write
# access to the mount point (EACCES). Without allow_other it cannot reach
# the manager at all.
. "$(dirname "$0")/lib.sh"

command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
U=65534
as_user() { setpriv --reuid=$U --regid=$U --clear-groups "$@"; }
chmod 755 "$T"
M=$T/mfs
start_manager "$M" allow_other
mkdir -p "$T/mroot" "$T/mine" "$T/rootdir"
xset mount "name=rootfs,store=$T/sroot,mountpoint=$T/mroot,create" || fail "root mount"
mkdir -p "$T/ustore" && chown $U:$U "$T/mine" "$T/ustore"

as_user getfattr --only-values -n user.mfs.status "$M" 2>/dev/null | grep -q "^version=" \
	&& ok "nobody reads status" || fail "nobody cannot read status"
as_user cat "$M/rootfs/status" | grep -q "state=mounted" && ok "nobody cats rootfs/status" \
	|| fail "cat as nobody"
uerr() { as_user getfattr --only-values -n user.mfs.error "$M" 2>/dev/null; }
as_user setfattr -n user.mfs.unmount -v rootfs "$M" 2>/dev/null && fail "nobody unmounted rootfs"
uerr | grep -q "^EPERM" && ok "EPERM unmounting root's DBFS: $(uerr)" || fail "$(uerr)"
as_user setfattr -n user.mfs.config -v "name=rootfs,iops=1" "$M" 2>/dev/null && fail "config"
uerr | grep -q "^EPERM" && ok "EPERM on config of root's DBFS" || fail "$(uerr)"
as_user setfattr -n user.mfs.mount -v "name=u1,store=$T/ustore/s,mountpoint=$T/rootdir,create" \
	"$M" 2>/dev/null && fail "nobody mounted on root's directory"
uerr | grep -q "^EACCES" && ok "EACCES on a mount point nobody cannot write" || fail "$(uerr)"
as_user setfattr -n user.mfs.mount -v "name=u1,store=$T/sroot2,mountpoint=$T/mine,create" \
	"$M" 2>/dev/null && fail "nobody created a store in root's directory"
uerr | grep -q "^EACCES" && ok "EACCES creating a store where nobody cannot write" || fail "$(uerr)"
# root's own error is separate from nobody's
xget error | grep -q "no refused command" && ok "root has no refused command" || fail "$(xget error)"
as_user setfattr -n user.mfs.mount -v "name=u1,store=$T/ustore/s,mountpoint=$T/mine,create" "$M" \
	&& ok "nobody mounts its own DBFS" || fail "$(uerr)"
xget dbfs.u1 | grep -q "^owner=$U" && ok "owned by nobody" || fail "$(xget dbfs.u1)"
[ "$(stat -c %u "$T/ustore/s")" = $U ] && ok "new store belongs to nobody" || fail "store owner"
as_user sh -c "echo mine >'$T/mine/f' && sync '$T/mine/f'" && [ "$(stat -c %u "$T/mine/f")" = $U ] \
	&& ok "nobody writes in its new DBFS" || fail "nobody cannot write in its DBFS"
as_user setfattr -n user.mfs.unmount -v u1 "$M" && ok "nobody unmounts its own" || fail "$(uerr)"
# Every file of the store is nobody's, also one made again while it is
# mounted (a store closed cleanly needs no dbfs.images; on a disk the
# next durable point makes it, as nobody when the open makes it, given
# the owner of dbfs.durable when a worker of root does). Else nobody
# could not open (or dbfs-fsck) its own store without root.
rm -f "$T/ustore/s/dbfs.images"
as_user setfattr -n user.mfs.mount -v "name=u1,store=$T/ustore/s,mountpoint=$T/mine" "$M" ||
	fail "$(uerr)"
as_user sh -c "echo again >'$T/mine/g' && sync '$T/mine/g'" || fail "write and fsync"
as_user setfattr -n user.mfs.unmount -v u1 "$M" || fail "$(uerr)"
[ -z "$(find "$T/ustore/s" ! -user $U)" ] && ok "every file of the store is nobody's" ||
	fail "store files not nobody's: $(find "$T/ustore/s" ! -user $U -printf '%p:%u ')"
as_user setfattr -n user.mfs.forget -v u1 "$M" && ok "nobody forgets its own" || fail "$(uerr)"
stop_pid $MPID

# without allow_other another user cannot reach the manager at all
start_manager "$M"
as_user getfattr -n user.mfs.status "$M" >/dev/null 2>&1 && fail "reached without allow_other" \
	|| ok "no access without allow_other"
stop_pid $MPID
