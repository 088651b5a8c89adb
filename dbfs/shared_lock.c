/*
 * The lock scheme of dbfs.lock for exclusive and shared opens, and who else
 * holds it (dbfs/shared.h).
 *
 * An exclusive open takes flock LOCK_EX, a shared open LOCK_SH, both
 * without waiting: the kernel then refuses a shared open while a process
 * holds the store exclusively and an exclusive open while any holds it
 * shared, and drops the lock of a process that dies (SIGKILL included), so
 * the lock is also the liveness of the sharing processes. flock, not
 * fcntl locks: fcntl locks belong to the process and any close of the file
 * by it drops them; flock's belong to the open file description.
 *
 * Who else holds it. /proc/locks cannot tell alone: the kernel builds it
 * in pieces, and a lock taken or dropped anywhere on the host between two
 * pieces makes it skip or repeat lines (1.2% of reads missed one of three
 * steady locks while another program took and dropped locks on other
 * files). A missed holder would make a process reclaim orphans another
 * holds open, or stop waiting for a live process's notifier. So each
 * shared open also marks its slot of dbfs.wake (shared.c) with an open
 * file description lock (F_OFD_SETLK, F_RDLCK) on byte 1 + slot of
 * dbfs.lock (byte 1 + DBFS_WAKE_SLOTS without a slot); the kernel answers
 * F_OFD_GETLK atomically, and drops the mark with the flock when the
 * process dies. OFD byte locks and flock never conflict with each other.
 * /proc/locks is still read, as a second opinion that can only say "not
 * alone" or "alive" (processes of builds before the marks).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <pthread.h>

#include "dbfs/shared.h"

int dbfs_lock_take(int fd, bool shared, const char *dir, char *err, size_t errlen)
{
	if (flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0)
		return 0;
	int e = errno;
	if (e != EWOULDBLOCK) {
		snprintf(err, errlen, "cannot lock %s/dbfs.lock: %s", dir, strerror(e));
		return -e;
	}
	if (shared) {
		snprintf(err, errlen,
			 "store %s is mounted exclusively (by this or another process): "
			 "a shared open is refused",
			 dir);
		return -EBUSY;
	}
	/* Held: shared (a LOCK_SH is granted beside it) or exclusively? */
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		flock(fd, LOCK_UN);
		snprintf(err, errlen,
			 "store %s is mounted shared by another process: an exclusive open is "
			 "refused (mount it with the option shared)",
			 dir);
	} else {
		snprintf(err, errlen, "store %s is in use (mounted by this or another process)",
			 dir);
	}
	return -EBUSY;
}

/* Count the flock locks /proc/locks lists on fd's file (of process
 * `only` if not 0). */
static unsigned count_locks(int fd, pid_t only, bool *ok)
{
	struct stat sb;
	char line[256];
	unsigned n = 0;
	*ok = false;
	if (fstat(fd, &sb) < 0)
		return 0;
	FILE *f = fopen("/proc/locks", "re");
	if (!f)
		return 0;
	/* "1: FLOCK  ADVISORY  READ 6067 00:1b:265302 0 EOF" (a blocked
	 * waiter's line starts "1: -> FLOCK": not a holder) */
	while (fgets(line, sizeof(line), f)) {
		char type[16], mode[16], rw[16];
		unsigned maj, min;
		unsigned long long ino;
		long pid;
		if (sscanf(line, "%*d: %15s %15s %15s %ld %x:%x:%llu", type, mode, rw, &pid, &maj,
			   &min, &ino) != 7)
			continue;
		if (!strcmp(type, "FLOCK") && maj == major(sb.st_dev) && min == minor(sb.st_dev) &&
		    ino == (unsigned long long)sb.st_ino && (!only || pid == only))
			n++;
	}
	*ok = !ferror(f);
	fclose(f);
	return n;
}

int dbfs_lock_mark(int fd, int slot)
{
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET,
			   .l_start = 1 + (slot >= 0 ? slot : DBFS_WAKE_SLOTS), .l_len = 1};
	return fcntl(fd, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

/* Does another open file description hold a mark on [start, start+len)
 * (len 0: to the end)? Errors: yes (the safe answer). */
static bool marked(int fd, off_t start, off_t len)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return true;
	return fl.l_type != F_UNLCK;
}

bool dbfs_lock_alone(int fd)
{
	bool ok;
	if (marked(fd, 1, 0))
		return false;
	unsigned n = count_locks(fd, 0, &ok);
	return ok && n <= 1;
}

unsigned dbfs_lock_holders(int fd)
{
	unsigned n = 1; /* this process */
	for (int b = 0; b <= DBFS_WAKE_SLOTS; b++)
		n += marked(fd, 1 + b, 1);
	bool ok;
	unsigned seen = count_locks(fd, 0, &ok); /* older builds mark nothing */
	return ok && seen > n ? seen : n;
}

bool dbfs_lock_slot_alive(int fd, int slot, pid_t pid)
{
	if (marked(fd, 1 + slot, 1))
		return true;
	bool ok;
	unsigned n = count_locks(fd, pid, &ok);
	/* the mark is gone: dead, unless /proc/locks still shows the pid
	 * (a build before the marks) */
	return ok && n > 0;
}

/* The stores this process has open shared: LMDB must never open one
 * environment twice in a process, and LOCK_SH does not exclude it. */
#define CLAIMS_MAX 1024
static pthread_mutex_t claims_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dbfs_shared *claims[CLAIMS_MAX];

int dbfs_shared_claim(struct dbfs_shared *sh, const char *dir, char *err, size_t errlen)
{
	struct stat sb;
	if (stat(dir, &sb) < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(e));
		return -e;
	}
	sh->dev = sb.st_dev;
	sh->ino = sb.st_ino;
	int rc = -ENOMEM, free_slot = -1;
	pthread_mutex_lock(&claims_lock);
	for (int i = 0; i < CLAIMS_MAX; i++) {
		if (!claims[i]) {
			if (free_slot < 0)
				free_slot = i;
		} else if (claims[i]->dev == sh->dev && claims[i]->ino == sh->ino) {
			free_slot = -2;
			break;
		}
	}
	if (free_slot >= 0) {
		claims[free_slot] = sh;
		rc = 0;
	} else if (free_slot == -2) {
		rc = -EBUSY;
	}
	pthread_mutex_unlock(&claims_lock);
	if (rc == -EBUSY)
		snprintf(err, errlen, "store %s is already mounted by this process", dir);
	else if (rc)
		snprintf(err, errlen, "too many shared stores in this process");
	return rc;
}

void dbfs_shared_unclaim(struct dbfs_shared *sh)
{
	pthread_mutex_lock(&claims_lock);
	for (int i = 0; i < CLAIMS_MAX; i++)
		if (claims[i] == sh)
			claims[i] = NULL;
	pthread_mutex_unlock(&claims_lock);
}
