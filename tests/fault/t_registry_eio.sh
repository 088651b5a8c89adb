#!/bin/sh
# The registry's disk fails (tests/fault/eio_shim.c, LD_PRELOADed into mfs,
# FAULT_DIR = the state directory: while $FAULT_DIR/eio exists, every write
# of registry.mdb fails with EIO): a mount, config, unmount or forget that
# the registry cannot record fails with EIO and a reason naming the
# registry, and is not made (a mount taken down again with the store it
# created, an unmount mounted again); after a SIGKILL and a restart mfs
# brings back exactly what ran.
# Usage: t_registry_eio.sh PATH-TO-mfs PATH-TO-eio_shim.so
SHIM=$2
. "$(dirname "$0")/../integration/mfs/lib.sh"
[ -f "$SHIM" ] || { echo "no shim $SHIM" >&2; exit 2; }

export FAULT_DIR="$T/state"
mkdir -p "$T/m1" "$T/m2"
M=$T/mgr
shim_mfs "$SHIM"
MFS=$T/mfs-shim start_manager "$M"
state_of() { xget list | sed -n "s/^name=$1,state=\([a-z]*\).*/\1/p"; }
opts_of() { xget dbfs.$1 | sed -n 's/^options=//p'; }
xset mount "name=a,store=$T/sa,mountpoint=$T/m1,create,quota_bytes=1G" ||
	{ fail "mount a: $(cat "$T/xset.err")"; exit 1; }
echo data >"$T/m1/f" || fail "write on a"
opts0=$(opts_of a)

touch "$FAULT_DIR/eio"
expect_refused EIO mount "name=b,store=$T/sb,mountpoint=$T/m2,create" "registry"
not_mounted "$T/m2" && [ ! -e "$T/sb" ] && [ -z "$(state_of b)" ] &&
	ok "the refused mount left nothing: no mount, no store, no DBFS b" ||
	fail "refused mount of b: mounted $(is_mounted "$T/m2" && echo yes), store: $(ls -a "$T/sb" 2>&1), state '$(state_of b)'"
expect_refused EIO config "name=a,quota_bytes=2G" "registry"
[ "$(opts_of a)" = "$opts0" ] && ok "the refused config changed nothing: $opts0" ||
	fail "config of a: options '$(opts_of a)', were '$opts0'"
expect_refused EIO unmount a "registry.*mounted again"
wait_for 20 sh -c "getfattr --only-values -n user.mfs.list '$M' | grep -q '^name=a,state=mounted'" &&
	is_mounted "$T/m1" && [ "$(cat "$T/m1/f")" = data ] &&
	ok "the refused unmount left a mounted" || fail "a after the refused unmount: $(state_of a)"
rm "$FAULT_DIR/eio"
xset unmount a || fail "unmount a: $(cat "$T/xset.err")"
touch "$FAULT_DIR/eio"
expect_refused EIO forget a "registry"
[ "$(state_of a)" = unmounted ] && ok "the refused forget kept a" || fail "a: '$(state_of a)'"
rm "$FAULT_DIR/eio"
xset mount name=a || fail "mount a again: $(cat "$T/xset.err")"

# what a restart brings back is what ran: a mounted with its old options, no b
kill -KILL "$MPID"
wait "$MPID" 2>/dev/null
MFS=$T/mfs-shim start_manager "$M"
wait_for 20 sh -c "getfattr --only-values -n user.mfs.list '$M' | grep -q '^name=a,state=mounted'" &&
	[ "$(cat "$T/m1/f")" = data ] && ok "after a restart a is mounted again" ||
	fail "after the restart: $(xget list)"
[ "$(opts_of a)" = "$opts0" ] && [ -z "$(state_of b)" ] &&
	ok "the restarted mfs knows only what ran: a with $opts0" ||
	fail "after the restart: a's options '$(opts_of a)', b '$(state_of b)'"
[ $FAILS = 0 ]
