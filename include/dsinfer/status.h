// Status and StatusOr<T>: the error channel for anything a user or a file can cause (bad request,
// bad checkpoint, prompt too long) — part of the public embedding API and the error type of every
// layer of src/ (as LevelDB's include/leveldb/status.h); base/status.h adds the helper macros.
// Our own bugs use DSINFER_CHECK (src/base/check.h) instead. Value types; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace dsinfer {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller passed something malformed (bad flag, bad JSON, bad id)
  kNotFound,           // a file, tensor or key that must exist does not
  kDataLoss,           // a file exists but its bytes are damaged or inconsistent
  kOutOfRange,         // a value is outside what the model supports (prompt longer than context)
  kUnimplemented,      // a valid input we do not support yet
  kResourceExhausted,  // out of memory / state budget
  kInternal,           // an unexpected failure of a system call or library
  kCancelled,          // the request was aborted
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message" (or "OK").
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace dsinfer
