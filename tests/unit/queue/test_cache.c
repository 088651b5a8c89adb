/* SPDX-License-Identifier: MIT */
#include "helpers.h"

Suite *suite_cache(void)
{
	return suite_create("cache");
}
