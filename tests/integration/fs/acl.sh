#!/bin/sh
# POSIX ACLs: setfacl/getfacl store them, the kernel enforces them for
# another uid, chmod changes the mask, default ACLs are inherited.
. "$(dirname "$0")/lib.sh"
need_root
need_prog setfacl getfacl setpriv
fs_mount
cd "$MNT"
mkdir pub && chmod 0777 pub

# A named-user entry grants what "other" does not.
printf 'secret\n' >f && chmod 0640 f
as_nobody cat f >/dev/null 2>&1 && die "nobody can read a 0640 root file without an ACL"
setfacl -m u:65534:r f || die "setfacl failed"
getfacl -p f | grep -qx 'user:nobody:r--' || die "getfacl does not show user:nobody:r--"
getfacl -p f | grep -qx 'mask::r--' || die "getfacl does not show mask::r--"
[ "$(as_nobody cat f)" = secret ] || die "ACL u:nobody:r does not let nobody read"
must_fail as_nobody sh -c 'echo x >>f'
# The mode's group bits show the mask.
[ "$(stat -c %a f)" = 640 ] || die "mode is $(stat -c %a f) with mask r--, expected 640"
# chmod sets the mask: g-r masks the named entry.
chmod g-r f
getfacl -p f | grep -q 'user:nobody:r--.*#effective:---' || die "chmod g-r did not mask the entry"
must_fail as_nobody cat f
chmod g+r f
setfacl -m u:65534:rw f
as_nobody sh -c 'echo appended >>f' || die "ACL u:nobody:rw does not let nobody write"
# A named entry that denies, although "other" allows.
printf 'open\n' >g && chmod 0644 g
as_nobody cat g >/dev/null || die "nobody cannot read a 0644 file"
setfacl -m u:65534:--- g
must_fail as_nobody cat g
# A named group entry.
printf 'grp\n' >h && chmod 0600 h
setfacl -m g:65534:r h
[ "$(as_nobody cat h)" = grp ] || die "ACL g:65534:r does not let group 65534 read"
# Removing ACLs.
setfacl -b g
as_nobody cat g >/dev/null || die "setfacl -b did not restore the mode's permissions"
getfacl -p g | grep -q '^user:nobody' && die "setfacl -b left the entry"
# Directory search/write through an ACL.
mkdir d && chmod 0700 d && printf 'in d\n' >d/file && chmod 0644 d/file
must_fail as_nobody cat d/file
setfacl -m u:65534:x d
[ "$(as_nobody cat d/file)" = "in d" ] || die "ACL u:nobody:x on a dir does not allow lookup"
must_fail as_nobody ls d
must_fail as_nobody touch d/new
setfacl -m u:65534:rwx d
as_nobody touch d/new || die "ACL u:nobody:rwx on a dir does not allow create"

# Default ACLs are inherited; the umask is not applied where one exists.
mkdir inh
setfacl -d -m u:65534:rwx,g::r-x,o::- inh
(umask 077 && touch inh/file && mkdir inh/sub) || die "create in inh failed"
getfacl -p inh/file | grep -q '^user:nobody:rwx' || die "new file did not inherit user:nobody"
getfacl -p inh/sub | grep -q '^user:nobody:rwx' || die "new dir did not inherit user:nobody"
getfacl -p -d inh/sub | grep -q '^user:nobody:rwx' || die "new dir did not inherit the default ACL"
# touch creates with 0666: the mask becomes rw- (from the mode), so nobody gets rw-.
getfacl -p inh/file | grep -q '^mask::rw-' || die "inherited mask is not rw-: $(getfacl -p inh/file | grep mask)"
[ "$(stat -c %a inh/file)" = 660 ] || die "inh/file mode $(stat -c %a inh/file), expected 660 (umask ignored)"
as_nobody sh -c 'echo w >inh/file' || die "nobody cannot write inh/file through the inherited ACL"
# Removing the default ACL: the umask applies again, nothing is inherited.
setfacl -k inh
getfacl -p -d --omit-header inh | grep -q . && die "setfacl -k left a default ACL"
(umask 027 && touch inh/plain) || die "create after setfacl -k failed"
[ "$(stat -c %a inh/plain)" = 640 ] || die "inh/plain mode $(stat -c %a inh/plain), expected 640 (umask 027)"
getfacl -p inh/plain | grep -q '^user:nobody' && die "inh/plain inherited an ACL after setfacl -k"
# chmod keeps named entries (only the mask changes).
chmod 0700 f
getfacl -p f | grep -q '^user:nobody:rw-' || die "chmod dropped the named entry"
chmod 0660 f
[ "$(as_nobody cat f | head -1)" = secret ] || die "named entry not effective again after chmod g+rw"
# Raw xattrs are there too.
getfattr -n system.posix_acl_access f >/dev/null 2>&1 || die "system.posix_acl_access missing"
getfattr -n system.posix_acl_default inh/sub >/dev/null 2>&1 || die "system.posix_acl_default missing"

# ACLs survive a remount (no-op on tmpfs).
before=$(acl_manifest "$MNT")
fs_remount
cd "$MNT"
[ "$(acl_manifest "$MNT")" = "$before" ] || die "ACLs changed across remount"
[ "$(as_nobody cat h)" = grp ] || die "ACL not enforced after remount"
log "ok - POSIX ACLs"
