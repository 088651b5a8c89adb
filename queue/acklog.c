/* SPDX-License-Identifier: MIT */
/*
 * Relaxed acknowledgements: the ack log.
 *
 * In an environment opened with MDB_NOSYNC a commit is only as durable as
 * the page cache: it survives a crash of the process, not of the machine.
 * An acknowledgement written into a MAP_SHARED mapping of a file is just as
 * durable, and costs a few stores instead of a write transaction: perf of
 * four subscribers acknowledging batches of 256 showed them waiting for
 * those commits (and each batch-1 message cost two commits, its enqueue and
 * its ack). So in such an environment a durable subscriber gets a slot of
 * the queue's ack log (format.h) while it is open; mfsq_ack() without a
 * transaction stores the positions there and returns, and the positions
 * are folded into the store's subscriber record by a grouped commit at most
 * MFSQ_ACK_FOLD_US later (by the next ack or dequeue), and when the
 * subscriber is closed.
 *
 * A slot is owned through an OFD lock on its byte range, held while the
 * subscriber is open; the kernel drops it when the process dies. Opening a
 * durable subscriber first reaps, inside its write transaction (so no
 * other process reaps or reads the record meanwhile), every slot it can
 * lock that still holds positions: they belong to a process that died
 * before folding them. Positions raise the record (max per shard: a
 * record moved forward by retention or a seek written through stays).
 * Slots of an earlier boot are dropped unread: after a machine crash the
 * store may have lost commits that the slot's positions point past, and
 * new messages would then be skipped; losing an acknowledgement only means
 * a redelivery (at-least-once). A reaped slot is cleared only after the
 * commit that folded it, so a crash in between folds it again (harmless).
 *
 * Environments that sync (without MDB_NOSYNC) never use it: there an
 * acknowledgement must be durable on return, which only a commit gives.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static size_t slot_stride(const mfsq_queue *q)
{
	size_t b = sizeof(struct mfsq_ack_slot) + q->cfg.nshards * sizeof(uint64_t);

	return (b + 63) & ~(size_t)63;
}

static struct mfsq_ack_slot *slot_at(mfsq_queue *q, unsigned i)
{
	return (struct mfsq_ack_slot *)(q->ackmap + (size_t)i * q->ackstride);
}

static _Atomic uint64_t *slot_pos(struct mfsq_ack_slot *sl)
{
	return (_Atomic uint64_t *)(sl + 1);
}

/* Try to take (F_WRLCK) or drop (F_UNLCK) slot @i; 0 or errno. */
static int slot_lock(mfsq_queue *q, unsigned i, short type)
{
	struct flock fl = {
	    .l_type = type,
	    .l_whence = SEEK_SET,
	    .l_start = (off_t)((size_t)i * q->ackstride),
	    .l_len = (off_t)q->ackstride,
	};

	return fcntl(q->ackfd, F_OFD_SETLK, &fl) ? errno : 0;
}

static int read_boot_id(char out[MFSQ_BOOT_ID_LEN])
{
	char buf[64] = {0};
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 32)
		return EIO;
	memset(out, 0, MFSQ_BOOT_ID_LEN);
	memcpy(out, buf, (size_t)n < MFSQ_BOOT_ID_LEN ? (size_t)n : MFSQ_BOOT_ID_LEN);
	return 0;
}

void mfsq_acklog_open(mfsq_queue *q)
{
	size_t bytes;
	char path[4096];
	unsigned fl = 0;
	struct stat st;
	int fd;

	mdb_env_get_flags(q->env, &fl);
	if ((fl & MDB_RDONLY) || mfsq_env_file(q, ".acks", path, sizeof(path)) ||
	    read_boot_id(q->boot_id))
		return;
	q->ackstride = slot_stride(q);
	bytes = q->ackstride * MFSQ_ACK_SLOTS;
	/* created only where it will be used; an existing one is opened
	 * anyway: it may hold positions of a process that died */
	fd = open(path, O_RDWR | O_CLOEXEC | ((fl & MDB_NOSYNC) ? O_CREAT : 0), 0644);
	if (fd < 0)
		return;
	if (fstat(fd, &st) || ((size_t)st.st_size < bytes && ftruncate(fd, (off_t)bytes))) {
		close(fd);
		return;
	}
	q->ackmap = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (q->ackmap == MAP_FAILED) {
		q->ackmap = NULL;
		close(fd);
		return;
	}
	q->ackfd = fd;
}

void mfsq_acklog_close(mfsq_queue *q)
{
	if (q->ackmap)
		munmap(q->ackmap, q->ackstride * MFSQ_ACK_SLOTS);
	if (q->ackfd >= 0)
		close(q->ackfd); /* drops every slot lock of this process */
	q->ackmap = NULL;
	q->ackfd = -1;
}

int mfsq_acklog_relaxed(mfsq_queue *q)
{
	unsigned fl = 0;

	if (q->ackfd < 0)
		return 0;
	mdb_env_get_flags(q->env, &fl);
	return (fl & MDB_NOSYNC) && !(fl & MDB_RDONLY);
}

/* Raise the stored record of the slot's subscriber (if it still exists). */
static int fold_slot(mfsq_queue *q, MDB_txn *txn, struct mfsq_ack_slot *sl)
{
	uint32_t n = q->cfg.nshards;
	unsigned char k[MFSQ_NAME_MAX + 1];
	size_t nl = strnlen(sl->name, MFSQ_NAME_MAX), vl = sizeof(struct mfsq_disk_sub) + n * 8;
	MDB_val key = {nl + 1, k}, val;
	unsigned char *buf;
	int rc, changed = 0;

	if (!nl)
		return 0;
	k[0] = 'U';
	memcpy(k + 1, sl->name, nl);
	rc = mdb_get(txn, q->meta, &key, &val);
	if (rc == MDB_NOTFOUND)
		return 0; /* deleted meanwhile: nothing to raise */
	if (rc)
		return rc;
	if (val.mv_size != vl)
		return EBADMSG;
	buf = malloc(vl);
	if (!buf)
		return ENOMEM;
	memcpy(buf, val.mv_data, vl);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t old, pos = atomic_load_explicit(&slot_pos(sl)[i], memory_order_relaxed);

		memcpy(&old, buf + sizeof(struct mfsq_disk_sub) + i * 8, 8);
		if (pos > old) {
			memcpy(buf + sizeof(struct mfsq_disk_sub) + i * 8, &pos, 8);
			changed = 1;
		}
	}
	val.mv_data = buf;
	rc = changed ? mdb_put(txn, q->meta, &key, &val, 0) : 0;
	free(buf);
	return rc;
}

int mfsq_acklog_reap(mfsq_queue *q, MDB_txn *txn, uint64_t *reaped)
{
	int rc = 0;

	*reaped = 0;
	if (q->ackfd < 0)
		return 0;
	pthread_mutex_lock(&q->acklock);
	for (unsigned i = 0; !rc && i < MFSQ_ACK_SLOTS; i++) {
		struct mfsq_ack_slot *sl = slot_at(q, i);

		/* our own OFD lock would be granted again: skip our slots */
		if ((q->ackowned >> i & 1) || !atomic_load(&sl->magic) || slot_lock(q, i, F_WRLCK))
			continue;
		if (atomic_load(&sl->magic) != MFSQ_ACK_MAGIC) {
			slot_lock(q, i, F_UNLCK);
			continue;
		}
		if (sl->nshards == q->cfg.nshards &&
		    !memcmp(sl->boot, q->boot_id, MFSQ_BOOT_ID_LEN)) {
			rc = fold_slot(q, txn, sl);
			atomic_fetch_add(&q->c.acks_reaped, 1);
		}
		*reaped |= (uint64_t)1 << i; /* cleared after the commit */
	}
	pthread_mutex_unlock(&q->acklock);
	return rc;
}

void mfsq_acklog_reaped(mfsq_queue *q, uint64_t reaped, int committed)
{
	pthread_mutex_lock(&q->acklock);
	for (unsigned i = 0; i < MFSQ_ACK_SLOTS; i++) {
		if (!(reaped >> i & 1))
			continue;
		if (committed)
			atomic_store(&slot_at(q, i)->magic, 0);
		slot_lock(q, i, F_UNLCK);
	}
	pthread_mutex_unlock(&q->acklock);
}

void mfsq_acklog_claim(mfsq_sub *s)
{
	mfsq_queue *q = s->q;

	s->slot = -1;
	if (!(s->flags & MFSQ_SUB_DURABLE) || !mfsq_acklog_relaxed(q))
		return;
	pthread_mutex_lock(&q->acklock);
	for (unsigned i = 0; i < MFSQ_ACK_SLOTS; i++) {
		struct mfsq_ack_slot *sl = slot_at(q, i);

		if ((q->ackowned >> i & 1) || atomic_load(&sl->magic) || slot_lock(q, i, F_WRLCK))
			continue;
		if (atomic_load(&sl->magic)) { /* its owner died after our check */
			slot_lock(q, i, F_UNLCK);
			continue;
		}
		memset(sl->name, 0, sizeof(sl->name));
		memcpy(sl->name, s->name, strlen(s->name));
		memcpy(sl->boot, q->boot_id, MFSQ_BOOT_ID_LEN);
		sl->nshards = q->cfg.nshards;
		for (uint32_t k = 0; k < q->cfg.nshards; k++)
			atomic_store_explicit(&slot_pos(sl)[k], s->acked[k], memory_order_relaxed);
		atomic_store(&sl->magic, MFSQ_ACK_MAGIC); /* last: a slot is whole or free */
		q->ackowned |= (uint64_t)1 << i;
		s->slot = (int)i;
		s->logged = 1;
		break;
	}
	pthread_mutex_unlock(&q->acklock);
}

void mfsq_acklog_write(mfsq_sub *s)
{
	struct mfsq_ack_slot *sl = slot_at(s->q, (unsigned)s->slot);

	/* each position is one atomic store: a process killed in the middle
	 * of an ack leaves every shard at its old or its new position, both
	 * of them acknowledged by the caller */
	for (uint32_t k = 0; k < s->q->cfg.nshards; k++)
		atomic_store_explicit(&slot_pos(sl)[k], s->acked[k], memory_order_relaxed);
}

void mfsq_acklog_release(mfsq_sub *s, int folded)
{
	mfsq_queue *q = s->q;

	if (s->slot < 0)
		return;
	pthread_mutex_lock(&q->acklock);
	if (folded) /* else left for a later reap */
		atomic_store(&slot_at(q, (unsigned)s->slot)->magic, 0);
	slot_lock(q, (unsigned)s->slot, F_UNLCK);
	q->ackowned &= ~((uint64_t)1 << s->slot);
	pthread_mutex_unlock(&q->acklock);
	s->slot = -1;
}
