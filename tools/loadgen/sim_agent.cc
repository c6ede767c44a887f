#include "tools/loadgen/sim_agent.h"

#include "absl/time/clock.h"

namespace kmodd::loadgen {

namespace {

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// Deterministic bytes for comparing two desired states' modules (versions aside).
std::string ModulesKey(const v1::NodeDesired& d) {
  std::string key;
  for (const auto& m : d.modules()) {
    std::string one;
    google::protobuf::io::StringOutputStream stream(&one);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
    coded.Trim();
    key += std::to_string(one.size());
    key += ':';
    key += one;
  }
  return key;
}

v1::NodeReport LoadedReport(const v1::NodeDesired& d, int64_t now) {
  v1::NodeReport r;
  r.mutable_ack()->set_version(d.version());
  r.mutable_ack()->set_accepted(true);
  r.set_applied_version(d.version());
  for (const auto& spec : d.modules()) {
    v1::ModuleStatus* m = r.add_modules();
    m->set_namespace_(spec.namespace_());
    m->set_name(spec.name());
    m->set_phase(v1::LOADED);
    m->set_image(spec.container_image());
    m->set_version(spec.version());
    m->add_kernel_modules(spec.modprobe().module_name());
    m->set_since_unix_ms(now);
    m->set_updated_unix_ms(now);
    m->set_desired_version(d.version());
  }
  return r;
}

}  // namespace

void SimAgent::Start(v1::Controller::Stub* stub) {
  if (!token_.empty()) {
    ctx_.set_credentials(grpc::AccessTokenCredentials(token_));
  }
  stub->async()->Sync(&ctx_, this);
  v1::NodeReport hello;
  *hello.mutable_node() = node_;
  {
    std::lock_guard lock(mu_);
    started_ = true;
    EnqueueLocked(std::move(hello), -1);
  }
  StartRead(&in_);
  StartCall();
}

void SimAgent::WaitDone() {
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return done_ || !started_; });
}

std::vector<Received> SimAgent::History() const {
  std::lock_guard lock(mu_);
  return history_;
}

void SimAgent::EnqueueLocked(v1::NodeReport report, int answers) {
  out_.push_back(Outgoing{std::move(report), answers});
  if (!writing_) {
    writing_ = true;
    StartWrite(&out_.front().report);
  }
}

void SimAgent::OnReadDone(bool ok) {
  if (!ok) {
    return;  // the stream is ending; OnDone follows
  }
  const int64_t now = NowMs();
  bool first = false;
  {
    std::lock_guard lock(mu_);
    std::string key = ModulesKey(in_);
    first = history_.empty();
    Received r;
    r.version = in_.version();
    r.modules = in_.modules_size();
    r.changed = !first && key != last_modules_;
    r.received_unix_ms = now;
    history_.push_back(std::move(r));
    last_modules_ = std::move(key);
    EnqueueLocked(LoadedReport(in_, now), static_cast<int>(history_.size()) - 1);
  }
  if (first) {
    fleet_->OnConnected(slot_);
  }
  StartRead(&in_);
}

void SimAgent::OnWriteDone(bool ok) {
  bool changed_acked = false;
  {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!ok) {
      return;  // the stream is broken; OnDone follows
    }
    const int answers = out_.front().answers;
    if (answers >= 0) {
      Received& r = history_[answers];
      r.acked_unix_ms = NowMs();
      if (r.changed && !counted_change_) {
        counted_change_ = true;
        changed_acked = true;
      }
    }
    out_.pop_front();
    if (!out_.empty()) {
      writing_ = true;
      StartWrite(&out_.front().report);
    }
  }
  if (changed_acked) {
    fleet_->OnChangedAcked();
  }
}

void SimAgent::OnDone(const grpc::Status& status) {
  bool got_desired = false;
  {
    std::lock_guard lock(mu_);
    got_desired = !history_.empty();
  }
  fleet_->OnEnded(slot_, status, got_desired);
  std::lock_guard lock(mu_);
  done_ = true;
  done_cv_.notify_all();
}

}  // namespace kmodd::loadgen
