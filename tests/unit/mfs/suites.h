/* The Check suites of the mfs unit tests (one per source file). */
#ifndef MFS_TEST_SUITES_H
#define MFS_TEST_SUITES_H

#include <check.h>

Suite *mfs_kv_suite(void);
Suite *mfs_governor_suite(void);
Suite *mfs_conf_suite(void);
Suite *mfs_registry_suite(void);
Suite *mfs_path_suite(void);
Suite *mfs_loop_suite(void);
Suite *mfs_sticky_suite(void);
Suite *mfs_overlap_suite(void);
Suite *mfs_parse_suite(void);
Suite *mfs_feed_line_suite(void);
Suite *mfs_feed_spec_suite(void);
Suite *mfs_usage_suite(void);

#endif
