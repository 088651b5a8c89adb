/* SPDX-License-Identifier: MIT */
#include "helpers.h"

Suite *suite_multi(void)
{
	return suite_create("multi");
}
