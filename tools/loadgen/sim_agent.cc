#include "tools/loadgen/sim_agent.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kmodd::loadgen {

namespace {

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// Deterministic bytes of one entry.
std::string SpecBytes(const v1::ModuleSpec& m) {
  std::string one;
  google::protobuf::io::StringOutputStream stream(&one);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return one;
}

// Deterministic bytes for comparing two desired states' modules (versions aside).
std::string ModulesKey(const v1::NodeDesired& d) {
  std::string key;
  for (const auto& m : d.modules()) {
    std::string one = SpecBytes(m);
    key += std::to_string(one.size());
    key += ':';
    key += one;
  }
  return key;
}

v1::Phase PhaseOf(const std::string& phase) {
  if (phase == "FAILED") {
    return v1::FAILED;
  }
  return phase == "LOADING" ? v1::LOADING : v1::LOADED;
}

}  // namespace

void SimAgent::Start(v1::Controller::Stub* stub) {
  if (!token_.empty()) {
    ctx_.set_credentials(grpc::AccessTokenCredentials(token_));
  }
  stub->async()->Sync(&ctx_, this);
  v1::NodeReport hello;
  {
    std::lock_guard lock(mu_);
    hello = ReportLocked(NowMs(), false);  // what it runs, from its earlier streams
  }
  *hello.mutable_node() = node_;
  {
    std::lock_guard lock(mu_);
    started_ = true;
    EnqueueLocked(std::move(hello), -1);
  }
  StartRead(&in_);
  StartCall();
}

v1::NodeReport SimAgent::ReportLocked(int64_t now, bool ack) {
  v1::NodeReport r;
  if (ack) {
    r.mutable_ack()->set_version(in_.version());
    r.mutable_ack()->set_accepted(true);
  }
  if (!state_->desired_version.empty()) {
    r.set_applied_version(state_->desired_version);
  }
  for (const auto& [key, st] : state_->modules) {
    v1::ModuleStatus* m = r.add_modules();
    m->set_namespace_(key.substr(0, key.find('/')));
    m->set_name(key.substr(key.find('/') + 1));
    m->set_phase(PhaseOf(st.phase));
    if (st.phase == "FAILED") {
      m->set_message("simulated failure: the image matches --fail-image");
      m->set_error_class(v1::ERROR_TERMINAL);
    }
    m->set_image(st.image);
    m->set_version(st.version);
    m->add_kernel_modules(st.kernel_module);
    m->set_since_unix_ms(st.since);
    m->set_updated_unix_ms(now);
    m->set_desired_version(state_->desired_version);
  }
  return r;
}

void SimAgent::FinishLoad(const std::string& version) {
  std::lock_guard lock(mu_);
  if (done_ || version != in_.version()) {
    return;  // the stream ended, or a newer desired state came (its own timer follows)
  }
  const Options& o = fleet_->options_;
  const bool fails_here = !o.fail_image.empty() &&
                          (o.fail_nodes.empty() || o.fail_nodes.count(node_.name()) != 0);
  const int64_t now = NowMs();
  for (auto& [k, st] : state_->modules) {
    if (st.phase != "LOADING") {
      continue;
    }
    st.phase = fails_here && absl::StrContains(st.image, o.fail_image) ? "FAILED" : "LOADED";
    st.since = now;
    state_->timeline.push_back(PhaseEvent{k, st.image, st.phase, now});
  }
  EnqueueLocked(ReportLocked(now, false), -1);
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
    const Options& o = fleet_->options_;
    const bool fails_here = !o.fail_image.empty() &&
                            (o.fail_nodes.empty() || o.fail_nodes.count(node_.name()) != 0);
    std::map<std::string, SimModule> next;
    bool loading = false;
    for (const auto& spec : in_.modules()) {
      const std::string k = absl::StrCat(spec.namespace_(), "/", spec.name());
      SimModule st;
      st.spec = SpecBytes(spec);
      st.image = spec.container_image();
      const bool failed = fails_here && absl::StrContains(spec.container_image(), o.fail_image);
      st.version = spec.version();
      st.kernel_module = spec.modprobe().module_name();
      auto old = state_->modules.find(k);
      const bool changed = old == state_->modules.end() || old->second.spec != st.spec;
      if (!changed) {
        st.phase = old->second.phase;
        st.since = old->second.since;
        if (st.phase == "LOADING") {
          loading = true;
        }
      } else {
        st.phase = o.load_ms > 0 ? "LOADING" : failed ? "FAILED" : "LOADED";
        st.since = now;
        loading = loading || o.load_ms > 0;
      }
      if (old == state_->modules.end() || old->second.phase != st.phase ||
          old->second.image != st.image) {
        state_->timeline.push_back(PhaseEvent{k, st.image, st.phase, now});
      }
      next.emplace(k, std::move(st));
    }
    state_->modules = std::move(next);
    state_->desired_version = in_.version();
    EnqueueLocked(ReportLocked(now, true), static_cast<int>(history_.size()) - 1);
    if (loading) {
      fleet_->After(std::chrono::milliseconds(o.load_ms),
                    [this, version = in_.version()] { FinishLoad(version); });
    }
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
