// CandidateDump: every candidate the search evaluates, one row each, streamed to a file
// (`meshplan search --dump all.csv` or `--dump all.jsonl`), for analysis in other tools.
//
// What: each valid candidate (the ones Estimate() costs; candidates a rule removes are
// counted by --explain, not dumped): the plan (its full plan string and each key), fits
// and the reason when it does not, the memory breakdown of its worst stage, the step
// time breakdown, tokens/s and utilisation (CandidateDump::Columns() lists them; units in
// the names: _bytes, _s).
// Format, by the file's extension: .csv (a header row, then one row per candidate; text
// fields quoted) or .jsonl (one JSON object per line, the same keys); anything else is
// an InputError naming the flag (exit 2).
// Order: grid ordinal (planner/search/plan_space.h), the same for any thread count. Each
// search worker formats the rows of one mesh into its own buffer, lock-free; a finished
// mesh's buffer is handed over (one lock per mesh, none per row) and written as soon as
// every mesh before it is: meshes are taken in order, so few wait.
// Atomic: rows go to a temporary beside the file (planner/atomic_file.h); Commit()
// renames it over the file; a dump destroyed without Commit() (an error, a refused or
// empty search) removes it and leaves no half-written file.
// Thread-safety: FormatRow() is const and reentrant; AddMesh() may be called from any
// thread; the constructor, Commit() and the destructor from one.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "planner/atomic_file.h"
#include "planner/parallel_plan.h"
#include "planner/plan_cost.h"

namespace meshplan {

class CandidateDump {
 public:
  enum class Format { kCsv, kJsonl };

  // The format of `path` by its extension; InputError at `flag` for any other.
  static Format FormatOf(const std::string& path, const std::string& flag);
  // The column (CSV) and key (JSON Lines) names, in order.
  static const std::vector<std::string>& Columns();

  // Opens the temporary and (CSV) writes the header. Throws InputError (extension) or
  // std::runtime_error (the file cannot be created).
  CandidateDump(const std::string& path, const std::string& flag);

  // Appends one candidate's row (newline-terminated) to a worker's buffer.
  void FormatRow(const ParallelPlan& plan, const PlanCost& cost, int64_t ordinal,
                 std::string* buffer) const;
  // The rows of mesh `mesh_index`, in ordinal order; every mesh index from 0 up to the
  // last must be handed over once (an empty string for a mesh without valid candidates).
  void AddMesh(int64_t mesh_index, std::string rows);
  // Writes what is left, then syncs and renames; throws std::runtime_error on failure.
  void Commit();

  int64_t rows_written() const { return rows_; }
  const std::string& path() const { return writer_.path(); }

 private:
  void WriteReady();  // holds mutex_

  Format format_;
  AtomicFileWriter writer_;
  std::mutex mutex_;
  int64_t next_mesh_ = 0;                      // the next mesh to write
  std::map<int64_t, std::string> waiting_;     // meshes finished before their turn
  int64_t rows_ = 0;
  std::string error_;                          // a write failure on a worker thread
};

}  // namespace meshplan
