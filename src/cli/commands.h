#pragma once
// Each command adds its subcommand to the app and returns the function that runs it.
#include <CLI/CLI.hpp>
#include <functional>

namespace t2o::cli {

using Runner = std::function<int()>;

Runner add_inspect(CLI::App& app);
Runner add_check(CLI::App& app);
Runner add_run(CLI::App& app);
Runner add_convert_version(CLI::App& app);
Runner add_optimize(CLI::App& app);
Runner add_quantize(CLI::App& app);
#ifdef T2O_WITH_TORCH
Runner add_convert(CLI::App& app);
Runner add_verify(CLI::App& app);
#endif

// Prints "error: ..." and an optional "hint: ..." line to stderr.
void print_error(const std::string& msg, const std::string& hint = {});
void print_warning(const std::string& msg);
bool stderr_is_tty();
// On a terminal: a callback that shows a status line on stderr, overwritten by the next one and
// cleared by "" or by the next warning or error. Otherwise an empty function (nothing is shown).
std::function<void(const std::string&)> status_line();

}  // namespace t2o::cli
