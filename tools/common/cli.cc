#include "tools/common/cli.h"

#include <cstdio>
#include <exception>
#include <new>

#include "framework/base/files.h"
#include "framework/base/strings.h"
#include "framework/base/units.h"
#include "framework/config/yaml_reader.h"
#include "framework/device/device_registry.h"

namespace spill {
namespace {

// A CLI11 check from one of spill's parse functions: the error message of a
// failed status becomes the flag's error.
// (The validator has no description of its own: the type name and the help
// text say what is expected.)
template <typename Parse>
CLI::Validator Checked(const Parse& parse) {
  return CLI::Validator(
      [parse](std::string& value) -> std::string {
        Status status = parse(value);
        return status.ok() ? std::string() : status.message();
      },
      "");
}

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.10g", value);
  return text;
}

}  // namespace

int RunTool(const char* tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of host memory\n", tool);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: unexpected error: %s\n", tool, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: unexpected error\n", tool);
  }
  return 1;
}

int ReportStatus(const char* tool, const Status& status, int code) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", tool, status.message().c_str());
  return code;
}

Flags::Flags(const std::string& tool, const std::string& description)
    : tool_(tool), app_(description, tool) {
  app_.get_formatter()->column_width(30);
}

int Flags::Parse(int argc, char** argv) {
  try {
    app_.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app_.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for the options.\n", tool_.c_str(), e.what(),
                 tool_.c_str());
    return 2;
  }
  const Status distinct = CheckDistinctFiles(InputFiles(), OutputFiles());
  if (!distinct.ok()) {
    std::fprintf(stderr, "%s: %s\n", tool_.c_str(), distinct.message().c_str());
    return 2;
  }
  return -1;
}

std::vector<NamedFile> Flags::InputFiles() const {
  std::vector<NamedFile> files;
  for (const auto& [name, value] : inputs_) files.push_back({name, *value});
  return files;
}

std::vector<NamedFile> Flags::OutputFiles() const {
  std::vector<NamedFile> files;
  for (const auto& [name, value] : outputs_) files.push_back({name, *value});
  return files;
}

CLI::Option* Flags::Int(const std::string& name, int64_t* out, const std::string& help, int64_t min,
                        int64_t max) {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return app_.add_option(name, *out, help + " " + range)
      ->check(Checked([range, min, max](const std::string& text) {
        auto value = ParseInt64(text);
        if (value.ok() && *value >= min && *value <= max) return Status::Ok();
        return InvalidArgument("'" + text + "' is not an integer in " + range);
      }))
      ->type_name("INT");
}

CLI::Option* Flags::Float(const std::string& name, double* out, const std::string& help, double min,
                          double max) {
  const std::string range = "[" + Number(min) + ", " + Number(max) + "]";
  return app_.add_option(name, *out, help + " " + range)
      ->check(Checked([range, min, max](const std::string& text) {
        auto value = ParseFiniteDouble(text);
        if (value.ok() && *value >= min && *value <= max) return Status::Ok();
        return InvalidArgument("'" + text + "' is not a number in " + range);
      }))
      ->type_name("NUMBER");
}

CLI::Option* Flags::Flag(const std::string& name, bool* out, const std::string& help) {
  return app_.add_flag(name, *out, help);
}

CLI::Option* Flags::String(const std::string& name, std::string* out, const std::string& help) {
  return app_.add_option(name, *out, help);
}

CLI::Option* Flags::List(const std::string& name, std::vector<std::string>* out,
                         const std::string& help) {
  return app_.add_option(name, *out, help)->delimiter(',')->type_name("LIST");
}

CLI::Option* Flags::FloatList(const std::string& name, std::vector<double>* out,
                              const std::string& help, double min, double max) {
  const std::string range = "[" + Number(min) + ", " + Number(max) + "]";
  return app_.add_option(name, *out, help + ", each in " + range)
      ->delimiter(',')
      ->check(Checked([range, min, max](const std::string& text) {
        auto value = ParseFiniteDouble(text);
        if (value.ok() && *value >= min && *value <= max) return Status::Ok();
        return InvalidArgument("'" + text + "' is not a number in " + range);
      }))
      ->type_name("LIST");
}

namespace {

// A byte size within [min, max], or a CLI11 validation error naming `flag`.
size_t CheckedBytes(const std::string& flag, const std::string& text, size_t min, size_t max) {
  auto bytes = ParseBytes(text);
  if (!bytes.ok()) throw CLI::ValidationError(flag, bytes.status().message());
  if (*bytes < min || *bytes > max) {
    throw CLI::ValidationError(flag, "'" + text + "' is outside [" +
                                         FormatBytes(static_cast<double>(min)) + ", " +
                                         FormatBytes(static_cast<double>(max)) + "]");
  }
  return *bytes;
}

}  // namespace

CLI::Option* Flags::Bytes(const std::string& name, size_t* out, const std::string& help, size_t min,
                          size_t max) {
  return app_
      .add_option_function<std::string>(
          name,
          [name, out, min, max](const std::string& text) {
            *out = CheckedBytes(name, text, min, max);
          },
          help)
      ->type_name("SIZE");
}

CLI::Option* Flags::BytesList(const std::string& name, std::vector<size_t>* out,
                              const std::string& help, size_t min, size_t max) {
  return app_
      .add_option_function<std::vector<std::string>>(
          name,
          [name, out, min, max](const std::vector<std::string>& texts) {
            out->clear();
            for (const std::string& text : texts)
              out->push_back(CheckedBytes(name, text, min, max));
          },
          help)
      ->delimiter(',')
      ->type_name("SIZES");
}

CLI::Option* Flags::Choice(const std::string& name, std::string* out, const std::string& help,
                           const std::vector<std::string>& choices) {
  return app_.add_option(name, *out, help + " (" + Join(choices) + ")")
      ->check(Checked([choices](const std::string& value) {
        for (const auto& c : choices) {
          if (c == value) return Status::Ok();
        }
        return InvalidArgument("'" + value + "' is not one of: " + Join(choices));
      }))
      ->type_name("NAME");
}

CLI::Option* Flags::InputFile(const std::string& name, std::string* out, const std::string& help) {
  inputs_.push_back({name, out});
  return app_.add_option(name, *out, help)
      ->check(Checked([](const std::string& path) { return CheckRegularFile(path, ""); }))
      ->type_name("FILE");
}

CLI::Option* Flags::OutputFile(const std::string& name, std::string* out, const std::string& help) {
  outputs_.push_back({name, out});
  return app_.add_option(name, *out, help)
      ->check(Checked([](const std::string& path) { return CheckOutputFile(path, ""); }))
      ->type_name("FILE");
}

CLI::Option* Flags::Device(std::string* out, const std::string& help) {
  return app_.add_option("--device", *out, help + " (cpu, cuda)")
      ->check(Checked([](const std::string& text) { return DeviceTypeByName(text).status(); }))
      ->type_name("NAME");
}

CLI::Option* Flags::Set(ParamOverrides* out) {
  return app_
      .add_option_function<std::vector<std::string>>(
          "--set",
          [out](const std::vector<std::string>& items) {
            for (const std::string& item : items) {
              const size_t eq = item.find('=');
              if (eq == std::string::npos || eq == 0) {
                throw CLI::ValidationError("--set", "'" + item + "' is not KEY=VALUE");
              }
              const std::string key = item.substr(0, eq);
              auto value = LoadYamlText(item.substr(eq + 1), "--set " + key);
              if (!value.ok()) throw CLI::ValidationError(value.status().message());
              // Replace, not assign: assigning to a YAML::Node rewrites the
              // node it refers to.
              out->erase(key);
              out->emplace(key, *value);
            }
          },
          "set a model parameter, e.g. --set size=224 (repeatable; VALUE is YAML)")
      ->type_name("KEY=VALUE")
      ->take_all();
}

}  // namespace spill
