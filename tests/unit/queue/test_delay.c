/* SPDX-License-Identifier: MIT */
#include "helpers.h"

Suite *suite_delay(void)
{
	return suite_create("delay");
}
