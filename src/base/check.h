// DSINFER_CHECK: invariants of our own code. A failure is a bug in dsinfer, never the user's input,
// so it aborts with file:line. User-caused failures go through Status (status.h).
#pragma once

#include <cstdio>
#include <cstdlib>

#define DSINFER_CHECK(cond)                                                              \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: DSINFER_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

#define DSINFER_CHECK_MSG(cond, msg)                                                     \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: DSINFER_CHECK failed: %s (%s)\n", __FILE__, __LINE__, \
                   #cond, msg);                                                          \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
