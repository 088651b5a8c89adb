/*
 * Replay driver: feeds each file named on the command line (a directory:
 * each regular file in it, sorted) to LLVMFuzzerTestOneInput, as libFuzzer
 * would run one input. Lets the default suite, built with gcc and with the
 * sanitizers, run every target's corpus and regression inputs. A broken
 * property or a sanitizer report aborts: the file being run is printed
 * first. Each input has REPLAY_SECONDS: every one takes well under a
 * second, so one that runs longer (a damaged count looped over, gigabytes
 * allocated for a damaged size) is a bug, and SIGALRM fails the test at
 * once instead of the suite's timeout.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

#define REPLAY_SECONDS 10

static int run_file(const char *path)
{
	uint8_t *buf;
	size_t len;

	if (fz_read_file(path, &buf, &len)) {
		perror(path);
		return 1;
	}
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
	alarm(REPLAY_SECONDS);
	LLVMFuzzerTestOneInput(buf, len);
	alarm(0);
	free(buf);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	int bad = 0, n = 0;

	LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		struct dirent **ents;
		int k;

		if (stat(argv[i], &st)) {
			/* A target without regression inputs yet has no folder. */
			fprintf(stderr, "replay: %s: none\n", argv[i]);
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			bad |= run_file(argv[i]);
			n++;
			continue;
		}
		k = scandir(argv[i], &ents, NULL, by_name);
		for (int j = 0; j < k; j++) {
			char p[4096];
			snprintf(p, sizeof(p), "%s/%s", argv[i], ents[j]->d_name);
			if (ents[j]->d_name[0] != '.' && !stat(p, &st) && S_ISREG(st.st_mode)) {
				bad |= run_file(p);
				n++;
			}
			free(ents[j]);
		}
		if (k >= 0)
			free(ents);
	}
	fprintf(stderr, "replay: %d inputs%s\n", n, bad ? ", some unreadable" : ", all passed");
	return bad;
}
