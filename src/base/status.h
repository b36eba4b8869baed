// The error channel of src/: Status / StatusOr<T> (include/dsinfer/status.h, the public API's
// own type) and the helper macros that return them. Our own bugs use DSINFER_CHECK (check.h).
#pragma once

#include "dsinfer/status.h"

#define DSINFER_CONCAT_INNER(a, b) a##b
#define DSINFER_CONCAT(a, b) DSINFER_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define DSINFER_RETURN_IF_ERROR(expr)            \
  do {                                           \
    ::dsinfer::Status _dsinfer_st = (expr);      \
    if (!_dsinfer_st.ok()) return _dsinfer_st;   \
  } while (0)

// `DSINFER_ASSIGN_OR_RETURN(auto x, MakeX());`
#define DSINFER_ASSIGN_OR_RETURN(lhs, expr) \
  DSINFER_ASSIGN_OR_RETURN_IMPL(DSINFER_CONCAT(_dsinfer_so_, __LINE__), lhs, expr)
#define DSINFER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
