/* Kernel lookup counts: a chained hash table keyed by inode number. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "dbfs/lookups.h"

struct dbfs_lookup {
	struct dbfs_lookup *next;
	uint64_t ino;
	uint64_t nlookup;
};

static uint64_t hash_ino(uint64_t ino)
{
	ino ^= ino >> 33;
	ino *= 0xff51afd7ed558ccdull;
	ino ^= ino >> 33;
	return ino;
}

#define SPARE 16

/* Top the spares up by one (lock held); false when malloc failed. */
static bool spare_add(struct dbfs_lookups *t)
{
	struct dbfs_lookup *x = t->nspare < SPARE ? malloc(sizeof(*x)) : NULL;
	if (!x)
		return t->nspare >= SPARE;
	x->next = t->spare;
	t->spare = x;
	t->nspare++;
	return true;
}

static void spare_free(struct dbfs_lookups *t)
{
	while (t->spare) {
		struct dbfs_lookup *next = t->spare->next;
		free(t->spare);
		t->spare = next;
	}
	t->nspare = 0;
}

int dbfs_lookups_init(struct dbfs_lookups *t)
{
	t->nslots = 1024;
	t->count = 0;
	t->spare = NULL;
	t->nspare = 0;
	t->slots = calloc(t->nslots, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	while (t->nspare < SPARE) {
		if (!spare_add(t)) {
			spare_free(t);
			free(t->slots);
			t->slots = NULL;
			return -ENOMEM;
		}
	}
	pthread_mutex_init(&t->lock, NULL);
	return 0;
}

void dbfs_lookups_destroy(struct dbfs_lookups *t)
{
	spare_free(t);
	for (uint64_t i = 0; i < t->nslots; i++) {
		struct dbfs_lookup *n = t->slots[i];
		while (n) {
			struct dbfs_lookup *next = n->next;
			free(n);
			n = next;
		}
	}
	free(t->slots);
	t->slots = NULL;
	pthread_mutex_destroy(&t->lock);
}

static void grow(struct dbfs_lookups *t)
{
	uint64_t ns = t->nslots * 2;
	struct dbfs_lookup **s = calloc(ns, sizeof(*s));
	if (!s)
		return; /* keep the longer chains; correctness is unaffected */
	for (uint64_t i = 0; i < t->nslots; i++) {
		struct dbfs_lookup *n = t->slots[i];
		while (n) {
			struct dbfs_lookup *next = n->next;
			uint64_t h = hash_ino(n->ino) & (ns - 1);
			n->next = s[h];
			s[h] = n;
			n = next;
		}
	}
	free(t->slots);
	t->slots = s;
	t->nslots = ns;
}

int dbfs_lookups_ref(struct dbfs_lookups *t, uint64_t ino, uint64_t n)
{
	int rc = 0;
	pthread_mutex_lock(&t->lock);
	struct dbfs_lookup **pp = &t->slots[hash_ino(ino) & (t->nslots - 1)];
	for (struct dbfs_lookup *x = *pp; x; x = x->next) {
		if (x->ino == ino) {
			x->nlookup += n;
			goto out;
		}
	}
	struct dbfs_lookup *x = malloc(sizeof(*x));
	if (!x && t->spare) {
		x = t->spare;
		t->spare = x->next;
		t->nspare--;
	} else if (x && t->nspare < SPARE) {
		spare_add(t); /* memory is back: refill */
	}
	if (!x) {
		rc = -ENOMEM;
		goto out;
	}
	x->ino = ino;
	x->nlookup = n;
	x->next = *pp;
	*pp = x;
	if (++t->count > t->nslots * 2)
		grow(t);
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

uint64_t dbfs_lookups_unref(struct dbfs_lookups *t, uint64_t ino, uint64_t n)
{
	uint64_t left = 0;
	pthread_mutex_lock(&t->lock);
	struct dbfs_lookup **pp = &t->slots[hash_ino(ino) & (t->nslots - 1)];
	for (struct dbfs_lookup *x = *pp; x; pp = &x->next, x = x->next) {
		if (x->ino != ino)
			continue;
		x->nlookup = x->nlookup > n ? x->nlookup - n : 0;
		left = x->nlookup;
		if (!left) {
			*pp = x->next;
			t->count--;
			if (t->nspare < SPARE) {
				x->next = t->spare;
				t->spare = x;
				t->nspare++;
			} else {
				free(x);
			}
		}
		break;
	}
	pthread_mutex_unlock(&t->lock);
	return left;
}

uint64_t dbfs_lookups_count(struct dbfs_lookups *t, uint64_t ino)
{
	uint64_t c = 0;
	pthread_mutex_lock(&t->lock);
	for (struct dbfs_lookup *x = t->slots[hash_ino(ino) & (t->nslots - 1)]; x; x = x->next) {
		if (x->ino == ino) {
			c = x->nlookup;
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return c;
}
