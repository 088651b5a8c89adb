/* Helpers that the fault tests share (harness.h). */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

extern char **environ;

void fault_die(const char *what)
{
	perror(what);
	exit(2);
}

int fault_fsck(const char *fsck, const char *dir)
{
	posix_spawn_file_actions_t fa;
	const char *argv[] = {fsck, "--allow-orphans", dir, NULL};
	pid_t pid;
	int st;
	posix_spawn_file_actions_init(&fa);
	if (!getenv("FAULT_VERBOSE"))
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (posix_spawn(&pid, fsck, &fa, NULL, (char **)argv, environ))
		fault_die(fsck);
	posix_spawn_file_actions_destroy(&fa);
	if (waitpid(pid, &st, 0) < 0)
		fault_die("waitpid");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

long fault_stride(void)
{
	static long stride;
	if (!stride) {
		const char *v = getenv("FAULT_STRIDE");
		char *end;
		long k = v && *v ? strtol(v, &end, 10) : 1;
		if (v && *v && (*end || k < 1)) {
			fprintf(stderr, "FAULT_STRIDE=%s: not a whole number >= 1\n", v);
			exit(2);
		}
		stride = k;
	}
	return stride;
}

const char *fault_stride_note(void)
{
	static char note[40];
	if (fault_stride() > 1 && !note[0])
		snprintf(note, sizeof(note), " (every %ldth point)", fault_stride());
	return note;
}
