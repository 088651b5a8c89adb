/* SPDX-License-Identifier: MIT */
/* libmfsq unit tests (Check). Argument: the suite to run (default all). */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

static const struct {
	const char *name;
	Suite *(*make)(void);
} suites[] = {
    {"api", suite_api},	      {"delay", suite_delay},	{"cache", suite_cache},
    {"sizing", suite_sizing}, {"multi", suite_multi},	{"rule", suite_rule},
    {"wake", suite_wake},     {"acklog", suite_acklog}, {"enqlog", suite_enqlog},
    {"damage", suite_damage},
};

int main(int argc, char **argv)
{
	SRunner *sr = NULL;
	int failed;

	for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++) {
		if (argc > 1 && strcmp(argv[1], suites[i].name))
			continue;
		if (!sr)
			sr = srunner_create(suites[i].make());
		else
			srunner_add_suite(sr, suites[i].make());
	}
	if (!sr)
		return EXIT_FAILURE;
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
