/*
 * Known bugs in product code that the fuzz targets step around until they
 * are fixed (tests/fuzz/README.md "Known bugs"). Each filter skips the
 * inputs that reach the bug, so that a run looks for other bugs instead of
 * finding this one again; MFS_FUZZ_KNOWN=1 turns the filters off (the
 * tests fuzz-known-* run the bug's input that way and are expected to fail).
 * When a bug is fixed: delete its filter, move its input from known/ to
 * regress/, drop its row from fuzz_known in meson.build.
 *
 * None is open now (README "Known bugs" lists the fixed ones): the header
 * stays as the place for the next filter.
 */
#ifndef MFS_FUZZ_KNOWN_H
#define MFS_FUZZ_KNOWN_H

#include <string.h>

#include "fuzz.h"
#include "mfs/kv.h"

#endif
