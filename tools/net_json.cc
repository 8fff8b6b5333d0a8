#include "tools/net_json.h"

#include <cstdlib>
#include <sstream>

namespace spill {
namespace {

std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

bool IsNumber(const std::string& text) {
  if (text.empty()) return false;
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return *end == '\0';
}

void Emit(const YAML::Node& node, std::ostringstream& out) {
  if (node.IsMap()) {
    out << "{";
    bool first = true;
    for (const auto& item : node) {
      out << (first ? "" : ",") << Quote(item.first.Scalar()) << ":";
      Emit(item.second, out);
      first = false;
    }
    out << "}";
  } else if (node.IsSequence()) {
    out << "[";
    for (size_t i = 0; i < node.size(); ++i) {
      if (i) out << ",";
      Emit(node[i], out);
    }
    out << "]";
  } else if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (s == "true" || s == "false")
      out << s;
    else if (IsNumber(s))
      out << s;
    else
      out << Quote(s);
  } else {
    out << "null";
  }
}

std::string ShapeJson(const Shape& s) {
  return "[" + std::to_string(s.n()) + "," + std::to_string(s.c()) + "," + std::to_string(s.h()) +
         "," + std::to_string(s.w()) + "]";
}

}  // namespace

std::string NetToJson(const Net& net) {
  std::ostringstream out;
  const Schedule& s = net.schedule();
  out << "{\"name\":" << Quote(net.name()) << ",\"batch\":" << net.batch() << ",\"layers\":[";
  for (size_t k = 0; k < s.route.size(); ++k) {
    const int id = s.route[k];
    const LayerDecl& d = net.decl(id);
    out << (k ? ",\n" : "\n") << "{\"name\":" << Quote(d.name)
        << ",\"type\":" << Quote(net.layer(id).type()) << ",\"params\":";
    Emit(net.spec(id).params, out);
    out << ",\"inputs\":[";
    for (size_t i = 0; i < d.inputs.size(); ++i) {
      out << (i ? "," : "") << "[" << Quote(net.decl(d.inputs[i].layer).name) << ","
          << d.inputs[i].output << "]";
    }
    out << "],\"outputs\":[";
    for (size_t i = 0; i < d.output_shapes.size(); ++i)
      out << (i ? "," : "") << ShapeJson(d.output_shapes[i]);
    out << "],\"tensors\":[";
    for (size_t p = 0; p < d.params.size(); ++p) {
      out << (p ? "," : "") << "{\"name\":" << Quote(s.tensors[s.layers[id].params[p]].name)
          << ",\"shape\":" << ShapeJson(d.params[p].shape)
          << ",\"trainable\":" << (d.params[p].trainable ? "true" : "false")
          << ",\"decay_mult\":" << d.params[p].decay_mult << "}";
    }
    out << "]}";
  }
  out << "\n]}\n";
  return out.str();
}

}  // namespace spill
