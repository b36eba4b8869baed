// Placeholder replaced once golden data exists (see tools/make_golden.py).
#include <gtest/gtest.h>
