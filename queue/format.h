/* SPDX-License-Identifier: MIT */
/*
 * On-store layout of a queue. Every database of queue Q is named "Q/..."
 * so several queues share an environment. Integers in keys are fixed-width
 * big-endian so memcmp order is numeric order; values are host order (an
 * LMDB file is not portable across byte orders anyway).
 *
 * Q/m  meta database
 *
 *   config (written once, at creation)
 *   +-----+                     +----------------------------+
 *   | 'C' |                 ->  | struct mfsq_disk_config      |
 *   +-----+                     +----------------------------+
 *
 *   shard state, one per shard, rewritten by every change but appends to
 *   the tail (shardstate.c): next_seq, tail_count, tail_bytes and last_us
 *   may stand for an earlier message of the tail subshard (at most
 *   MFSQ_STATE_LAG behind): the messages from next_seq on are in the tail,
 *   and its last key + 1 is the shard's next seq
 *   +-----+-----------+         +----------------------------+
 *   | 'S' | shard u32 |     ->  | struct mfsq_disk_shard       |
 *   +-----+-----------+         +----------------------------+
 *
 *   subshard index: one row per live subshard, by its first seq; the value
 *   is the id naming its database
 *   +-----+-----------+---------------+      +--------+
 *   | 'B' | shard u32 | first_seq u64 |  ->  | id u64 |
 *   +-----+-----------+---------------+      +--------+
 *
 *   durable subscriber
 *   +-----+---------------------+        +---------------------------------+
 *   | 'U' | name (1..48 bytes)  |   ->   | struct mfsq_disk_sub | acked[nshards] u64 |
 *   +-----+---------------------+        +---------------------------------+
 *
 *   retention floor of a shard (floor.c, mfsq_retain_floor()), absent if none
 *   +-----+-----------+         +-----------------------+
 *   | 'K' | shard u32 |     ->  | first seq kept u64    |
 *   +-----+-----------+         +-----------------------+
 *
 *   rule of a durable subscriber (mfsq_subscribe_rule()), absent if none;
 *   parsed again when the subscriber is opened
 *   +-----+---------------------+        +-------------------------------------+
 *   | 'R' | name (1..48 bytes)  |   ->   | rule text (no NUL, <= MFSQ_RULE_MAX)  |
 *   +-----+---------------------+        +-------------------------------------+
 *
 * Q/s/<shard>/<id as 16 hex digits>   one subshard. Ids are never reused.
 *   A spare subshard is created ahead by the queue's own transactions, so
 *   that an enqueue inside a caller's transaction never has to create one.
 *   +-------------+        +------------------------+---------+
 *   | seq u64     |   ->   | struct mfsq_disk_msg     | payload |
 *   +-------------+        +------------------------+---------+
 *
 * Q/d/<shard>   the delay shard: bucket shards are key ranges, a bucket
 *   spanning [bucket * bucket_us, (bucket + 1) * bucket_us); within a
 *   bucket messages are in enqueue order (dseq from the shard state).
 *   +-------------+-----------+        +--------------------+---------+
 *   | bucket u64  | dseq u64  |   ->   | struct mfsq_disk_msg | payload |
 *   +-------------+-----------+        +--------------------+---------+
 *
 * Q/x   exception queue (expired messages)
 *   +-------------+-----------+---------+      +-----------+-------------+---------+
 *   | origin u8   | shard u32 | seq u64 |  ->  | reason u8 | pad[7]      | mfsq_disk_msg | payload
 *   | 's' stream  |           | or dseq |      +-----------+-------------+---------+
 *   | 'd' delay   |           |         |
 *   +-------------+-----------+---------+
 */
#ifndef MFSQ_FORMAT_H
#define MFSQ_FORMAT_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* 2: shard records may lag behind their tails (shardstate.c); a version 1
 * queue (records always exact) is read as it is and marked 2 by its first
 * open, after which builds of version 1, which would reuse sequence
 * numbers, refuse it (MDB_VERSION_MISMATCH). */
#define MFSQ_FORMAT_VERSION 2
#define MFSQ_FORMAT_OLDEST  1

struct mfsq_disk_config {
	uint32_t version;
	uint32_t nshards;
	uint32_t subshard_msgs;
	uint32_t retain_max;
	uint64_t subshard_bytes;
	uint64_t bucket_us;
	uint32_t max_payload;
	uint32_t pad;
};

struct mfsq_disk_shard {
	/* next_seq, tail_count, tail_bytes, last_us: as of the record's last
	 * write (see 'S' above); the other fields are exact */
	uint64_t next_seq;	/* next stream sequence number (first is 1) */
	uint64_t head_first;	/* first seq of the oldest live subshard */
	uint64_t tail_first;	/* first seq of the subshard being filled */
	uint64_t tail_count;	/* messages in it */
	uint64_t tail_bytes;	/* payload bytes in it */
	uint64_t last_us;	/* last enqueue time: stream times never go back */
	uint64_t next_dseq;	/* next delay sequence number */
	uint64_t delay_pending; /* messages in the delay shard */
	uint64_t min_due;	/* lower bound of the earliest due time; UINT64_MAX: none */
	uint64_t nlive;		/* live subshards */
	uint64_t tail_id;	/* database id of the subshard being filled */
	uint64_t next_id;	/* next subshard database id */
	uint64_t spare_id;	/* created ahead, not yet in use; 0: none */
};

#define MFSQ_SUB_F_LAGGING 0x1

struct mfsq_disk_sub {
	uint32_t flags;
	uint32_t nshards;
	uint64_t lost; /* messages skipped because of lagging */
		       /* followed by uint64_t acked[nshards]: next seq not yet acknowledged */
};

struct mfsq_disk_msg {
	uint64_t enq_us;
	uint64_t dlv_us;
	uint64_t exp_us;
	uint64_t enqueuer;
	uint8_t prio;
	uint8_t flags;
	uint8_t pad[2];
	uint32_t tag; /* the caller's attribute (was padding: 0 in older records) */
};

/*
 * The ack log (acklog.c): a file next to the environment's data file,
 * "mfsq-<queue>.acks" (MDB_NOSUBDIR: "<path>-mfsq-<queue>.acks"), used by
 * MDB_NOSYNC environments; MFSQ_ACK_SLOTS slots of one stride each (the
 * header and nshards positions, rounded up to 64 bytes), mapped MAP_SHARED
 * by every process of the queue. A process owns a slot by an OFD write
 * lock on its byte range.
 *
 *   slot
 *   +-------+---------+--------------+----------------+-------------------+
 *   | magic | nshards | boot id      | name           | pos[nshards] u64  |
 *   | u32   | u32     | 40 bytes     | 56 bytes, NUL  | next seq not acked|
 *   +-------+---------+--------------+----------------+-------------------+
 *   magic 0: free; MFSQ_ACK_MAGIC: holds the positions of durable subscriber
 *   "name", written during the boot "boot id"
 *   (/proc/sys/kernel/random/boot_id).
 */
/*
 * The enqueue log (enqlog.c): MFSQ_LOGS files per queue next to the data
 * file, "mfsq-<queue>.log<i>" (MDB_NOSUBDIR: "<path>-mfsq-<queue>.log<i>"),
 * each a ring of MFSQ_LOG_BYTES owned by one process (OFD lock on the file).
 * Records are 8-aligned; one that does not fit before the end is preceded
 * by a wrap record (or, with no room for a header, by nothing) and starts
 * at offset 0.
 *
 *   record
 *   +---------+---------+----------+------------+-----------+-----+-----+-----+------+-------+
 *   | lsn u64 | sum u64 | enqueuer | deliver_us | expire_us | len | tag | prio| wrap | pad 6 |
 *   |         |         | u64      | u64        | u64       | u32 | u32 | u8  | u8   |       |
 *   +---------+---------+----------+------------+-----------+-----+-----+-----+------+-------+
 *   followed by len payload bytes, padded to 8. lsn: 1, 2, ... per file,
 *   stored last; sum: checksum of the rest (enqlog.c: rec_sum()).
 *
 * In the meta database, per log file, the first record not in the store,
 * written in the commit that moves records in:
 *   +-----+------------+        +----------------------------+
 *   | 'L' | file u32   |   ->   | struct mfsq_disk_log         |
 *   +-----+------------+        +----------------------------+
 */
#define MFSQ_LOGS      8
#define MFSQ_LOG_BYTES (1u << 20)
#define MFSQ_LOG_BATCH (16u << 10) /* payload bytes of a call that may go to the log */

struct mfsq_log_rec {
	_Atomic uint64_t lsn;
	uint64_t sum;
	uint64_t enqueuer, deliver_us, expire_us;
	uint32_t len, tag;
	uint8_t prio, wrap, pad[6];
};

struct mfsq_disk_log {
	uint64_t next_lsn; /* first record not yet in the store */
	uint64_t off;	   /* where it is */
};

#define MFSQ_ACK_SLOTS	 64
#define MFSQ_ACK_MAGIC	 0x6d71616bu /* "mqak" */
#define MFSQ_BOOT_ID_LEN 40

struct mfsq_ack_slot {
	_Atomic uint32_t magic;
	uint32_t nshards;
	char boot[MFSQ_BOOT_ID_LEN];
	char name[56]; /* MFSQ_NAME_MAX + 1, padded: positions start 8-aligned */
		       /* followed by _Atomic uint64_t pos[nshards] */
};

static inline void mfsq_be64_put(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline uint64_t mfsq_be64_get(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static inline void mfsq_be32_put(unsigned char *p, uint32_t v)
{
	for (int i = 3; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline uint32_t mfsq_be32_get(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

#endif /* MFSQ_FORMAT_H */
