/*
 * Shared by the fuzz targets (tests/fuzz/README.md).
 *
 * Each target is one file defining LLVMFuzzerTestOneInput (and, when it
 * needs a seed store, LLVMFuzzerInitialize). The same file is linked two
 * ways: with libFuzzer (clang -fsanitize=fuzzer, tools/fuzz) and with
 * replay.c (any compiler: the default test suite feeds it the committed
 * corpus and regression inputs).
 *
 * A target reports a broken property with fz_fail(), which aborts: for
 * libFuzzer and for the replay driver alike that is a crash, with the input
 * saved (libFuzzer) or named (replay).
 */
#ifndef MFS_FUZZ_H
#define MFS_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lmdb.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Print "fuzz: property broken: <fmt>" and abort. */
void fz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* True when MFS_FUZZ_KNOWN=1: also check properties that product code is
 * known to break (each named in tests/fuzz/README.md "Known bugs"), so that
 * the regression input of a bug still open can be run on purpose. */
bool fz_known(void);

/* A scratch directory for this process, made once: $MFS_FUZZ_TMP, else
 * /dev/shm when writable (stores are rewritten every run), else $TMPDIR or
 * /tmp. Removed at exit. */
const char *fz_scratch(void);
/* Remove a directory tree (best effort). */
void fz_rmtree(const char *dir);
/* Write `len` bytes to path (created or truncated). 0 or -errno. */
int fz_write_file(const char *path, const void *buf, size_t len);
/* Read a whole file (malloc'd). 0 or -errno. */
int fz_read_file(const char *path, uint8_t **buf, size_t *len);

/* The input, consumed front to back; reads past the end give zeros. */
struct fz_in {
	const uint8_t *p;
	size_t n;
};
uint8_t fz_u8(struct fz_in *in);
uint16_t fz_u16(struct fz_in *in);
uint32_t fz_u32(struct fz_in *in);
/* Up to `len` bytes; *got says how many there were. */
const uint8_t *fz_bytes(struct fz_in *in, size_t len, size_t *got);

/*
 * Damage records of an LMDB environment through the LMDB API, so that the
 * B-trees stay valid and only the bytes our code decodes are hostile.
 * Reads operations from `in` until it is empty, an END op, or `max_ops`:
 *
 *   op u8 (mod 8), then db u8 (mod ndbs), then
 *   0 FLIP    index u16, offset u16, xor u8        one value byte
 *   1 TRUNC   index u16, length u16                value cut (mod len + 1)
 *   2 SET     index u16, len u8, bytes             value replaced
 *   3 DEL     index u16                            record deleted
 *   4 PUT     klen u8, key, vlen u8, value         record added (or replaced)
 *   5 APPEND  index u16, len u8, bytes             bytes added to the value
 *   6 KEYFLIP index u16, offset u8, xor u8         one key byte (record moves)
 *   7 END
 *
 * `index` is taken modulo the database's entry count. Returns the number
 * of operations applied, or -1 when the transaction failed (the caller
 * then skips the input).
 */
int fz_mutate_records(MDB_txn *txn, const MDB_dbi *dbs, unsigned ndbs, struct fz_in *in,
		      unsigned max_ops);

#endif
