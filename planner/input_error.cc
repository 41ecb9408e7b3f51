#include "planner/input_error.h"

namespace meshplan {
namespace {

std::string Format(const InputLocation& where, const std::string& field,
                   const std::string& message) {
  std::string out;
  if (!where.file.empty()) {
    out += where.file;
    if (where.line > 0) {
      out += ":" + std::to_string(where.line);
      if (where.column > 0) out += ":" + std::to_string(where.column);
    }
    out += ": ";
  }
  if (!field.empty()) out += field + ": ";
  out += message;
  return out;
}

}  // namespace

InputError::InputError(InputLocation where, std::string field, std::string message)
    : std::runtime_error(Format(where, field, message)),
      where_(std::move(where)),
      field_(std::move(field)),
      message_(std::move(message)) {}

}  // namespace meshplan
