// Snapshots: model + AdamW state + step count, written atomically, sharded per rank.
//
// Layout of a snapshot directory:
//   DIR/step_00000004/rank_00000.bin   one file per world rank that owns state, and
//   DIR/step_00000004/rank_00001.bin   `latest`: the name of the newest complete step
//   DIR/latest                          directory. ZeRO 1-3: every rank saves its shard.
//                                       ZeRO 0: the state is replicated over dp x cp, so
//   only the rank with dp = cp = 0 of each (pp, tp) position saves (SnapshotFileRank).
// A rank file is "MESHPLAN-SNAPSHOT 1\n", one JSON line (step, plan, dp size, ZeRO stage,
// world rank, and name/numel/dtype of each tensor), then the tensors' raw bytes in that
// order: per parameter group its owned params, Adam m and Adam v (ZeroEngine::Owned).
// The data position is the step count (executor/data.h streams are pure functions of it).
//
// Atomicity: each file is written to "<name>.tmp", flushed (fsync) and renamed; every rank
// finishes its file before world rank 0 (after a world barrier) rewrites `latest` the same way. A
// crash at any point leaves `latest` naming the previous complete snapshot, whose files are
// untouched; leftover .tmp files are ignored (and overwritten by the next save).
// Resuming needs the same model and plan (InputError otherwise, naming what differs).
#pragma once

#include <cstdint>
#include <string>

#include "executor/trainer.h"

namespace meshplan {

// The world rank whose file holds this rank's state (itself unless ZeRO 0 replicates it).
int SnapshotFileRank(const ParallelPlan& plan, int world_rank);

// Collective over the world (trainer.mesh()): every rank that owns state writes its file,
// then world rank 0 publishes `latest`.
void SaveSnapshot(const std::string& dir, Trainer& trainer);

// Restores the trainer from DIR/latest; returns the step it continues from. Collective
// (ZeRO 1-2 all-gather the restored param shards). Throws InputError when DIR has no
// complete snapshot or it does not match the run.
int64_t LoadSnapshot(const std::string& dir, Trainer& trainer);

// The pieces of SaveSnapshot, for tests that simulate a crash between them.
// Writes this rank's "<file>.tmp" (fsynced) and returns its path ("" when this rank owns
// nothing to save: a ZeRO-0 replica).
std::string WriteSnapshotTemp(const std::string& dir, Trainer& trainer);
// Renames a temporary file written above to its final name.
void PublishSnapshotFile(const std::string& temp_path);
// Points DIR/latest at the step directory of `step` (temporary file, fsync, rename).
void CommitSnapshot(const std::string& dir, int64_t step);

}  // namespace meshplan
