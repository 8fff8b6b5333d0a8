// Status and StatusOr: the error tier for user and configuration errors and
// for recoverable runtime conditions such as running out of device memory.
//
// Internal invariants use the CHECK macros in check.h instead; nothing that a
// user can cause (a bad YAML file, a missing dataset, a budget that is too
// small) ever aborts the process.
#ifndef SPILL_FRAMEWORK_BASE_STATUS_H_
#define SPILL_FRAMEWORK_BASE_STATUS_H_

#include <optional>
#include <string>
#include <utility>

#include "framework/base/check.h"

namespace spill {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad configuration or input: names file, line, field
  kNotFound,         // a file or a name that does not exist
  kOutOfMemory,      // a pool could not satisfy a request; recoverable
  kIoError,          // reading or writing a file failed
  kInternal,
  kUnimplemented,
  kCancelled,  // interrupted by the user (Ctrl-C)
};

const char* StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgument(std::string message);
Status NotFound(std::string message);
Status OutOfMemory(std::string message);
Status IoError(std::string message);
Status Internal(std::string message);
Status Unimplemented(std::string message);
Status Cancelled(std::string message);

template <typename T>
class StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) {  // NOLINT: implicit by design
    SPILL_CHECK(!status.ok()) << "StatusOr built from an OK status without a value";
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    SPILL_CHECK(ok()) << status_.ToString();
    return *value_;
  }
  const T& value() const& {
    SPILL_CHECK(ok()) << status_.ToString();
    return *value_;
  }
  T&& value() && {
    SPILL_CHECK(ok()) << status_.ToString();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace spill

#define SPILL_STATUS_CONCAT_INNER(a, b) a##b
#define SPILL_STATUS_CONCAT(a, b) SPILL_STATUS_CONCAT_INNER(a, b)

#define SPILL_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::spill::Status spill_status_ = (expr);        \
    if (!spill_status_.ok()) return spill_status_; \
  } while (0)

#define SPILL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

// Declares or assigns `lhs`: use it as a statement of its own, in braces
// after an `if`.
#define SPILL_ASSIGN_OR_RETURN(lhs, expr) \
  SPILL_ASSIGN_OR_RETURN_IMPL(SPILL_STATUS_CONCAT(spill_statusor_, __LINE__), lhs, expr)

#endif  // SPILL_FRAMEWORK_BASE_STATUS_H_
