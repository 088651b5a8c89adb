#!/bin/sh
# A library's files call one way, as a document of the library draws them:
# read from the archive's objects (nm), every call from one listed file to
# another listed file must go to a file on a row below the caller's, so no
# two files call each other, directly or round a circle, and the files at
# the bottom call nothing above them. Prints each call that does not.
#
# Usage: layering.sh LIB.a DOC table|comment
#   table    DOC is a markdown table with one `file.c` per row
#            (queue/README.md "Files"); every object of LIB must be listed.
#   comment  DOC's comment lines " *   a.c [b.c ...]  text" are the rows,
#            top to bottom (mfs/control.h, mfs/uring_private.h); files of
#            LIB not listed are not checked.
#   bottom   DOC is a list of files ("clock.c errors.c"): the library's low
#            helpers, which must call no other file of LIB at all.
set -eu
lib=$1
doc=$2
mode=$3
# every call from one object of LIB to another: "caller callee symbol";
# then every object, as "object - -"
calls() {
	nm -A "$lib" | awk '
	{
		split($1, p, ":"); f = p[2]; sub(/.*\//, "", f); sub(/\.o$/, "", f)
		obj[f] = 1
		if ($2 == "U") use[f, $3] = 1
		else if ($2 ~ /^[TDBRV]$/) def[$3] = f
	}
	END {
		for (k in use) {
			split(k, a, SUBSEP); to = def[a[2]]
			if (to != "" && to != a[1]) print a[1], to, a[2]
		}
		for (f in obj) print f, "-", "-"
	}'
}
case $mode in
table) rows=$(sed -n 's/^| `\([a-z_]*\.c\)` |.*/\1/p' "$doc") ;;
comment) rows=$(awk '/^ \*   [a-z_]+\.c/ {
		row = ""; for (i = 2; i <= NF; i++) if ($i ~ /^[a-z_]+\.c$/) row = row " " $i
		print substr(row, 2) }' "$doc") ;;
bottom) rows=$(echo "$doc" | tr ' ' '\n' | sed '/^$/d')
	calls | awk -v rows="$rows" '
	BEGIN { n = split(rows, r, "\n"); for (i = 1; i <= n; i++) low[r[i]] = 1 }
	$2 == "-" { found[$1] = 1; next }
	$1 in low { printf "%s calls %s (%s): a low helper calls no other file\n", $1, $2, $3; bad = 1 }
	END {
		for (k in low) if (!found[k]) { printf "%s: no such object in the library\n", k; bad = 1 }
		exit bad
	}'
	echo "low helpers call no other file: $(echo "$rows" | wc -l) files"
	exit 0 ;;
*) echo "layering.sh: mode must be table, comment or bottom" >&2; exit 2 ;;
esac
[ -n "$rows" ] || { echo "no rows of files in $doc"; exit 1; }
calls | awk -v rows="$rows" '
BEGIN {
	n = split(rows, r, "\n")
	for (i = 1; i <= n; i++) { m = split(r[i], w, " "); for (j = 1; j <= m; j++) pos[w[j]] = i }
}
$2 == "-" { next }
!($1 in pos) || !($2 in pos) { next }
pos[$2] <= pos[$1] { printf "%s calls %s (%s), on its row or above it\n", $1, $2, $3; bad = 1 }
END { exit bad }'
if [ "$mode" = table ]; then # every source file of the library is in the table
	for o in $(nm -A "$lib" | sed -n 's/^[^:]*:\([^:]*\.o\):.*/\1/p' | sort -u); do
		f=$(basename "$o" .o)
		echo "$rows" | grep -qx "$f" || { echo "$f: not in the table of $doc"; exit 1; }
	done
fi
echo "files call one way: $(echo "$rows" | wc -l) rows of $doc"
