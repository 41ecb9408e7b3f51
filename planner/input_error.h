// InputError: the one error type for bad user input (config files, flags, plans).
//
// Loaders and validators throw it; the CLI catches it at the top, prints what()
// and exits with code 2. Everything below the loaders works on validated
// values and never throws it. what() reads
//   "<file>:<line>:<column>: <field>: <message>"
// with the location parts left out when unknown (line/column are 1-based, 0 = unknown).
#pragma once

#include <stdexcept>
#include <string>

namespace meshplan {

struct InputLocation {
  std::string file;  // path, or "<command line>" / "<plan string>"
  int line = 0;      // 1-based; 0 = unknown
  int column = 0;    // 1-based; 0 = unknown
};

class InputError : public std::runtime_error {
 public:
  InputError(InputLocation where, std::string field, std::string message);

  const InputLocation& where() const { return where_; }
  const std::string& field() const { return field_; }
  const std::string& message() const { return message_; }

 private:
  InputLocation where_;
  std::string field_;
  std::string message_;
};

// Exit code of every command when an InputError reaches the top.
inline constexpr int kExitBadInput = 2;

}  // namespace meshplan
