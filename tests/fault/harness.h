/* Helpers that the fault tests share (harness.c). */
#ifndef FAULT_HARNESS_H
#define FAULT_HARNESS_H

/* perror(what), then exit 2: the test itself could not go on. */
void fault_die(const char *what);

/* Run `fsck` (dbfs-fsck) --allow-orphans on store directory `dir`, its
 * output to /dev/null unless FAULT_VERBOSE is set; its exit status, 128
 * when it did not exit. */
int fault_fsck(const char *fsck, const char *dir);

/* The step between two fault points N: FAULT_STRIDE from the environment
 * (a whole number >= 1), 1 when unset. The default suite's plain build runs
 * every 4th point (N = 1, 5, 9, ...) and its sanitizer build every point
 * (tests/fault/meson.build); the slow -full runs take every point. Exits 2
 * on a malformed value. */
long fault_stride(void);

/* "" or " (every Kth point)": for the tests' summary lines. */
const char *fault_stride_note(void);

#endif
