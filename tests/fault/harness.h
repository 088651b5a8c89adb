/* Helpers that the fault tests share (harness.c). */
#ifndef FAULT_HARNESS_H
#define FAULT_HARNESS_H

/* perror(what), then exit 2: the test itself could not go on. */
void fault_die(const char *what);

/* Run `fsck` (dbfs-fsck) --allow-orphans on store directory `dir`, its
 * output to /dev/null unless FAULT_VERBOSE is set; its exit status, 128
 * when it did not exit. */
int fault_fsck(const char *fsck, const char *dir);

#endif
