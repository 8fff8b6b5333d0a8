// Command-line flags of every tool, on CLI11. A flag is one declaration that
// gives its name, its type, its range and its --help line; the parser turns
// anything else into an error that names the flag and the expected form:
//
//   plan: --batch: Value 32abc could not be converted ... ; run 'plan --help' for the options
//   plan: --batch: Value 2147483648 not in range [1 - 1048576]
//
// Values that spill parses itself (sizes such as 12GiB, memory modes,
// workspace policies, devices, --set KEY=VALUE) are parsed and checked here,
// once, by the same functions the YAML configs use. Output files are checked
// when the flags are parsed, so a report or plot into a missing folder fails
// before any work is done.
//
// Each tool keeps its options in one struct and declares each field in one
// line; RunTool wraps its main so that no exception ever ends a tool with an
// abort: the real errors are Status values, this is the last line of defence.
#ifndef SPILL_TOOLS_COMMON_CLI_H_
#define SPILL_TOOLS_COMMON_CLI_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>

#include "framework/base/files.h"
#include "framework/base/status.h"
#include "framework/config/net_spec.h"
#include "memory/memory_options.h"

namespace spill {

// Runs `body` and returns its exit code; an escaping exception prints
// "<tool>: ..." and returns 1.
int RunTool(const char* tool, const std::function<int()>& body);

// Prints "<tool>: <message>" for a failed status; returns `code` (0 when ok).
int ReportStatus(const char* tool, const Status& status, int code = 1);

class Flags {
 public:
  Flags(const std::string& tool, const std::string& description);

  CLI::App& app() { return app_; }
  const std::string& tool() const { return tool_; }

  // Parses argv. Returns -1 when the tool goes on, otherwise the exit code:
  // 0 after printing --help, 2 after printing an error (also when an output
  // file flag names an input file flag's file or another output's).
  int Parse(int argc, char** argv);

  // Typed flags with a range: one line each.
  CLI::Option* Int(const std::string& name, int64_t* out, const std::string& help, int64_t min,
                   int64_t max);
  CLI::Option* Float(const std::string& name, double* out, const std::string& help, double min,
                     double max);
  CLI::Option* Flag(const std::string& name, bool* out, const std::string& help);
  CLI::Option* String(const std::string& name, std::string* out, const std::string& help);
  // A byte size ("12GiB", "512MiB", 1000000) within [min, max].
  CLI::Option* Bytes(const std::string& name, size_t* out, const std::string& help, size_t min,
                     size_t max);
  // One of `choices`.
  CLI::Option* Choice(const std::string& name, std::string* out, const std::string& help,
                      const std::vector<std::string>& choices);
  // A comma-separated list (or the flag given several times); replaces the
  // default when given.
  CLI::Option* List(const std::string& name, std::vector<std::string>* out,
                    const std::string& help);
  // A comma-separated list of numbers, each within [min, max].
  CLI::Option* FloatList(const std::string& name, std::vector<double>* out, const std::string& help,
                         double min, double max);
  // A comma-separated list of byte sizes, each within [min, max].
  CLI::Option* BytesList(const std::string& name, std::vector<size_t>* out, const std::string& help,
                         size_t min, size_t max);
  // A file to read: must exist and be a regular file.
  CLI::Option* InputFile(const std::string& name, std::string* out, const std::string& help);
  // A file to write: its folder must exist and be writable, and it must not
  // be a special file.
  CLI::Option* OutputFile(const std::string& name, std::string* out, const std::string& help);
  // The files the InputFile and OutputFile flags named, after Parse: for a
  // tool that adds the files its config names (CheckDistinctFiles).
  std::vector<NamedFile> InputFiles() const;
  std::vector<NamedFile> OutputFiles() const;

  // Options several tools share, parsed and checked once here (the memory
  // policy flags are memory_flags.h's).
  CLI::Option* Device(std::string* out, const std::string& help);
  // --set KEY=VALUE, repeatable; VALUE is YAML (a number, a string, a list).
  CLI::Option* Set(ParamOverrides* out);

 private:
  std::string tool_;
  CLI::App app_;
  std::vector<std::pair<std::string, const std::string*>> inputs_, outputs_;  // flag, value
};

}  // namespace spill

#endif  // SPILL_TOOLS_COMMON_CLI_H_
