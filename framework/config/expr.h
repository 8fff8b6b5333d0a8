// Substitution of parameters into YAML values: `$name`, `${expr}` and
// interpolation of `${...}` inside strings. Expressions are integer or
// floating arithmetic over parameters: + - * / % and parentheses. A lone
// `${name}` yields the parameter's text unchanged, so strings substitute too.
//
// Arithmetic is checked: integer overflow (INT64_MIN / -1 included), division
// by zero and non-finite floating results are errors, and parentheses and
// unary minus nest at most kMaxExpressionDepth deep, so no expression can
// trap or exhaust the stack.
#ifndef SPILL_FRAMEWORK_CONFIG_EXPR_H_
#define SPILL_FRAMEWORK_CONFIG_EXPR_H_

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>

#include "framework/base/status.h"

namespace spill {

using Variables = std::map<std::string, YAML::Node>;

constexpr int kMaxExpressionDepth = 64;

// Binds `name` to `value`. (Assigning to an existing YAML::Node would write
// through to every node sharing it: yaml-cpp nodes are references.)
void SetVariable(Variables* vars, const std::string& name, const YAML::Node& value);

// Evaluates an arithmetic expression; integers stay integers unless a float
// takes part. Returns the result as text ("12", "0.5").
StatusOr<std::string> EvaluateExpression(const std::string& expr, const Variables& vars);

// Returns a deep copy of `node` with every `$name` and `${...}` replaced.
StatusOr<YAML::Node> Substitute(const YAML::Node& node, const Variables& vars);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_CONFIG_EXPR_H_
