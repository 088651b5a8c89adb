#!/bin/sh
# The bad-input battery of the control protocol: every refused command gets
# the right errno and a one-line reason in user.mfs.error, changes nothing,
# and the daemon and the other DBFSs keep working through all of it.
. "$(dirname "$0")/lib.sh"

M=$T/mfs
start_manager "$M"
mkdir -p "$T/mok" "$T/m1" "$T/notempty/sub" "$T/m2"
: >"$T/afile"
xset mount "name=ok,store=$T/sok,mountpoint=$T/mok,create" || fail "mount ok"
echo data >"$T/mok/f"
before=$(xget list | sed "s/,bytes=.*//")
S="store=$T/s1,mountpoint=$T/m1,create"

# malformed values
expect_refused EINVAL mount "name=x,,$S" "empty option"
expect_refused EINVAL mount "=x,$S" "no key"
expect_refused EINVAL mount "name=x,$S\\" "backslash"
expect_refused EINVAL mount "" "empty"
expect_refused EINVAL mount "name=x,Bad-Key=1,$S" "malformed key"
expect_refused EINVAL mount "name=x,durability=sometimes,$S"
expect_refused EINVAL mount "name=x,quota_bytes=12Q,$S"
expect_refused EINVAL mount "name=x,max_concurrent=-1,$S"
# unknown keys
expect_refused EINVAL mount "name=x,colour=blue,$S" "unknown key 'colour'"
expect_refused EINVAL unmount "ok,gently" "unknown key"
# duplicate keys
expect_refused EINVAL mount "name=x,name=y,$S" "duplicate key 'name'"
expect_refused EINVAL mount "name=x,$S,create" "duplicate key 'create'"
# missing required keys
expect_refused EINVAL mount "store=$T/s1,mountpoint=$T/m1" "missing key 'name'"
expect_refused EINVAL mount "name=x,mountpoint=$T/m1" "missing key 'store'"
expect_refused EINVAL mount "name=x,store=$T/s1" "missing key 'mountpoint'"
expect_refused EINVAL config "name=ok" "nothing to change"
# relative or non-existent paths
expect_refused EINVAL mount "name=x,store=rel/store,mountpoint=$T/m1" "absolute"
expect_refused EINVAL mount "name=x,store=$T/s1,mountpoint=m1" "absolute"
expect_refused ENOENT mount "name=x,store=$T/s1,mountpoint=$T/nowhere,create" "mount point"
expect_refused ENOENT mount "name=x,store=$T/nostore,mountpoint=$T/m1" "add create"
expect_refused ENOENT mount "name=x,store=$T/no/such/parent,mountpoint=$T/m1,create" "does not exist"
# mount point: not a directory, not empty, inside the manager
expect_refused ENOTDIR mount "name=x,store=$T/s1,mountpoint=$T/afile,create" "not a directory"
expect_refused ENOTEMPTY mount "name=x,store=$T/s1,mountpoint=$T/notempty,create" "not an empty"
expect_refused EINVAL mount "name=x,store=$T/s1,mountpoint=$M/ok,create" "inside the manager"
ln -s "$M" "$T/link"
expect_refused EINVAL mount "name=x,store=$T/s1,mountpoint=$T/link/ok,create" "inside the manager"
mkdir -p "$T/mok2" && mkdir "$T/mok/sub"
expect_refused EINVAL mount "name=x,store=$T/s1,mountpoint=$T/mok/sub,create" "inside an mfs mount"
expect_refused EBUSY mount "name=x,store=$T/s1,mountpoint=$T/mok,create" "already a mount point"
# a store that is not a directory, or inside a DBFS
expect_refused ENOTDIR mount "name=x,store=$T/afile,mountpoint=$T/m1" "not a directory"
expect_refused EINVAL mount "name=x,store=$T/mok,mountpoint=$T/m1" "inside an mfs mount"
# names: '/', control characters, over 64 bytes, non-UTF-8
expect_refused EINVAL mount "name=a/b,$S" "must not contain"
expect_refused EINVAL mount "name=.hidden,$S" "must not start"
long=$(printf 'n%.0s' $(seq 65))
expect_refused EINVAL mount "name=$long,$S" "1 to 64 bytes"
expect_refused EINVAL unmount "$long" "1 to 64 bytes"
# control characters and non-UTF-8 bytes, given to setfattr in hex
hex=$(printf 'name=a\001b,%s' "$S" | od -An -tx1 | tr -d ' \n')
expect_refused EINVAL mount "0x$hex" "control characters"
hex=$(printf 'name=caf\351,%s' "$S" | od -An -tx1 | tr -d ' \n')
expect_refused EINVAL mount "0x$hex" "UTF-8"
xset mount "name=café,store=$T/s2,mountpoint=$T/m2,create" && ok "UTF-8 name accepted" \
	|| fail "UTF-8 name refused: $(xget error)"
xset unmount "café" && xset forget "café" || fail "unmount café"
# values over our limit (16 KiB) and over the kernel's (64 KiB)
big=$(head -c 20000 /dev/zero | tr '\0' a)
expect_refused E2BIG mount "name=x,opt=$big" "longer than"
huge=$(head -c 70000 /dev/zero | tr '\0' a)
if setfattr -n user.mfs.mount -v "$huge" "$M" 2>/dev/null; then
	fail "a 70000-byte value was accepted"
else
	ok "a 70000-byte value is refused (by the kernel)"
fi
# names taken, stores in use, state errors
expect_refused EEXIST mount "name=ok,store=$T/s1,mountpoint=$T/m1,create" "already mounted"
expect_refused EBUSY mount "name=y,store=$T/sok,mountpoint=$T/m1" "used by DBFS ok"
expect_refused ENOENT unmount "nosuch" "no DBFS named"
expect_refused ENOENT config "name=nosuch,iops=1" "no DBFS named"
expect_refused ENOENT forget "nosuch" "no DBFS named"
expect_refused EBUSY forget "ok" "unmount it first"
expect_refused EINVAL config "name=ok,durability=full" "cannot change while"
expect_refused EINVAL config "name=ok,create" "only be given at mount"
expect_refused EINVAL forget "ok,force" "exactly one"
expect_refused EINVAL bogus "x" "not a command attribute"
xset mount "name=down,store=$T/s1,mountpoint=$T/m1,create" && xset unmount down || fail "down"
expect_refused EINVAL unmount "down" "not mounted"

# nothing changed, everything still works
[ -e "$T/s1" ] && ok "store s1 exists (made by the accepted 'down' mount)"
after=$(xget list | grep -v "name=down" | sed "s/,bytes=.*//")
[ "$before" = "$after" ] && ok "refused commands changed nothing" || fail "list changed: $before / $after"
[ ! -e "$T/nostore" ] && [ ! -e "$T/no" ] || fail "a refused command created a store"
[ "$(cat "$T/mok/f")" = data ] && echo more >>"$T/mok/f" && ok "DBFS ok still serves" || fail "ok broken"
xget status | grep -q "^mounted=1" && ok "daemon alive" || fail "status: $(xget status)"
kill -0 $MPID || fail "daemon died"
