// A small JSON reader for tests that check files the tools write (traces):
// parses the whole grammar (objects, arrays, strings with escapes, numbers,
// true, false, null) into a tree, and fails on anything else.
#ifndef SPILL_TESTS_TESTING_JSON_READER_H_
#define SPILL_TESTS_TESTING_JSON_READER_H_

#include <cctype>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace spill {
namespace testing {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;

  bool Has(const std::string& key) const { return object.count(key) > 0; }
  const JsonValue& operator[](const std::string& key) const { return object.at(key); }
};

class JsonReader {
 public:
  // False (with `error` set) unless `text` is one JSON value.
  static bool Parse(const std::string& text, JsonValue* value, std::string* error) {
    JsonReader reader(text);
    if (!reader.Value(value) || (reader.Skip(), reader.pos_ != text.size())) {
      *error = "invalid JSON at offset " + std::to_string(reader.pos_);
      return false;
    }
    return true;
  }

 private:
  explicit JsonReader(const std::string& text) : text_(text) {}

  void Skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Literal(const char* word) {
    const std::string w = word;
    if (text_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }
  bool String(std::string* out) {
    if (text_[pos_] != '"') return false;
    for (++pos_; pos_ < text_.size(); ++pos_) {
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (++pos_ >= text_.size()) return false;
      const char e = text_[pos_];
      if (e == 'u') {
        if (pos_ + 4 >= text_.size()) return false;
        *out += static_cast<char>(std::strtol(text_.substr(pos_ + 1, 4).c_str(), nullptr, 16));
        pos_ += 4;
      } else if (std::string("\"\\/bfnrt").find(e) != std::string::npos) {
        *out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        return false;
      }
    }
    return false;
  }
  bool Number(double* out) {
    const char* begin = text_.c_str() + pos_;
    char* end = nullptr;
    *out = std::strtod(begin, &end);
    if (end == begin || !(std::isdigit(static_cast<unsigned char>(*begin)) || *begin == '-')) {
      return false;
    }
    pos_ += end - begin;
    return true;
  }
  bool Value(JsonValue* v) {
    Skip();
    if (pos_ >= text_.size()) return false;
    const char c = text_[pos_];
    if (c == '{') return Object(v);
    if (c == '[') return Array(v);
    if (c == '"') return v->kind = JsonValue::Kind::kString, String(&v->string);
    if (Literal("true")) return v->kind = JsonValue::Kind::kBool, v->boolean = true;
    if (Literal("false")) return v->kind = JsonValue::Kind::kBool, true;
    if (Literal("null")) return true;
    v->kind = JsonValue::Kind::kNumber;
    return Number(&v->number);
  }
  bool Array(JsonValue* v) {
    v->kind = JsonValue::Kind::kArray;
    ++pos_;
    Skip();
    if (pos_ < text_.size() && text_[pos_] == ']') return ++pos_, true;
    for (;;) {
      v->array.emplace_back();
      if (!Value(&v->array.back())) return false;
      Skip();
      if (pos_ >= text_.size()) return false;
      if (text_[pos_++] == ']') return true;
      if (text_[pos_ - 1] != ',') return false;
    }
  }
  bool Object(JsonValue* v) {
    v->kind = JsonValue::Kind::kObject;
    ++pos_;
    Skip();
    if (pos_ < text_.size() && text_[pos_] == '}') return ++pos_, true;
    for (;;) {
      Skip();
      std::string key;
      if (pos_ >= text_.size() || !String(&key)) return false;
      Skip();
      if (pos_ >= text_.size() || text_[pos_++] != ':') return false;
      if (!Value(&v->object[key])) return false;
      Skip();
      if (pos_ >= text_.size()) return false;
      if (text_[pos_++] == '}') return true;
      if (text_[pos_ - 1] != ',') return false;
    }
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace testing
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_JSON_READER_H_
