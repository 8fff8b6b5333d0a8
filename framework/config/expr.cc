#include "framework/config/expr.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "framework/base/checked_math.h"
#include "framework/base/strings.h"
#include "framework/config/yaml_reader.h"

namespace spill {
namespace {

struct Number {
  bool is_int = true;
  int64_t i = 0;
  double d = 0;
  double AsDouble() const { return is_int ? static_cast<double>(i) : d; }
};

// An integer when the text is one (and fits in 64 bits), else a finite float.
// Digits alone that do not fit are an error, not a float.
bool ParseNumber(const std::string& text, Number* out) {
  auto i = ParseInt64(text);
  if (i.ok()) {
    out->is_int = true;
    out->i = *i;
    return true;
  }
  if (text.find_first_not_of("0123456789") == std::string::npos) return false;
  auto d = ParseFiniteDouble(text);
  if (!d.ok()) return false;
  out->is_int = false;
  out->d = *d;
  return true;
}

std::string NumberText(const Number& n) {
  if (n.is_int) return std::to_string(n.i);
  std::ostringstream out;
  out.precision(17);
  out << n.d;
  return out.str();
}

std::string KnownNames(const Variables& vars) {
  std::vector<std::string> names;
  for (const auto& [name, value] : vars) names.push_back(name);
  return names.empty() ? "(none)" : Join(names);
}

// Recursive descent over: expr := term (('+'|'-') term)*;
// term := unary (('*'|'/'|'%') unary)*; unary := '-' unary | primary;
// primary := number | identifier | '(' expr ')'.
class Parser {
 public:
  Parser(const std::string& text, const Variables& vars) : text_(text), vars_(vars) {}

  StatusOr<Number> Parse() {
    SPILL_ASSIGN_OR_RETURN(Number value, Expr());
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected '" + text_.substr(pos_) + "'");
    return value;
  }

 private:
  Status Error(const std::string& what) const {
    constexpr size_t kShown = 60;  // long expressions are cut in messages
    const std::string shown = text_.size() > kShown ? text_.substr(0, kShown) + "..." : text_;
    return InvalidArgument("in expression '${" + shown + "}': " + what);
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Accept(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  StatusOr<Number> Expr() {
    SPILL_ASSIGN_OR_RETURN(Number left, Term());
    for (;;) {
      char op = 0;
      if (Accept('+'))
        op = '+';
      else if (Accept('-'))
        op = '-';
      else
        return left;
      SPILL_ASSIGN_OR_RETURN(Number right, Term());
      SPILL_ASSIGN_OR_RETURN(left, Apply(op, left, right));
    }
  }

  StatusOr<Number> Term() {
    SPILL_ASSIGN_OR_RETURN(Number left, Unary());
    for (;;) {
      char op = 0;
      if (Accept('*'))
        op = '*';
      else if (Accept('/'))
        op = '/';
      else if (Accept('%'))
        op = '%';
      else
        return left;
      SPILL_ASSIGN_OR_RETURN(Number right, Unary());
      if ((op == '/' || op == '%') && right.AsDouble() == 0) return Error("division by zero");
      if (op == '%' && !(left.is_int && right.is_int)) return Error("'%' needs integers");
      SPILL_ASSIGN_OR_RETURN(left, Apply(op, left, right));
    }
  }

  // Counts one level of nesting for the duration of a recursive call.
  struct Nest {
    explicit Nest(int* depth) : depth_(depth) { ++*depth_; }
    ~Nest() { --*depth_; }
    int* depth_;
  };

  StatusOr<Number> Unary() {
    if (Accept('-')) {
      Nest nest(&depth_);
      if (depth_ > kMaxExpressionDepth) return TooDeep();
      SPILL_ASSIGN_OR_RETURN(Number value, Unary());
      if (value.is_int) {
        if (!CheckedSub<int64_t>(0, value.i, &value.i)) return Error("integer overflow");
      } else {
        value.d = -value.d;
      }
      return value;
    }
    return Primary();
  }

  Status TooDeep() const {
    return Error("nested deeper than " + std::to_string(kMaxExpressionDepth) + " levels");
  }

  StatusOr<Number> Primary() {
    SkipSpace();
    if (Accept('(')) {
      Nest nest(&depth_);
      if (depth_ > kMaxExpressionDepth) return TooDeep();
      SPILL_ASSIGN_OR_RETURN(Number value, Expr());
      if (!Accept(')')) return Error("missing ')'");
      return value;
    }
    size_t start = pos_;
    if (pos_ < text_.size() &&
        (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.')) {
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.')) {
        ++pos_;
      }
      Number n;
      if (!ParseNumber(text_.substr(start, pos_ - start), &n)) {
        return Error("bad number '" + text_.substr(start, pos_ - start) + "'");
      }
      return n;
    }
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      ++pos_;
    }
    if (start == pos_) return Error("expected a number, a parameter or '('");
    std::string name = text_.substr(start, pos_ - start);
    auto it = vars_.find(name);
    if (it == vars_.end()) {
      return Error("unknown parameter '" + name + "'; known: " + KnownNames(vars_));
    }
    Number n;
    if (!it->second.IsScalar() || !ParseNumber(it->second.Scalar(), &n)) {
      return Error("parameter '" + name + "' is not a number");
    }
    return n;
  }

  // Division by zero is caught by the caller; everything else here.
  StatusOr<Number> Apply(char op, Number a, Number b) const {
    Number r;
    if (a.is_int && b.is_int) {  // integer arithmetic, division as in C
      r.is_int = true;
      bool fits = true;
      switch (op) {
        case '+':
          fits = CheckedAdd(a.i, b.i, &r.i);
          break;
        case '-':
          fits = CheckedSub(a.i, b.i, &r.i);
          break;
        case '*':
          fits = CheckedMul(a.i, b.i, &r.i);
          break;
        case '/':
        case '%':
          // INT64_MIN / -1 is the one quotient that does not fit (and traps).
          fits = !(a.i == INT64_MIN && b.i == -1);
          if (fits) r.i = op == '/' ? a.i / b.i : a.i % b.i;
          break;
      }
      if (!fits) return Error("integer overflow");
      return r;
    }
    r.is_int = false;
    double x = a.AsDouble(), y = b.AsDouble();
    switch (op) {
      case '+':
        r.d = x + y;
        break;
      case '-':
        r.d = x - y;
        break;
      case '*':
        r.d = x * y;
        break;
      case '/':
        r.d = x / y;
        break;
      case '%':
        r.d = std::fmod(x, y);
        break;
    }
    if (!std::isfinite(r.d)) return Error("the result is not a finite number");
    return r;
  }

  const std::string& text_;
  const Variables& vars_;
  size_t pos_ = 0;
  int depth_ = 0;
};

bool IsIdentifier(const std::string& text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

StatusOr<YAML::Node> LookUp(const std::string& name, const Variables& vars) {
  auto it = vars.find(name);
  if (it == vars.end()) {
    return InvalidArgument("unknown parameter '$" + name + "'; known: " + KnownNames(vars));
  }
  if (!it->second.IsDefined() || it->second.IsNull()) {
    return InvalidArgument("parameter '" + name +
                           "' has no value (a required argument was not given)");
  }
  return YAML::Clone(it->second);
}

// Text of `${body}`: a lone parameter gives its scalar text, otherwise arithmetic.
StatusOr<std::string> ExpandBraces(const std::string& body, const Variables& vars) {
  std::string trimmed = body;
  trimmed.erase(0, trimmed.find_first_not_of(" \t"));
  trimmed.erase(trimmed.find_last_not_of(" \t") + 1);
  if (IsIdentifier(trimmed)) {
    SPILL_ASSIGN_OR_RETURN(YAML::Node value, LookUp(trimmed, vars));
    if (!value.IsScalar()) return InvalidArgument("parameter '" + trimmed + "' is not a scalar");
    return value.Scalar();
  }
  return EvaluateExpression(trimmed, vars);
}

StatusOr<YAML::Node> SubstituteScalar(const YAML::Node& node, const Variables& vars) {
  const std::string& text = node.Scalar();
  if (text.size() > 1 && text[0] == '$' && text[1] != '{') {
    return LookUp(text.substr(1), vars);
  }
  if (text.find("${") == std::string::npos) return YAML::Clone(node);
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find("${", pos);
    if (open == std::string::npos) {
      out += text.substr(pos);
      break;
    }
    size_t close = text.find('}', open);
    if (close == std::string::npos) return InvalidArgument("unclosed '${' in '" + text + "'");
    out += text.substr(pos, open - pos);
    SPILL_ASSIGN_OR_RETURN(std::string part,
                           ExpandBraces(text.substr(open + 2, close - open - 2), vars));
    out += part;
    pos = close + 1;
  }
  return YAML::Node(out);
}

}  // namespace

void SetVariable(Variables* vars, const std::string& name, const YAML::Node& value) {
  auto it = vars->find(name);
  if (it == vars->end()) {
    vars->emplace(name, value);
  } else {
    it->second.reset(value);
  }
}

StatusOr<std::string> EvaluateExpression(const std::string& expr, const Variables& vars) {
  Parser parser(expr, vars);
  SPILL_ASSIGN_OR_RETURN(Number value, parser.Parse());
  return NumberText(value);
}

StatusOr<YAML::Node> Substitute(const YAML::Node& node, const Variables& vars) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return SubstituteScalar(node, vars);
    case YAML::NodeType::Sequence: {
      YAML::Node out(YAML::NodeType::Sequence);
      for (const auto& item : node) {
        SPILL_ASSIGN_OR_RETURN(YAML::Node value, Substitute(item, vars));
        out.push_back(value);
      }
      return out;
    }
    case YAML::NodeType::Map: {
      YAML::Node out(YAML::NodeType::Map);
      for (const auto& item : node) {
        SPILL_ASSIGN_OR_RETURN(YAML::Node value, Substitute(item.second, vars));
        out[item.first.Scalar()] = value;
      }
      return out;
    }
    default:
      return YAML::Clone(node);
  }
}

}  // namespace spill
