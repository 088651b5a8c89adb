#!/bin/sh
# Cache memory limits: a DBFS's files may hold at most mem= bytes of the
# kernel's page cache (resident pages measured with fincore, i.e. mincore);
# the limit changes live with config, shows in stats, and the manager's own
# mem= shares a budget between DBFSs. No timing: bounded waits on conditions.
. "$(dirname "$0")/lib.sh"

command -v fincore >/dev/null || { echo "skip: no fincore (util-linux)"; exit 77; }

M=$T/mfs
start_manager "$M" mem=48M
mkdir -p "$T/ma" "$T/mb"
xset mount "name=a,store=$T/sa,mountpoint=$T/ma,create,mem=8M" || fail "mount a: $(xget error)"
xset mount "name=b,store=$T/sb,mountpoint=$T/mb,create" || fail "mount b: $(xget error)"
stat_of() { xget "stats.$1" | sed -n "s/^$2=//p"; }
resident() { # bytes of the files' pages in the kernel cache
	fincore -b -n -o RES "$@" | awk '{ s += $1 } END { print s + 0 }'
}
under() { [ "$(resident "$@")" -le "$LIMIT" ]; }

# a: 6 files of 4 MiB, written and read back: 24 MiB went through the cache
i=0
while [ $i -lt 6 ]; do
	dd if=/dev/urandom of="$T/src$i" bs=1M count=4 status=none || fail "make src$i"
	cp "$T/src$i" "$T/ma/f$i" || fail "write a/f$i"
	cat "$T/ma/f$i" >/dev/null
	i=$((i + 1))
done
[ "$(stat_of a cache_limit)" = 8388608 ] && ok "a's limit is its own mem= (8M)" \
	|| fail "a cache_limit $(stat_of a cache_limit)"
LIMIT=8388608
wait_for 10 under "$T"/ma/f* && ok "a holds at most 8M in the kernel cache ($(resident "$T"/ma/f*))" \
	|| fail "a caches $(resident "$T"/ma/f*) bytes"
[ "$(stat_of a cache_trimmed)" -gt 0 ] && ok "a trimmed $(stat_of a cache_trimmed) bytes" \
	|| fail "cache_trimmed $(stat_of a cache_trimmed)"
i=0
while [ $i -lt 6 ]; do cmp -s "$T/src$i" "$T/ma/f$i" || fail "a/f$i differs"; i=$((i + 1)); done
ok "a's files read back intact after trimming"

# b: no mem= of its own, so an equal share of the manager's 48M (24M), or,
# while the governor splits by activity (mfs.8), all that a's 8M leaves (40M)
case "$(stat_of b cache_limit)" in
25165824 | 41943040) ok "b's limit is its share of the manager's mem= ($(stat_of b cache_limit))" ;;
*) fail "b cache_limit $(stat_of b cache_limit)" ;;
esac
dd if=/dev/urandom of="$T/mb/big" bs=1M count=16 status=none || fail "write b"
cat "$T/mb/big" >/dev/null
[ "$(resident "$T/mb/big")" -gt 8388608 ] && ok "b keeps more than a's limit ($(resident "$T/mb/big"))" \
	|| fail "b resident $(resident "$T/mb/big")"

# listings count too (the kernel's readdir cache); b is far below its limit,
# so no trim runs meanwhile
mkdir "$T/mb/d" && (cd "$T/mb/d" && seq 1 1000 | xargs touch) || fail "make b/d"
c0=$(stat_of b cache_bytes)
ls "$T/mb/d" >/dev/null || fail "ls b/d"
[ "$(stat_of b cache_bytes)" -gt $((c0 + 8000)) ] && ok "b readdir of 1000 names counted" \
	|| fail "cache_bytes $c0 -> $(stat_of b cache_bytes) after ls"

# live: lower b's limit to 4M
xset config "name=b,mem=4M" || fail "config b mem"
[ "$(stat_of b cache_limit)" = 4194304 ] && ok "config mem= live" || fail "b limit $(stat_of b cache_limit)"
LIMIT=4194304
wait_for 10 under "$T/mb/big" && ok "b trimmed to 4M after config" \
	|| fail "b caches $(resident "$T/mb/big")"

# unmounting a gives b the whole budget share (48M) when its own limit goes
xset config "name=b,mem=0" || fail "config b mem=0"
xset unmount "name=a" || fail "unmount a: $(cat "$T/xset.err") $(xget error)"
[ "$(stat_of b cache_limit)" = 50331648 ] && ok "b's share grows to 48M with a unmounted" \
	|| fail "b limit $(stat_of b cache_limit)"
expect_refused EINVAL config "name=b,mem=lots" "mem"
