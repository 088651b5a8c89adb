#!/bin/sh
# git on the mount: init, add, commit, status, log, branch, gc, fsck, clone.
. "$(dirname "$0")/lib.sh"
need_prog git
fs_mount
export HOME="$T" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
cd "$MNT"
git init -q repo || die "git init failed"
cd repo
git config user.name "MFS Test"
git config user.email "test@mfs.invalid"
mkdir -p src doc
i=0
while [ $i -lt 40 ]; do
	printf 'line %d\n' $(seq 1 $i) >"src/file$i.txt"
	i=$((i + 1))
done
head -c 100000 /dev/urandom >doc/blob.bin
ln -s src/file1.txt link
git add -A || die "git add failed"
git commit -q -m "first" || die "git commit failed"
[ -z "$(git status --porcelain)" ] || die "status not clean after commit: $(git status --porcelain)"
printf 'changed\n' >>src/file3.txt
rm src/file4.txt
printf 'new\n' >src/new.txt
st=$(git status --porcelain | sort | tr '\n' ';')
[ "$st" = " D src/file4.txt; M src/file3.txt;?? src/new.txt;" ] || die "git status says: $st"
git add -A && git commit -q -m "second" || die "second commit failed"
git checkout -q -b topic || die "branch failed"
git mv src/file5.txt src/renamed.txt && git commit -q -m "rename" || die "git mv/commit failed"
git checkout -q - || die "checkout back failed"
[ -e src/file5.txt ] && [ ! -e src/renamed.txt ] || die "checkout did not restore the tree"
git merge -q --no-edit topic || die "merge failed"
[ "$(git log --oneline | wc -l)" -eq 3 ] || die "git log shows $(git log --oneline | wc -l) commits, expected 3"
[ "$(git log -1 --format=%s)" = rename ] || die "last commit is not 'rename'"
git gc -q || die "git gc failed"
git fsck --full --strict >/dev/null 2>&1 || die "git fsck failed"
[ -z "$(git status --porcelain)" ] || die "status not clean at the end"
cd "$MNT"
git clone -q repo clone || die "local clone failed"
[ "$(git -C clone rev-parse HEAD)" = "$(git -C repo rev-parse HEAD)" ] || die "clone HEAD differs"
diff -r -x .git repo clone >&2 || die "clone's work tree differs"
cmp repo/doc/blob.bin clone/doc/blob.bin || die "binary file differs in the clone"
# After an unmount and a new mount the repositories are still sound.
head=$(git -C repo rev-parse HEAD)
fs_remount
cd "$MNT"
git -C repo fsck --full --strict >/dev/null 2>&1 || die "git fsck failed after remount"
[ "$(git -C repo rev-parse HEAD)" = "$head" ] || die "HEAD changed across remount"
[ -z "$(git -C repo status --porcelain)" ] || die "status not clean after remount"
git -C clone fsck --full >/dev/null 2>&1 || die "clone fsck failed after remount"
log "ok - git"
