// CHECK macros for internal invariants. A failed check prints the condition,
// the file and line, and any streamed context, then aborts. They are never
// used for conditions a user can cause; those return a Status.
#ifndef SPILL_FRAMEWORK_BASE_CHECK_H_
#define SPILL_FRAMEWORK_BASE_CHECK_H_

#include <sstream>
#include <string>

namespace spill {
namespace internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `SPILL_CHECK(x) << ...` compile to nothing when x holds.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace internal
}  // namespace spill

#define SPILL_CHECK(condition)                 \
  (condition) ? (void)0                        \
              : ::spill::internal::Voidify() & \
                    ::spill::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#define SPILL_CHECK_OP(a, op, b)                                                                   \
  ((a)op(b)) ? (void)0                                                                             \
             : ::spill::internal::Voidify() &                                                      \
                   ::spill::internal::CheckFailure(__FILE__, __LINE__, #a " " #op " " #b).stream() \
                       << "(" << (a) << " vs " << (b) << ") "

#define SPILL_CHECK_EQ(a, b) SPILL_CHECK_OP(a, ==, b)
#define SPILL_CHECK_NE(a, b) SPILL_CHECK_OP(a, !=, b)
#define SPILL_CHECK_LT(a, b) SPILL_CHECK_OP(a, <, b)
#define SPILL_CHECK_LE(a, b) SPILL_CHECK_OP(a, <=, b)
#define SPILL_CHECK_GT(a, b) SPILL_CHECK_OP(a, >, b)
#define SPILL_CHECK_GE(a, b) SPILL_CHECK_OP(a, >=, b)

#endif  // SPILL_FRAMEWORK_BASE_CHECK_H_
