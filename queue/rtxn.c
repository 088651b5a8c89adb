/* SPDX-License-Identifier: MIT */
/*
 * Read transactions kept for reuse. Calls no other file of the library.
 *
 * Read transactions of a subscriber are reset and renewed, not begun anew:
 * mdb_txn_begin() callocs a transaction sized by maxdbs (about 200 KB with
 * thousands of databases), on every dequeue. A reset transaction keeps its
 * reader slot. @spare holds the reset one (or NULL); NULL @spare: plain.
 */
#include "internal.h"

int mfsq_rtxn_begin(mfsq_queue *q, MDB_txn **spare, MDB_txn **txn)
{
	if (spare && *spare) {
		*txn = *spare;
		*spare = NULL;
		if (!mdb_txn_renew(*txn))
			return 0;
		mdb_txn_abort(*txn);
	}
	return mdb_txn_begin(q->env, NULL, MDB_RDONLY, txn);
}

void mfsq_rtxn_end(MDB_txn **spare, MDB_txn *txn)
{
	if (!spare || *spare) {
		mdb_txn_abort(txn);
		return;
	}
	mdb_txn_reset(txn);
	*spare = txn;
}
