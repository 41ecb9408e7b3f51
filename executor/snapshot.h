// Snapshots: model + AdamW state + step count, written atomically, sharded per rank.
// DIR/step_<8 digits>/rank_<5 digits>.bin for each world rank that owns state (ZeRO 1-3:
// every rank's shard; ZeRO 0: one rank per (pp, tp) position, SnapshotFileRank), and
// DIR/latest naming the newest complete step directory. The data position is the step count
// (executor/data.h streams are pure functions of it).
// Atomicity: a crash at any point leaves `latest` naming the previous complete snapshot,
// whose files are untouched; leftover .tmp files are ignored (and overwritten by the next save).
// Integrity: each rank file carries its identity (rank, step, plan, model name and shape,
// precision, tensors) and an XXH64 checksum of all its bytes (executor/snapshot_format.h).
// A resume verifies this rank's file completely before any state is loaded, then the ranks
// agree (an all-reduce of the verdicts over the world): if any rank refuses, every rank
// refuses and none loads anything. The refusing rank throws InputError naming its file and
// the field; the others throw SnapshotRefusedElsewhere.
// File layout and format, write order: docs/executor_internals.md#snapshot.
#pragma once

#include <cstdint>
#include <string>

#include "executor/snapshot_format.h"
#include "executor/trainer.h"
#include "planner/input_error.h"

namespace meshplan {

// What a rank throws when its own snapshot file passed but another rank's did not: the run
// stops (exit 2) on every rank, and the message points at the ranks that refused.
class SnapshotRefusedElsewhere : public InputError {
 public:
  using InputError::InputError;
};

// The world rank whose file holds this rank's state (itself unless ZeRO 0 replicates it).
int SnapshotFileRank(const ParallelPlan& plan, int world_rank);

// Collective over the world (trainer.mesh()): every rank that owns state writes its file,
// then world rank 0 publishes `latest`.
void SaveSnapshot(const std::string& dir, Trainer& trainer);

// Restores the trainer from DIR/latest; returns the step it continues from. Collective over
// the world (the verdicts, then ZeRO 1-2 all-gather the restored param shards). Throws
// InputError when DIR has no complete snapshot, or this rank's file is damaged or does not
// match the run (nothing loaded); SnapshotRefusedElsewhere when another rank's is;
// std::runtime_error when the file changes while it is loaded (state half-loaded).
int64_t LoadSnapshot(const std::string& dir, Trainer& trainer);

// The pieces of SaveSnapshot, for tests that simulate a crash between them.
// Writes this rank's "<file>.tmp" (fsynced) and returns its path ("" when this rank owns
// nothing to save: a ZeRO-0 replica). Throws std::runtime_error when the disk refuses a
// write (full, read-only: naming the file and the cause) or the state holds a NaN or
// infinity (a snapshot that could not be resumed).
std::string WriteSnapshotTemp(const std::string& dir, Trainer& trainer);
// Renames a temporary file written above to its final name.
void PublishSnapshotFile(const std::string& temp_path);
// Points DIR/latest at the step directory of `step` (temporary file, fsync, rename).
void CommitSnapshot(const std::string& dir, int64_t step);

}  // namespace meshplan
