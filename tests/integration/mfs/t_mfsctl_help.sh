#!/bin/sh
# mfsctl --help: for mfsctl and for each command it lists, on standard output,
# exit 0, without a manager; the exit codes are documented in --help and in
# mfsctl(8) as the script uses them.
. "$(dirname "$0")/lib.sh"

[ -f "$MFSCTL" ] || { echo "SKIP: no mfsctl at $MFSCTL"; exit 77; }
MAN=$(dirname "$MFSCTL")/mfsctl.8
[ -f "$MAN" ] || MAN=$(cd "$(dirname "$0")/../../.." && pwd)/tools/mfsctl/mfsctl.8
# no manager anywhere: help must not look for one
ctl() { MFS_MANAGER=$T/nowhere sh "$MFSCTL" "$@"; }

ctl --help >"$T/help" 2>"$T/err" && [ ! -s "$T/err" ] && grep -q "^usage: mfsctl" "$T/help" &&
	ok "mfsctl --help" || fail "mfsctl --help: $(cat "$T/err")"
cmds=$(sed -n '/^Commands:/,/^[^ ]/s/^  \([a-z][a-z]*\) .*/\1/p; /^Commands:/,/^[^ ]/s/^  \([a-z][a-z]*\)$/\1/p' "$T/help")
[ "$(echo $cmds | wc -w)" -ge 8 ] || fail "commands in --help: '$cmds'"
for c in $cmds; do
	for form in "$c --help" "$c -h" "--help $c" "help $c"; do
		# shellcheck disable=SC2086
		ctl $form >"$T/out" 2>"$T/err"
		rc=$?
		if [ $rc != 0 ] || [ -s "$T/err" ] || ! grep -q "^usage: mfsctl .*$c" "$T/out"; then
			fail "mfsctl $form: exit $rc, $(head -2 "$T/out") $(cat "$T/err")"
		fi
	done
	grep -q "^Exit status: 0 " "$T/out" || fail "$c --help does not give the exit codes"
	grep -q "^\.B $c\( \|$\)" "$MAN" || fail "mfsctl(8) does not describe $c"
done
ok "--help, -h and help for each of: $(echo $cmds)"
ctl unmount --help | grep -q -- "-f, --force" && ok "unmount --help lists --force" ||
	fail "unmount --help: $(ctl unmount --help)"
# a command's own text, whichever way its help is asked for
for form in "unmount --help" "-h unmount" "help unmount"; do
	# shellcheck disable=SC2086
	ctl $form | grep -q "busy (refused) unless --force" || fail "mfsctl $form lacks unmount's text"
done
ctl mount --help | grep -q "durability=full|normal|none" && ok "mount --help describes its options" ||
	fail "mount --help: $(ctl mount --help)"
ctl list --help | grep -q -- "-p, --parsable" && ok "command help lists the global options" ||
	fail "list --help"
ctl help frob >/dev/null 2>&1; [ $? = 2 ] && ok "help of an unknown command: exit 2" || fail "help frob"

# every exit code the script uses is documented, in --help and the man page
codes=$(sed -n 's/^EX_[A-Z]*=\([0-9]\).*/\1/p' "$MFSCTL" | sort -u)
[ -n "$codes" ] || fail "no EX_ codes in $MFSCTL"
for code in 0 $codes; do
	tr '\n' ' ' <"$T/help" | grep -q "[:;] $code " || fail "--help does not document exit $code"
	sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$MAN" | grep -q "^\.B $code$" ||
		fail "mfsctl(8) does not document exit $code"
done
ok "exit codes 0 $(echo $codes) in --help and mfsctl(8)"
