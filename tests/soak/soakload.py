#!/usr/bin/python3
"""Workloads of the soak test (tests/soak/soak.sh), one kind per process.

    soakload.py KIND DIR T NAME SEED     run KIND in DIR until killed
    soakload.py verify MANIFEST DIR      check a durable manifest (exit 1 on a mismatch)
    soakload.py analyse SAMPLES          the flatness verdict of the resource samples

Every workload counts its operations in T/ops/NAME.KIND.PID ("kind count" lines,
rewritten after each round). An error goes to T/errors, one line, unless the
soak script said the mount was disrupted on purpose (T/dis/NAME or T/dis/ALL
exists: a SIGKILL of mfs or a forced unmount): then the workload exits 3
quietly. Data read back that differs from what was written is always an error.
"""
import errno
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time

KIND, DIR, T, NAME = "", "", "", ""
OPS = {}
OPS_FILE = ""
LAST_FLUSH = 0.0


def disrupted():
    return os.path.exists(os.path.join(T, "dis", NAME)) or os.path.exists(
        os.path.join(T, "dis", "ALL"))


def record_error(msg):
    line = "%s %s %s/%s: %s\n" % (time.strftime("%H:%M:%S"), NAME, KIND, os.getpid(), msg)
    fd = os.open(os.path.join(T, "errors"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, line.encode())
    os.close(fd)
    sys.stderr.write(line)


def flush_ops(force=False):
    global LAST_FLUSH
    now = time.monotonic()
    if not force and now - LAST_FLUSH < 2:
        return
    LAST_FLUSH = now
    tmp = OPS_FILE + ".tmp"
    with open(tmp, "w") as f:
        for k, v in sorted(OPS.items()):
            f.write("%s %d\n" % (k, v))
    os.rename(tmp, OPS_FILE)


def count(kind, n=1):
    OPS[kind] = OPS.get(kind, 0) + n


class Mismatch(Exception):
    pass


def pace(rng, lo=0.02, hi=0.2):
    """Moderate load: the machine is shared."""
    time.sleep(rng.uniform(lo, hi))


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---- workloads: each is a generator of rounds; a round ends with a yield ----

def w_churn(d, rng):
    """Small files created, read, unlinked."""
    while True:
        n = rng.randint(50, 200)
        payloads = {}
        for i in range(n):
            p = os.path.join(d, "f%d" % i)
            data = rng.randbytes(rng.randint(0, 8192))
            with open(p, "wb") as f:
                f.write(data)
            payloads[p] = hashlib.sha1(data).digest()
            count("create")
        for p, h in rng.sample(sorted(payloads.items()), min(20, n)):
            with open(p, "rb") as f:
                if hashlib.sha1(f.read()).digest() != h:
                    raise Mismatch("%s: content differs from what was written" % p)
            count("read_check")
        if sorted(os.listdir(d)) != sorted(os.path.basename(p) for p in payloads):
            raise Mismatch("%s: listing differs from the files created" % d)
        for p in payloads:
            os.unlink(p)
            count("unlink")
        yield


def w_bigseq(d, rng):
    """Big sequential writes (1 MiB), fsync, read back with a checksum."""
    while True:
        mib = rng.randint(16, 64)
        p = os.path.join(d, "big")
        h = hashlib.sha256()
        with open(p, "wb") as f:
            block = rng.randbytes(1 << 20)
            for i in range(mib):
                b = bytes([i & 0xff]) + block[1:]
                f.write(b)
                h.update(b)
                count("seq_write_mib")
            f.flush()
            os.fsync(f.fileno())
            count("fsync")
        pace(rng, 0.2, 1.0)
        h2 = hashlib.sha256()
        with open(p, "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                h2.update(b)
                count("seq_read_mib")
        if h.digest() != h2.digest():
            raise Mismatch("%s: sha256 of %d MiB read back differs" % (p, mib))
        count("seq_verify")
        os.unlink(p)
        yield


def w_rand4k(d, rng):
    """Random 4 KiB writes with an fsync every few, checked against a model."""
    size = 16 << 20
    p = os.path.join(d, "rand")
    model = bytearray(size)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        while True:
            for _ in range(rng.randint(64, 256)):
                off = rng.randrange(size // 4096) * 4096
                b = rng.randbytes(4096)
                os.pwrite(fd, b, off)
                model[off:off + 4096] = b
                count("rand_write_4k")
                if rng.random() < 0.1:
                    os.fsync(fd)
                    count("fsync")
            os.fsync(fd)
            count("fsync")
            for _ in range(32):
                off = rng.randrange(size // 4096) * 4096
                if os.pread(fd, 4096, off) != model[off:off + 4096]:
                    raise Mismatch("%s: 4 KiB at %d differs from what was written" % (p, off))
                count("rand_read_4k")
            if rng.random() < 0.1:
                os.lseek(fd, 0, os.SEEK_SET)
                got = bytearray()
                while len(got) < size:
                    b = os.read(fd, 1 << 20)
                    if not b:
                        break
                    got += b
                if got != model:
                    raise Mismatch("%s: full read differs from the model" % p)
                count("rand_full_verify")
            yield
    finally:
        os.close(fd)


def w_rename(d, rng):
    """Rename storms over two directories: N files keep their contents."""
    n = 100
    dirs = [os.path.join(d, "a"), os.path.join(d, "b")]
    for x in dirs:
        os.makedirs(x, exist_ok=True)
    where = {}
    for i in range(n):
        p = os.path.join(rng.choice(dirs), "n%d.0" % i)
        with open(p, "w") as f:
            f.write("file %d\n" % i)
        where[i] = p
    gen = 0
    while True:
        gen += 1
        for _ in range(rng.randint(100, 400)):
            i = rng.randrange(n)
            new = os.path.join(rng.choice(dirs), "n%d.%d" % (i, gen))
            if new != where[i]:
                os.rename(where[i], new)
                where[i] = new
                count("rename")
        # rename over an existing file (replace), then restore it
        i, j = rng.sample(range(n), 2)
        tmp = where[j] + ".tmp"
        os.link(where[j], tmp)
        os.rename(where[i], where[j])
        os.rename(tmp, where[i])
        os.rename(where[j], where[j] + ".x")
        os.rename(where[i], where[j])
        os.rename(where[j] + ".x", where[i])
        count("rename", 5)
        count("link")
        names = sorted(os.listdir(dirs[0]) + os.listdir(dirs[1]))
        want = sorted(os.path.basename(p) for p in where.values())
        if names != want:
            raise Mismatch("%s: %d names after renames, want %d" % (d, len(names), len(want)))
        for i in rng.sample(range(n), 10):
            with open(where[i]) as f:
                if f.read() != "file %d\n" % i:
                    raise Mismatch("%s: wrong content after renames" % where[i])
        yield


def w_xattr(d, rng):
    """Extended attributes set, read, listed, removed."""
    files = []
    for i in range(20):
        p = os.path.join(d, "x%d" % i)
        open(p, "w").close()
        files.append(p)
    while True:
        model = {}
        for p in files:
            for k in range(rng.randint(1, 8)):
                name = "user.soak%d" % k
                v = rng.randbytes(rng.randint(1, 2000))
                os.setxattr(p, name, v)
                model[(p, name)] = v
                count("setxattr")
        for (p, name), v in model.items():
            if os.getxattr(p, name) != v:
                raise Mismatch("%s: xattr %s differs" % (p, name))
            count("getxattr")
        for p in files:
            want = sorted(n for (q, n) in model if q == p)
            got = sorted(n for n in os.listxattr(p) if n.startswith("user.soak"))
            if got != want:
                raise Mismatch("%s: listxattr %s, want %s" % (p, got, want))
            count("listxattr")
            for n in got:
                os.removexattr(p, n)
                count("removexattr")
        try:
            os.getxattr(files[0], "user.soak0")
            raise Mismatch("%s: removed xattr still there" % files[0])
        except OSError as e:
            if e.errno != errno.ENODATA:
                raise
        yield


def make_tree(path, rng):
    """The tar workload's source: ~1500 files in nested directories."""
    for i in range(30):
        sub = os.path.join(path, "d%02d" % i, "e%d" % (i % 4))
        os.makedirs(sub, exist_ok=True)
        for j in range(50):
            with open(os.path.join(sub, "f%03d" % j), "wb") as f:
                f.write(rng.randbytes(rng.choice([0, 100, 1000, 4000, 9000, 70000])))
        os.symlink("e%d/f000" % (i % 4), os.path.join(path, "d%02d" % i, "link"))


def w_tar(d, rng):
    """tar -x of a prepared archive, tar -d (compare), rm -rf."""
    tarball = os.path.join(T, "tree.tar")
    while True:
        x = os.path.join(d, "x")
        os.makedirs(x)
        subprocess.run(["tar", "-xf", tarball, "-C", x], check=True, stderr=subprocess.PIPE)
        count("tar_x")
        r = subprocess.run(["tar", "-df", tarball, "-C", x], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        if r.returncode != 0:
            out = r.stdout[:300].decode(errors="replace")
            # tar -d reports read errors too: those are I/O errors (a mount
            # that died under it), not differences
            if "Cannot read" in out or "Transport endpoint" in out or "connection abort" in out:
                raise OSError(errno.EIO, "tar -d: " + out)
            raise Mismatch("tar -d after tar -x: %s" % out)
        count("tar_compare")
        pace(rng, 0.5, 2)
        subprocess.run(["rm", "-rf", x], check=True, stderr=subprocess.PIPE)
        count("rm_rf")
        yield


def w_sqlite(d, rng):
    """sqlite3 (the program) inserting in transactions, checking integrity."""
    db = os.path.join(d, "soak.db")
    sq = shutil.which("sqlite3")
    rows = 0
    subprocess.run([sq, db, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB);"
                    "DELETE FROM t;"], check=True, stderr=subprocess.PIPE)
    while True:
        n = rng.randint(50, 300)
        sql = "BEGIN;" + "".join("INSERT INTO t(v) VALUES(randomblob(%d));" % rng.randint(10, 3000)
                                 for _ in range(n)) + "COMMIT;"
        subprocess.run([sq, db, sql], check=True, stderr=subprocess.PIPE)
        rows += n
        count("sqlite_insert", n)
        r = subprocess.run([sq, db, "PRAGMA integrity_check; SELECT count(*) FROM t;"],
                           check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = r.stdout.decode().split()
        if out != ["ok", str(rows)]:
            raise Mismatch("sqlite3: integrity_check/count gave %s, want ['ok', '%d']" % (out, rows))
        count("sqlite_check")
        if rows > 20000:
            subprocess.run([sq, db, "DELETE FROM t; VACUUM;"], check=True, stderr=subprocess.PIPE)
            rows = 0
        yield


def w_durable(d, rng):
    """Files written and fsynced (file and directory), then recorded in
    T/manifest.NAME: after a SIGKILL of mfs each must be there byte for byte.
    A file is removed from the manifest before it is unlinked."""
    man = os.path.join(T, "manifest." + NAME)
    live = []
    if os.path.exists(man):
        # the manifest survives restarts: carry on with its live entries
        alive = {}
        for line in open(man):
            f = line.split()
            if len(f) == 3 and f[0] == "add":
                alive[f[1]] = f[2]
            elif len(f) == 2 and f[0] == "del":
                alive.pop(f[1], None)
        live = list(alive)
    seq = int(time.time() * 1000) % 100000000
    while True:
        seq += 1
        name = "dur%d.%d" % (os.getpid(), seq)
        p = os.path.join(d, name)
        data = rng.randbytes(rng.choice([1, 4096, 5000, 65536, 300000]))
        with open(p, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(d)
        with open(man, "a") as m:
            m.write("add %s %s\n" % (os.path.relpath(p, DIR_ROOT), hashlib.sha256(data).hexdigest()))
        live.append(os.path.relpath(p, DIR_ROOT))
        count("durable_write")
        while len(live) > 40:
            old = live.pop(0)
            with open(man, "a") as m:
                m.write("del %s\n" % old)
            os.unlink(os.path.join(DIR_ROOT, old))
            count("durable_unlink")
        pace(rng, 0.3, 1.0)
        yield


WORKLOADS = {"churn": w_churn, "bigseq": w_bigseq, "rand4k": w_rand4k, "rename": w_rename,
             "xattr": w_xattr, "tar": w_tar, "sqlite": w_sqlite, "durable": w_durable}


def verify(man, root):
    alive = {}
    for line in open(man):
        f = line.split()
        if len(f) == 3 and f[0] == "add":
            alive[f[1]] = f[2]
        elif len(f) == 2 and f[0] == "del":
            alive.pop(f[1], None)
    bad = 0
    for rel, want in sorted(alive.items()):
        try:
            with open(os.path.join(root, rel), "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
        except OSError as e:
            print("%s: %s" % (rel, e))
            bad += 1
            continue
        if got != want:
            print("%s: sha256 %s, want %s" % (rel, got, want))
            bad += 1
    print("%d durable files checked, %d bad" % (len(alive), bad))
    return 1 if bad else 0


def quarter_stats(rows):
    import statistics
    return statistics.median(rows) if rows else 0


def analyse(samples, warmup, min_samples, rss_pct, rss_abs_kib, fd_tol, thr_tol):
    """SAMPLES lines: epoch unixtime pid rss_kib hwm_kib anon_kib fds threads mounted
    [rings [held]]. Per epoch: drop the warm-up, compare the first and the last quarter
    of the rest (medians; fds among samples with the same number of DBFSs held
    (sessions; mounted ones in samples without the column: an unmounted DBFS
    keeps its descriptors while its store closes) and the io_uring queues
    started or not; threads without the queues'
    threads, which start once when the kernel first offers the ring).
    Prints one line per epoch; exit 1 if any epoch grew beyond the tolerance."""
    epochs = {}
    for line in open(samples):
        f = line.split()
        if len(f) == 9:
            f.append("0")
        if len(f) == 10:
            f.append("-1")
        if len(f) != 11:
            continue
        e = int(f[0])
        r = [float(f[1])] + [int(x) for x in f[2:]]
        r[6] -= r[8]  # threads other than the ring threads
        # DBFSs held (mounted where not sampled), rings started
        r[7] = (r[9] if r[9] >= 0 else r[7], r[8] > 0)
        epochs.setdefault(e, []).append(r)
    failed = 0
    for e in sorted(epochs):
        rows = epochs[e]
        what = "held" if all(r[9] >= 0 for r in rows) else "mounted"
        t0 = rows[0][0]
        peak_rss = max(r[2] for r in rows)
        peak_hwm = max(r[3] for r in rows)
        peak_anon = max(r[4] for r in rows)
        fds = [r[5] for r in rows]
        thr = [r[6] for r in rows]
        head = "epoch %d: %d samples over %.0f s, pid %d, peak VmRSS %d MiB, VmHWM %d MiB, " \
               "RssAnon %d MiB, fds %d-%d, threads %d-%d (+%d io_uring)" % (
                   e, len(rows), rows[-1][0] - t0, rows[0][1], peak_rss >> 10, peak_hwm >> 10,
                   peak_anon >> 10, min(fds), max(fds), min(thr), max(thr),
                   max(r[8] for r in rows))
        steady = [r for r in rows if r[0] - t0 >= warmup]
        if len(steady) < min_samples:
            print(head + "; too short to judge the trend")
            continue
        q = len(steady) // 4
        first, last = steady[:q], steady[-q:]
        verdict = []
        a1 = quarter_stats([r[4] for r in first])
        a2 = quarter_stats([r[4] for r in last])
        if a2 > a1 * (1 + rss_pct / 100.0) + rss_abs_kib:
            verdict.append("RssAnon grew %d -> %d KiB" % (a1, a2))
        t1 = max(r[6] for r in first)
        t2 = max(r[6] for r in last)
        if t2 > t1 + thr_tol:
            verdict.append("threads grew %d -> %d" % (t1, t2))
        compared = 0
        for m in sorted(set(r[7] for r in first) & set(r[7] for r in last)):
            f1 = quarter_stats([r[5] for r in first if r[7] == m])
            f2 = quarter_stats([r[5] for r in last if r[7] == m])
            compared += 1
            if f2 > f1 + fd_tol:
                verdict.append("fds grew %d -> %d with %d DBFSs %s%s" % (
                    f1, f2, m[0], what, ", rings on" if m[1] else ""))
        if not compared:
            # no state (DBFSs held, rings) in both quarters: the halves, since
            # fds across different numbers of DBFSs say nothing (one is ~10)
            h = len(steady) // 2
            first, last = steady[:h], steady[-h:]
            for m in sorted(set(r[7] for r in first) & set(r[7] for r in last)):
                f1 = quarter_stats([r[5] for r in first if r[7] == m])
                f2 = quarter_stats([r[5] for r in last if r[7] == m])
                compared += 1
                if f2 > f1 + fd_tol:
                    verdict.append("fds grew %d -> %d with %d DBFSs %s%s (halves)" % (
                        f1, f2, m[0], what, ", rings on" if m[1] else ""))
        if not compared:
            unjudged = "; fds not judged (no state common to both halves)"
        else:
            unjudged = ""
        trend = "RssAnon %d -> %d KiB, threads %d -> %d%s" % (a1, a2, t1, t2, unjudged)
        if verdict:
            failed += 1
            print(head + "; GROWTH: " + "; ".join(verdict))
        else:
            print(head + "; flat (" + trend + ")")
    return 1 if failed else 0


def holders(d):
    """Print the processes with a file, a mapping or their cwd under d."""
    d = d.rstrip("/") + "/"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        paths = []
        try:
            paths.append(os.readlink("/proc/%s/cwd" % pid))
            for fd in os.listdir("/proc/%s/fd" % pid):
                try:
                    paths.append(os.readlink("/proc/%s/fd/%s" % (pid, fd)))
                except OSError:
                    pass
            comm = open("/proc/%s/comm" % pid).read().strip()
        except OSError:
            continue
        hit = [x for x in paths if (x + "/").startswith(d)]
        if hit:
            print("%s %s %s" % (pid, comm, hit[0]))


def main():
    global KIND, DIR, T, NAME, OPS_FILE, DIR_ROOT
    if sys.argv[1] == "verify":
        sys.exit(verify(sys.argv[2], sys.argv[3]))
    if sys.argv[1] == "analyse":
        a = sys.argv[2:]
        sys.exit(analyse(a[0], float(a[1]), int(a[2]), float(a[3]), int(a[4]), int(a[5]),
                         int(a[6])))
    if sys.argv[1] == "holders":
        holders(sys.argv[2])
        return
    if sys.argv[1] == "mktree":
        make_tree(sys.argv[2], random.Random(1))
        return
    KIND, root, T, NAME, seed = sys.argv[1:6]
    T = os.path.abspath(T)
    # Every path below is relative to the DBFS's root, the working
    # directory (of tar, rm and sqlite3 too): once the mount goes away (a
    # forced unmount, a SIGKILL of mfs) the work fails on the dead mount
    # instead of going on in the bare mount point, which must stay empty.
    DIR_ROOT = "."
    rng = random.Random(int(seed))
    DIR = "w-" + KIND
    OPS_FILE = os.path.join(T, "ops", "%s.%s.%d" % (NAME, KIND, os.getpid()))
    signal.signal(signal.SIGTERM, lambda s, f: (flush_ops(True), os._exit(0)))
    try:
        os.chdir(root)
        if KIND == "durable":
            os.makedirs(DIR, exist_ok=True)
        else:
            shutil.rmtree(DIR, ignore_errors=False) if os.path.exists(DIR) else None
            os.makedirs(DIR)
        for _ in WORKLOADS[KIND](DIR, rng):
            count("round_" + KIND)
            flush_ops()
            pace(rng)
    except Mismatch as e:
        flush_ops(True)
        record_error("DATA: " + str(e))
        sys.exit(1)
    except (OSError, subprocess.CalledProcessError) as e:
        flush_ops(True)
        if disrupted():
            sys.exit(3)
        # a disruption marker may be set a moment after the mount died
        time.sleep(1)
        if disrupted():
            sys.exit(3)
        if isinstance(e, subprocess.CalledProcessError):
            e = "%s: exit %d: %s" % (e.cmd[0], e.returncode, (e.stderr or b"")[:300].decode(
                errors="replace").strip())
        record_error(str(e))
        sys.exit(1)


if __name__ == "__main__":
    main()
