#!/bin/sh
# getfattr asks for an attribute's size, then for its value: the manager
# keeps the first call's text for the second of the same caller, also when
# seconds pass between them (a loaded machine: the manager's threads wait
# for a CPU) and the text grows meanwhile. Here user.mfs.list gains a line
# between the two calls, 3 s apart: the second still gets the first text,
# whole, where it used to get ERANGE (the text was kept 2 s). Another
# caller gets the text as it is now.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
M=$T/mfs
start_manager "$M"
mkdir -p "$T/a" "$T/b"
xset mount "name=a,store=$T/sa,mountpoint=$T/a,create" || fail "mount a: $(xget error)"

# the size, then (after the mount of b) the value with a buffer of that size
out=$($PY - "$M" "$T" 2>&1 <<'PYEOF'
import ctypes, os, subprocess, sys, time
libc = ctypes.CDLL("libc.so.6", use_errno=True)
m, t = sys.argv[1], sys.argv[2]
name = b"user.mfs.list"
size = libc.getxattr(m.encode(), name, None, 0)
if size <= 0:
    sys.exit("size: " + os.strerror(ctypes.get_errno()))
subprocess.run(["setfattr", "-n", "user.mfs.mount", "-v",
                "name=b,store=%s/sb,mountpoint=%s/b,create" % (t, t), m], check=True)
time.sleep(3)
buf = ctypes.create_string_buffer(size)
n = libc.getxattr(m.encode(), name, buf, size)
if n < 0:
    sys.exit("value: " + os.strerror(ctypes.get_errno()))
print(n == size, b"name=b" in buf.raw[:n])
PYEOF
)
[ "$out" = "True False" ] && ok "size then value 3 s apart: the first text, whole" ||
	fail "size then value 3 s apart: $out"
xget list | grep -q 'name=b' && ok "another caller: the text as it is now" ||
	fail "list without b: $(xget list)"
exit 0
