#!/bin/sh
# mount -t fuse PROG#SOURCE (as fuse.mfs once installed) and an fstab line (through mount.fuse3), a daemonized
# manager, and umount of the manager mount point stopping it cleanly.
. "$(dirname "$0")/lib.sh"

command -v mount.fuse3 >/dev/null || { echo "SKIP: no mount.fuse3"; exit 77; }
# mount(8) runs helpers with a fixed PATH: an installed mfs is found as
# `-t fuse.mfs`; the build tree's binary is named with mount.fuse3's
# `-t fuse PROGRAM#SOURCE` form, which takes the same path through mount.fuse3.
MFSABS=$(cd "$(dirname "$MFS")" && pwd)/$(basename "$MFS")
M=$T/mfs
mkdir -p "$M" "$T/m1"
pid_of_manager() { getfattr --only-values -n user.mfs.status "$M" 2>/dev/null | sed -n 's/^pid=//p'; }

mount -t fuse "$MFSABS#mfs" "$M" -o "state=$T/state" || fail "mount -t fuse"
is_mounted "$M" && ok "mount -t fuse.mfs returns with the manager mounted" || fail "not mounted"
P=$(pid_of_manager)
[ -n "$P" ] && PIDS="$PIDS $P"
xset mount "name=a,store=$T/sa,mountpoint=$T/m1,create" || fail "mount a"
echo x >"$T/m1/f" || fail "I/O"
umount "$M" || fail "umount"
wait_for 20 is_dead "$P" && ok "daemon exits after umount of the manager" || fail "daemon alive"
not_mounted "$T/m1" && ok "its DBFS was unmounted too" || fail "m1 left mounted"

printf '%s#mfs %s fuse state=%s/state,nofail,x-test=1 0 0\n' "$MFSABS" "$M" "$T" >"$T/fstab"
mount -T "$T/fstab" "$M" || fail "mount from fstab"
is_mounted "$M" && ok "fstab line mounts the manager" || fail "fstab"
P=$(pid_of_manager)
[ -n "$P" ] && PIDS="$PIDS $P"
wait_for 20 sh -c "getfattr --only-values -n user.mfs.list '$M' | grep -q 'name=a,state=mounted'" \
	&& ok "a mounted again from the registry" || fail "a: $(xget list)"
[ "$(cat "$T/m1/f")" = x ] && ok "a's data" || fail "a's data"
umount "$M" || fail "umount 2"
wait_for 20 is_dead "$P" || fail "daemon 2 alive"
