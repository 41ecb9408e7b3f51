// Snapshots: model + AdamW state + step count, written atomically, sharded per rank.
//
// Layout of a snapshot directory:
//   DIR/step_00000004/rank_00000.bin   one file per rank that owns state (ZeRO 1-3: every
//   DIR/step_00000004/rank_00001.bin   rank its shard; ZeRO 0: rank 0 alone, the state is
//   DIR/latest                          replicated), and `latest`: the name of the newest
//                                       complete step directory.
// A rank file is "MESHPLAN-SNAPSHOT 1\n", one JSON line (step, plan, dp size, ZeRO stage,
// rank, and name/numel/dtype of each tensor), then the tensors' raw bytes in that order:
// per parameter group its owned params, Adam m and Adam v (ZeroEngine::Owned).
// The data position is the step count (executor/data.h streams are pure functions of it).
//
// Atomicity: each file is written to "<name>.tmp", flushed (fsync) and renamed; every rank
// finishes its file before rank 0 (after a dp barrier) rewrites `latest` the same way. A
// crash at any point leaves `latest` naming the previous complete snapshot, whose files are
// untouched; leftover .tmp files are ignored (and overwritten by the next save).
// Resuming needs the same model, dp size and ZeRO stage (InputError otherwise).
#pragma once

#include <cstdint>
#include <string>

#include "executor/communicator.h"
#include "executor/trainer.h"

namespace meshplan {

// Collective over dp: every rank writes its file, then rank 0 publishes `latest`.
void SaveSnapshot(const std::string& dir, Trainer& trainer, Communicator& dp);

// Restores the trainer from DIR/latest; returns the step it continues from. Collective
// (ZeRO 1-2 all-gather the restored param shards). Throws InputError when DIR has no
// complete snapshot or it does not match the run.
int64_t LoadSnapshot(const std::string& dir, Trainer& trainer, Communicator& dp);

// The pieces of SaveSnapshot, for tests that simulate a crash between them.
// Writes this rank's "<file>.tmp" (fsynced) and returns its path ("" when this rank owns
// nothing to save: ZeRO 0, rank > 0).
std::string WriteSnapshotTemp(const std::string& dir, Trainer& trainer, int dp_rank);
// Renames a temporary file written above to its final name.
void PublishSnapshotFile(const std::string& temp_path);
// Points DIR/latest at the step directory of `step` (temporary file, fsync, rename).
void CommitSnapshot(const std::string& dir, int64_t step);

}  // namespace meshplan
