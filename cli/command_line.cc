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

}  // namespace

int ParseAndRun(CLI::App& app, int argc, char** argv, const int& exit_code) {
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
