/* SPDX-License-Identifier: MIT */
#include "helpers.h"

Suite *suite_sizing(void)
{
	return suite_create("sizing");
}
