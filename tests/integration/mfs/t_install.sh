#!/bin/sh
# `meson install -C BUILD` puts mfs, mfsctl, the man pages and the systemd unit
# where `mount -t fuse.mfs`, man and systemd find them.
#
# Installed into a scratch DESTDIR; a private mount namespace lays it over the
# prefix with a read-only overlay, so inside this test the system looks as if
# installed and outside nothing changes. mount(8) gives its helpers no PATH:
# mount.fuse3 runs "mfs SOURCE MOUNTPOINT -o ..." through /bin/sh, which then
# searches its built-in path (/usr/local/sbin:/usr/local/bin:/usr/sbin:...).
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root"
	exit 77
fi
if [ -z "${MFS_INSTALL_NS:-}" ]; then
	command -v unshare >/dev/null || { echo "SKIP: no unshare"; exit 77; }
	MFS_INSTALL_NS=1
	export MFS_INSTALL_NS
	exec unshare -m --propagation private sh "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"

for p in meson python3 mount.fuse3; do
	command -v $p >/dev/null || { echo "SKIP: no $p"; exit 77; }
done
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
	{ echo "SKIP: no overlayfs"; exit 77; }
BUILD=$(cd "$(dirname "$MFS")/.." && pwd)
[ -f "$BUILD/meson-private/install.dat" ] || { echo "SKIP: $BUILD is not a meson build dir"; exit 77; }
opt() { # meson build option NAME
	meson introspect --buildoptions "$BUILD" |
		python3 -c "import json,sys; print([o['value'] for o in json.load(sys.stdin) if o['name'] == '$1'][0])"
}
PREFIX=$(opt prefix)
SBIN=$PREFIX/$(opt sbindir)
BIN=$PREFIX/$(opt bindir)
MAN8=$PREFIX/$(opt mandir)/man8
D=$T/root
M=$T/mfs
mkdir -p "$M" "$T/m1"
# the shell mount.fuse3 runs the file system through, with the environment it gets
helper_sh() { env -i /bin/sh -c "$1"; }

# from a checkout, before installing: the helper cannot find mfs
before=$(helper_sh 'command -v mfs')
if [ -z "$before" ]; then
	mount -t fuse.mfs mfs "$M" -o "state=$T/state" 2>"$T/err" && fail "mounted without mfs installed"
	grep -q "mfs: not found" "$T/err" && ok "not installed: mount -t fuse.mfs says '$(cat "$T/err")'" ||
		fail "not installed: '$(cat "$T/err")'"
else
	echo "note: an mfs is installed on this system ($before); the test checks which one runs"
fi

# the documented command, into the scratch root. meson install rewrites the
# build dir's install log, which `ninja uninstall` follows: keep the user's.
LOG=$BUILD/meson-logs/install-log.txt
[ -f "$LOG" ] && cp -p "$LOG" "$T/install-log.user"
meson install -C "$BUILD" --no-rebuild --destdir "$D" >"$T/install.out" 2>&1
rc=$?
cp "$LOG" "$T/installed" 2>/dev/null
if [ -f "$T/install-log.user" ]; then cp -p "$T/install-log.user" "$LOG"; else rm -f "$LOG"; fi
[ $rc = 0 ] || { cat "$T/install.out" >&2; fail "meson install"; exit 1; }
ok "meson install -C build --destdir (prefix $PREFIX)"
outside=$(grep -v '^#' "$T/installed" | grep -v -x -e "$D" -e "$D/.*")
[ -z "$outside" ] && ok "every installed file is under the scratch root" ||
	fail "installed outside $D: $outside"
for f in "$SBIN/mfs" "$BIN/mfsctl" "$MAN8/mfs.8" "$MAN8/mfsctl.8"; do
	[ -f "$D$f" ] || fail "not installed: $f"
done
unit=$(find "$D" -name 'mfs@.service' | head -1)
[ -n "$unit" ] && ok "unit installed as ${unit#"$D"}" || fail "no mfs@.service installed"
[ -x "$D$SBIN/mfs" ] && [ -x "$D$BIN/mfsctl" ] || fail "mfs or mfsctl not executable"

# lay the scratch root over the prefix, in this namespace only
mount -t overlay mfs-install -o "lowerdir=$D$PREFIX:$PREFIX" "$PREFIX" ||
	{ fail "overlay over $PREFIX"; exit 1; }
[ "$(helper_sh 'command -v mfs')" = "$SBIN/mfs" ] && ok "mount.fuse3's shell finds $SBIN/mfs" ||
	fail "mount.fuse3's shell finds '$(helper_sh 'command -v mfs')'"

mount -t fuse.mfs mfs "$M" -o "state=$T/state" 2>"$T/err" && ok "mount -t fuse.mfs mfs $M -o state=..." ||
	fail "mount -t fuse.mfs: $(cat "$T/err")"
awk -v m="$M" '$5 == m { for (i = 7; $i != "-"; i++); print $(i + 1) }' /proc/self/mountinfo |
	grep -qx fuse.mfs || fail "$M is not a fuse.mfs mount"
P=$(getfattr --only-values -n user.mfs.status "$M" 2>/dev/null | sed -n 's/^pid=//p')
[ -n "$P" ] && PIDS="$PIDS $P"
[ -n "$P" ] && [ "$(readlink "/proc/$P/exe")" = "$SBIN/mfs" ] && cmp -s "/proc/$P/exe" "$D$SBIN/mfs" &&
	ok "the daemon is the installed $SBIN/mfs" || fail "daemon $P runs '$(readlink "/proc/$P/exe")'"

# the installed mfsctl, found on a default PATH
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$BIN
[ "$(command -v mfsctl)" = "$BIN/mfsctl" ] || fail "mfsctl found as '$(command -v mfsctl)'"
mfsctl -m "$M" mount a "$T/sa" "$T/m1" create && echo x >"$T/m1/f" &&
	mfsctl list -m "$M" | grep -q "^a  *mounted  *$T/m1 " && ok "installed mfsctl mounts a DBFS" ||
	fail "installed mfsctl: $(mfsctl -m "$M" list 2>&1)"

# man finds both pages (man-db maps $PREFIX/sbin and bin to $PREFIX/share/man)
if command -v man >/dev/null; then
	for page in mfs mfsctl; do
		w=$(man -w "$page" 2>/dev/null)
		[ -n "$w" ] && [ "$(readlink -f "$w")" = "$(readlink -f "$MAN8/$page.8")" ] &&
			ok "man -w $page: $w" || fail "man -w $page: '$w'"
	done
	MANPAGER="cat" man mfsctl 2>/dev/null | grep -q "control a running mfs manager" ||
		fail "man mfsctl does not show the page"
fi

# systemd finds the unit by name, and its ExecStart is the installed mfs
grep -q "^ExecStart=$SBIN/mfs " "$unit" && ok "the unit runs $SBIN/mfs" ||
	fail "unit: $(grep ExecStart "$unit")"
if command -v systemd-analyze >/dev/null; then
	systemd-analyze verify mfs@main.service >"$T/verify" 2>&1 &&
		ok "systemd-analyze verify mfs@main.service" || fail "verify: $(cat "$T/verify")"
fi

umount "$M" || fail "umount $M"
wait_for 20 is_dead "$P" && ok "the installed daemon exits on umount" || fail "daemon $P alive"
not_mounted "$T/m1" || fail "a left mounted"

# an fstab line of type fuse.mfs, as the README gives it
printf 'mfs %s fuse.mfs state=%s/state,nofail 0 0\n' "$M" "$T" >"$T/fstab"
mount -T "$T/fstab" "$M" 2>"$T/err" && is_mounted "$M" && ok "fstab line of type fuse.mfs" ||
	fail "fstab: $(cat "$T/err")"
P=$(getfattr --only-values -n user.mfs.status "$M" 2>/dev/null | sed -n 's/^pid=//p')
wait_for 20 sh -c "[ \"\$(cat '$T/m1/f' 2>/dev/null)\" = x ]" && ok "a mounted again, its data" ||
	fail "a after the fstab mount"
umount "$M" || fail "umount 2"
[ -n "$P" ] && { wait_for 20 is_dead "$P" || fail "daemon 2 alive"; }

umount "$PREFIX" || fail "umount the overlay"
[ "$(helper_sh 'command -v mfs')" = "$before" ] && ok "outside the overlay the system is as before" ||
	fail "after: '$(helper_sh 'command -v mfs')', before: '$before'"
