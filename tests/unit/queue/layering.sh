#!/bin/sh
# The queue library's files call one way (queue/README.md, "Files"): read
# from the archive's objects (nm), every call from one file of the library
# to another must go to a file listed below it in that table, so no two
# files call each other, directly or round a circle, and the low helpers at
# the bottom call nothing above them. Prints each call that does not.
# Usage: layering.sh LIBMFSQ.a queue/README.md
set -eu
lib=$1
readme=$2
order=$(sed -n 's/^| `\([a-z_]*\.c\)` |.*/\1/p' "$readme")
[ -n "$order" ] || { echo "no file table in $readme"; exit 1; }
nm -A "$lib" | awk -v order="$order" '
BEGIN { n = split(order, o, "\n"); for (i = 1; i <= n; i++) pos[o[i]] = i }
{
	split($1, p, ":"); f = p[2]; sub(/.*\//, "", f); sub(/\.o$/, "", f)
	if ($2 == "U") { use[f, $3] = 1; next }
	else if ($2 ~ /^[TDBR]$/) def[$3] = f
}
END {
	bad = 0
	for (k in use) {
		split(k, a, SUBSEP); to = def[a[2]]
		if (to == "" || to == a[1]) continue
		if (!(a[1] in pos) || !(to in pos)) {
			printf "%s or %s: not in the README table\n", a[1], to; bad = 1; continue
		}
		if (pos[to] <= pos[a[1]]) {
			printf "%s calls %s (%s), listed above it\n", a[1], to, a[2]; bad = 1
		}
	}
	exit bad
}'
# every source file of the library is in the table
for o in $(nm -A "$lib" | sed -n 's/^[^:]*:\([^:]*\.o\):.*/\1/p' | sort -u); do
	f=$(basename "$o" .o)
	echo "$order" | grep -qx "$f" || { echo "$f: not in the README table"; exit 1; }
done
echo "queue files call one way: $(echo "$order" | wc -l) files"
