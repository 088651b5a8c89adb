# shared_model.py SEED STEPS MOUNT MOUNT [MOUNT...]: a randomized workload
# through the mount points of several mfs processes serving one shared
# store (issue 21), checked against an in-memory model.
#
# Each step picks an operation and the process (mount) that issues it:
# create, overwrite, pwrite, append, truncate, rename (also over a file),
# unlink, chmod, or a read or stat through a random mount. A step that
# changes the store ends with a close through the mount that changed it
# (the file it wrote, or a marker file after a truncate, rename, unlink or
# chmod). After a step that changed data or took a name away (a write, a
# size, a rename, an unlink) every mount must show the change at once
# (close-to-open, mfs.8 SHARED STORES): each name it touched is then
# checked through every mount (present or not, size, mode, every byte)
# with no retry. A new name alone (an empty create) or a chmod is seen
# within the notifiers' lag: its checks are repeated until they hold, for
# at most SETTLE_S. Every 25 steps and at the end the whole tree is compared
# through every mount.
#
# The same seed gives the same operations. Exit 0: every check held; 3: a
# mount disagreed with the model (the step, the operations before it and
# the seed are printed); 2: a usage error or an unexpected failure.
import errno
import os
import random
import stat
import sys
import time

DIRS = ["", "d0", "d1", "d2"]
MODES = [0o600, 0o640, 0o644, 0o755]
FULL_EVERY = 25
SETTLE_S = 5.0


class Mismatch(Exception):
    pass


def main():
    if len(sys.argv) < 5:
        print("usage: shared_model.py SEED STEPS MOUNT MOUNT [MOUNT...]", file=sys.stderr)
        return 2
    seed = int(sys.argv[1])
    steps = int(sys.argv[2])
    mounts = sys.argv[3:]
    print(f"seed={seed} steps={steps} mounts={len(mounts)}", flush=True)
    m = Model(seed, [os.path.join(x, "model") for x in mounts])
    try:
        m.setup()
        for i in range(1, steps + 1):
            m.step(i)
            if i % FULL_EVERY == 0 or i == steps:
                m.check_all_settled(i)
    except (Mismatch, OSError) as e:
        # an errno where the model expected success is a disagreement too
        if isinstance(e, OSError):
            import traceback
            where = traceback.extract_tb(e.__traceback__)[-1]
            e = f"unexpected {errno.errorcode.get(e.errno, e.errno)} in {where.name}: {e}"
        print(f"MISMATCH at step {m.stepno} (seed {seed}): {e}", file=sys.stderr)
        print("the last operations:", file=sys.stderr)
        for line in m.history[-25:]:
            print("  " + line, file=sys.stderr)
        return 3
    counts = " ".join(f"{k}={v}" for k, v in sorted(m.counts.items()))
    print(f"ok: {steps} steps, {m.checks} checks through {len(mounts)} mounts ({counts}); "
          f"longest wait for a name change: {m.settle_max * 1000:.1f} ms")
    return 0


class Model:
    def __init__(self, seed, roots):
        self.rnd = random.Random(seed)
        self.roots = roots
        self.files = {}  # relative path -> [bytearray content, mode]
        self.serial = 0
        self.history = []
        self.stepno = 0
        self.checks = 0
        self.counts = {}
        self.settle_max = 0.0
        self.settle = False  # set by a step that changed only names or attributes

    # ---- helpers ----
    def path(self, p, rel):
        return os.path.join(self.roots[p], rel)

    def sync(self, p):
        """The close-to-open step: a close through mount p."""
        fd = os.open(self.path(p, ".sync"), os.O_RDONLY)
        os.close(fd)

    def data(self, n):
        return bytearray(self.rnd.getrandbits(8) for _ in range(n)) if n < 64 else \
            bytearray(self.rnd.randbytes(n))

    def new_name(self):
        self.serial += 1
        return os.path.join(self.rnd.choice(DIRS), f"f{self.serial}")

    def pick_file(self):
        return self.rnd.choice(sorted(self.files)) if self.files else None

    def log(self, p, what):
        self.history.append(f"{self.stepno}: mount {p}: {what}")

    # ---- setup ----
    def setup(self):
        os.mkdir(self.roots[0])
        for d in DIRS[1:]:
            os.mkdir(os.path.join(self.roots[0], d))
        fd = os.open(self.path(0, ".sync"), os.O_CREAT | os.O_WRONLY, 0o644)
        os.close(fd)  # its close carries the mkdirs to the others
        for p in range(len(self.roots)):
            for d in DIRS:
                if not os.path.isdir(self.path(p, d)):
                    raise Mismatch(f"mount {p}: directory '{d}' missing after setup")

    # ---- one step ----
    def step(self, i):
        self.stepno = i
        ops = [("create", 15), ("overwrite", 10), ("pwrite", 10), ("append", 8),
               ("truncate", 5), ("rename", 12), ("unlink", 8), ("chmod", 5),
               ("read", 15), ("stat", 10)]
        op = self.rnd.choices([o for o, _ in ops], [w for _, w in ops])[0]
        if op not in ("create",) and not self.files:
            op = "create"
        self.counts[op] = self.counts.get(op, 0) + 1
        p = self.rnd.randrange(len(self.roots))
        self.settle = False
        touched = getattr(self, "op_" + op)(p)
        t0 = time.monotonic()
        while True:
            try:
                for rel in touched:
                    self.check_name(rel)
                break
            except Mismatch:
                if not self.settle or time.monotonic() - t0 > SETTLE_S:
                    raise
                time.sleep(0.001)
        self.settle_max = max(self.settle_max, time.monotonic() - t0 if self.settle else 0)

    def op_create(self, p):
        rel = self.new_name()
        body = self.data(self.rnd.choice([0, 1, 100, 4096, 5000, 13000]))
        mode = self.rnd.choice(MODES)
        fd = os.open(self.path(p, rel), os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
        os.write(fd, body)
        os.close(fd)
        os.chmod(self.path(p, rel), mode)  # not masked by the umask
        self.sync(p)
        self.files[rel] = [body, mode]
        self.settle = not body
        self.log(p, f"create {rel} {len(body)} bytes mode {mode:o}")
        return [rel]

    def op_overwrite(self, p):
        rel = self.pick_file()
        body = self.data(self.rnd.choice([0, 7, 4096, 6000, 20000]))
        fd = os.open(self.path(p, rel), os.O_WRONLY | os.O_TRUNC)
        os.write(fd, body)
        os.close(fd)
        self.files[rel][0] = body
        self.log(p, f"overwrite {rel} {len(body)} bytes")
        return [rel]

    def op_pwrite(self, p):
        rel = self.pick_file()
        cur = self.files[rel][0]
        off = self.rnd.randrange(len(cur) + 5000)
        body = self.data(self.rnd.randrange(1, 9000))
        fd = os.open(self.path(p, rel), os.O_WRONLY)
        os.pwrite(fd, body, off)
        os.close(fd)
        if off > len(cur):
            cur.extend(bytes(off - len(cur)))
        cur[off:off + len(body)] = body
        self.log(p, f"pwrite {rel} {len(body)} bytes at {off}")
        return [rel]

    def op_append(self, p):
        rel = self.pick_file()
        body = self.data(self.rnd.randrange(1, 3000))
        fd = os.open(self.path(p, rel), os.O_WRONLY | os.O_APPEND)
        os.write(fd, body)
        os.close(fd)
        self.files[rel][0].extend(body)
        self.log(p, f"append {rel} {len(body)} bytes")
        return [rel]

    def op_truncate(self, p):
        rel = self.pick_file()
        cur = self.files[rel][0]
        n = self.rnd.randrange(len(cur) + 3000)
        os.truncate(self.path(p, rel), n)
        self.sync(p)
        if n < len(cur):
            del cur[n:]
        else:
            cur.extend(bytes(n - len(cur)))
        self.log(p, f"truncate {rel} to {n}")
        return [rel]

    def op_rename(self, p):
        rel = self.pick_file()
        if len(self.files) > 1 and self.rnd.random() < 0.3:
            to = self.rnd.choice([f for f in sorted(self.files) if f != rel])
        else:
            to = self.new_name()
        os.rename(self.path(p, rel), self.path(p, to))
        self.sync(p)
        self.files[to] = self.files.pop(rel)
        self.log(p, f"rename {rel} -> {to}")
        return [rel, to]

    def op_unlink(self, p):
        rel = self.pick_file()
        os.unlink(self.path(p, rel))
        self.sync(p)
        del self.files[rel]
        self.log(p, f"unlink {rel}")
        return [rel]

    def op_chmod(self, p):
        rel = self.pick_file()
        mode = self.rnd.choice(MODES)
        os.chmod(self.path(p, rel), mode)
        self.sync(p)
        self.files[rel][1] = mode
        self.settle = True
        self.log(p, f"chmod {rel} {mode:o}")
        return [rel]

    def op_read(self, p):
        rel = self.pick_file()
        self.log(p, f"read {rel}")
        self.check_file(p, rel)
        return []

    def op_stat(self, p):
        # a name that exists, or one that was used and is gone
        rel = self.pick_file() if self.rnd.random() < 0.7 else \
            os.path.join(self.rnd.choice(DIRS), f"f{self.rnd.randrange(1, self.serial + 1)}")
        self.log(p, f"stat {rel}")
        self.check_stat(p, rel)
        return []

    # ---- checks ----
    def check_stat(self, p, rel):
        self.checks += 1
        try:
            st = os.stat(self.path(p, rel))
        except FileNotFoundError:
            if rel in self.files:
                raise Mismatch(f"mount {p}: {rel}: ENOENT, the model has it")
            return None
        if rel not in self.files:
            raise Mismatch(f"mount {p}: {rel} exists (size {st.st_size}), the model removed it")
        body, mode = self.files[rel]
        if st.st_size != len(body):
            raise Mismatch(f"mount {p}: {rel}: size {st.st_size}, the model's {len(body)}")
        if stat.S_IMODE(st.st_mode) != mode:
            raise Mismatch(f"mount {p}: {rel}: mode {stat.S_IMODE(st.st_mode):o}, the model's {mode:o}")
        return st

    def check_file(self, p, rel):
        if self.check_stat(p, rel) is None:
            return
        self.checks += 1
        fd = os.open(self.path(p, rel), os.O_RDONLY)
        try:
            got = bytearray()
            while True:
                b = os.read(fd, 1 << 20)
                if not b:
                    break
                got.extend(b)
        finally:
            os.close(fd)
        want = self.files[rel][0]
        if got != want:
            at = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
                      min(len(got), len(want)))
            raise Mismatch(f"mount {p}: {rel}: read {len(got)} bytes, the model has "
                           f"{len(want)}; first difference at byte {at}")

    def check_name(self, rel):
        for p in range(len(self.roots)):
            self.check_file(p, rel)

    def check_all_settled(self, i):
        """check_all, repeated for at most SETTLE_S after a name step (a
        directory's listing is dropped just after its entry)."""
        t0 = time.monotonic()
        while True:
            try:
                return self.check_all(i)
            except Mismatch:
                if not self.settle or time.monotonic() - t0 > SETTLE_S:
                    raise
                time.sleep(0.001)

    def check_all(self, i):
        for p in range(len(self.roots)):
            seen = set()
            for d in DIRS:
                for n in os.listdir(self.path(p, d)):
                    full = os.path.join(d, n)
                    if d == "" and (n in DIRS or n == ".sync"):
                        continue
                    seen.add(full)
            want = set(self.files)
            if seen != want:
                extra = sorted(seen - want)[:5]
                missing = sorted(want - seen)[:5]
                raise Mismatch(f"mount {p}: listing after step {i}: extra {extra} missing {missing}")
            for rel in sorted(want):
                self.check_file(p, rel)


if __name__ == "__main__":
    sys.exit(main())
