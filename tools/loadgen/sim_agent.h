#pragma once

// One simulated agent: a Sync stream whose node "loads" instantly. It sends a hello, and
// answers every desired state with an ACK and every module LOADED at that version; with
// --fail-image a matching module FAILED instead, and with --load-ms a changed module is
// LOADING first, for that long.

#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "kmodd/v1/sync.grpc.pb.h"
#include "tools/loadgen/fleet.h"

namespace kmodd::loadgen {

class SimAgent final : public grpc::ClientBidiReactor<v1::NodeReport, v1::NodeDesired> {
 public:
  // `token`: a bearer token for this stream alone ("" for none). `slot`: the agent's index
  // in the fleet (a reconnecting agent has a new SimAgent per stream).
  SimAgent(Fleet* fleet, v1::NodeInfo node, std::string token, int slot, SimNodeState* state)
      : fleet_(fleet), node_(std::move(node)), token_(std::move(token)), slot_(slot),
        state_(state) {}

  void Start(v1::Controller::Stub* stub);
  void Cancel() { ctx_.TryCancel(); }
  // Blocks until gRPC has called OnDone (after Start).
  void WaitDone();

  const std::string& name() const { return node_.name(); }
  std::vector<Received> History() const;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  // A report to send and, for an ACK, the history entry it answers (-1 for the hello).
  struct Outgoing {
    v1::NodeReport report;
    int answers = -1;
  };
  void EnqueueLocked(v1::NodeReport report, int answers);
  // Every module the node runs, as it stands (a hello carries it too); with `ack`, the
  // answer to the current desired state.
  v1::NodeReport ReportLocked(int64_t now, bool ack);
  // A slow load of desired state `version` ends.
  void FinishLoad(const std::string& version);

  Fleet* fleet_;
  const v1::NodeInfo node_;
  const std::string token_;
  const int slot_;
  SimNodeState* const state_;  // the Fleet's, for this slot
  grpc::ClientContext ctx_;
  v1::NodeDesired in_;

  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  bool started_ = false;
  bool done_ = false;
  std::deque<Outgoing> out_;  // front is being written; deque keeps it in place
  bool writing_ = false;
  std::vector<Received> history_;
  std::string last_modules_;  // the serialized modules of the previous desired state
  bool counted_change_ = false;
};

}  // namespace kmodd::loadgen
