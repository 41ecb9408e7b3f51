// ParseAndRun (cli/commands.h): the one place argv becomes an exit code.
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "cli/commands.h"
#include "planner/input_error.h"

namespace meshplan {
namespace {

// "meshplan search" for the subcommand that was parsed, "meshplan" before any.
std::string CommandName(const CLI::App& app) {
  std::string name = app.get_name().empty() ? "meshplan" : app.get_name();
  for (const CLI::App* sub : app.get_subcommands()) name += " " + sub->get_name();
  return name;
}

// The subcommand argv names, when its first word is not a flag: "" when it is one of
// `app`'s, else the refusal, naming the word and the commands (CLI11 alone says only that
// a subcommand is required).
std::string UnknownCommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  std::string names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(argv[1])) return "";
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return "unknown command '" + std::string(argv[1]) + "'; expected one of: " + names;
}

}  // namespace

int ParseAndRun(CLI::App& app, int argc, char** argv, const int& exit_code) {
  if (const std::string unknown = UnknownCommand(app, argc, argv); !unknown.empty()) {
    std::cerr << CommandName(app) << ": error: " << unknown << "\n";
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  } catch (const InputError& e) {
    std::cerr << "meshplan: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << CommandName(app) << ": unexpected error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << CommandName(app) << ": unexpected error: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << CommandName(app) << ": unexpected error (not a std::exception)\n";
    return 1;
  }
  return exit_code;
}

}  // namespace meshplan
