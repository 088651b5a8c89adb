#!/bin/sh
# Build a small C project with make on the mount, run it, then check that
# make's timestamp logic works (nothing to do; one touched file rebuilds).
. "$(dirname "$0")/lib.sh"
need_prog make cc
fs_mount
P="$MNT/proj"
mkdir -p "$P/src"
i=1
: >"$P/src/funcs.h"
while [ $i -le 20 ]; do
	printf 'int f%d(void);\n' $i >>"$P/src/funcs.h"
	printf '#include "funcs.h"\nint f%d(void) { return %d * %d; }\n' $i $i $i >"$P/src/f$i.c"
	i=$((i + 1))
done
{
	printf '#include <stdio.h>\n#include "funcs.h"\nint main(void) {\n\tint s = 0;\n'
	i=1
	while [ $i -le 20 ]; do
		printf '\ts += f%d();\n' $i
		i=$((i + 1))
	done
	printf '\tprintf("sum=%%d\\n", s);\n\treturn 0;\n}\n'
} >"$P/src/main.c"
cat >"$P/Makefile" <<'MK'
SRCS := $(wildcard src/*.c)
OBJS := $(patsubst src/%.c,build/%.o,$(SRCS))
prog: $(OBJS)
	$(CC) -o $@ $^
build/%.o: src/%.c src/funcs.h | build
	$(CC) -O1 -c -o $@ $<
build:
	mkdir -p build
MK
make -C "$P" -j2 >"$OUT/make1.log" 2>&1 || { cat "$OUT/make1.log" >&2; die "make failed"; }
out=$("$P/prog") || die "the built program failed"
[ "$out" = "sum=2870" ] || die "the program printed '$out', expected sum=2870" # sum of i*i, 1..20
make -C "$P" -q || die "make -q: not up to date right after a build"
# Move every file into the past, then touch one source: only it and prog
# must rebuild.
touch -d @1600000000 "$P"/src/* "$P/Makefile"
touch -d @1600000100 "$P"/build/*.o
touch -d @1600000200 "$P/prog"
make -C "$P" -q || die "make -q: not up to date after moving times into the past"
touch "$P/src/f7.c"
make -C "$P" >"$OUT/make2.log" 2>&1 || die "incremental make failed"
n=$(grep -c -- '-c -o' "$OUT/make2.log")
[ "$n" -eq 1 ] || { cat "$OUT/make2.log" >&2; die "incremental make compiled $n files, expected 1"; }
make -C "$P" -q || die "make -q: not up to date after the incremental build"
"$P/prog" >/dev/null || die "the rebuilt program failed"
make -C "$P" -s clean 2>/dev/null || true
log "ok - make"
