/* Runs every mfs unit suite. */
#include <stdlib.h>

#include "suites.h"

int main(void)
{
	SRunner *sr = srunner_create(mfs_kv_suite());

	srunner_add_suite(sr, mfs_governor_suite());
	srunner_add_suite(sr, mfs_conf_suite());
	srunner_add_suite(sr, mfs_registry_suite());
	srunner_add_suite(sr, mfs_path_suite());
	srunner_add_suite(sr, mfs_loop_suite());
	srunner_add_suite(sr, mfs_sticky_suite());
	srunner_add_suite(sr, mfs_overlap_suite());
	srunner_add_suite(sr, mfs_parse_suite());
	srunner_add_suite(sr, mfs_feed_line_suite());
	srunner_add_suite(sr, mfs_feed_spec_suite());
	srunner_add_suite(sr, mfs_usage_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
