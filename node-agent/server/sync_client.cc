#include "node-agent/server/sync_client.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "node-agent/server/wire.h"

namespace kmodd::agent {

namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<grpc::ChannelCredentials> Credentials(const SyncClientOptions& o,
                                                      const std::string& ca_pem) {
  if (o.insecure) {
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ca_pem;
  ssl.pem_private_key = o.key_pem;
  ssl.pem_cert_chain = o.cert_pem;
  return grpc::SslCredentials(ssl);
}

}  // namespace

SyncClient::SyncClient(SyncClientOptions options, NodeFacts facts, AgentState& state,
                       DesiredHandler on_desired, Logger& log)
    : options_(std::move(options)), facts_(std::move(facts)), state_(state),
      on_desired_(std::move(on_desired)), log_(log) {
  if (options_.ca_file.empty()) {
    channel_ca_ = options_.ca_pem;
    RefreshChannel();
  }
}

bool SyncClient::RefreshChannel() {
  std::string ca = channel_ca_;
  if (!options_.ca_file.empty()) {
    absl::StatusOr<std::string> text = ReadFile(options_.ca_file);
    if (!text.ok()) {
      return false;
    }
    ca = *std::move(text);
    if (stub_ && ca == channel_ca_) {
      return true;
    }
  }
  channel_ca_ = ca;
  grpc::ChannelArguments args = SyncChannelArguments(options_.backoff);
  if (!options_.target_name_override.empty()) {
    args.SetSslTargetNameOverride(options_.target_name_override);
  }
  channel_ = grpc::CreateCustomChannel(options_.target, Credentials(options_, ca), args);
  stub_ = v1::Controller::NewStub(channel_);
  return true;
}

SyncClient::~SyncClient() { Stop(); }

void SyncClient::Start() {
  state_.SetController(false, options_.target);
  thread_ = std::thread([this] { Run(); });
}

void SyncClient::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (ctx_ != nullptr) {
      ctx_->TryCancel();
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void SyncClient::Run() {
  std::mt19937_64 random(options_.seed);
  Backoff backoff(options_.backoff);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) {
        return;
      }
    }
    if (Session()) {
      backoff.Reset();
    }
    const auto delay = backoff.Next(std::uniform_real_distribution<double>(0, 1)(random));
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, delay, [this] { return stop_; })) {
      return;
    }
  }
}

v1::NodeReport SyncClient::Answer(const v1::NodeDesired& d) {
  v1::Ack ack;
  ack.set_version(d.version());
  auto desired = FromProto(d, "controller");
  if (!desired.ok()) {
    ack.set_accepted(false);
    ack.set_error(std::string(desired.status().message()));
    log_.Warn("desired state refused (NACK); the previous one stays in force",
              {{"version", d.version()}, {"error", ack.error()}});
  } else {
    ack.set_accepted(true);
    if (!options_.desired_path.empty()) {
      // Persisted before the ACK, so that a reboot re-applies what the controller saw
      // accepted. Failing to persist does not refuse the state: it is applied and the
      // ACK says it will not survive a restart.
      if (auto s = WriteFileAtomic(options_.desired_path, d.SerializeAsString(), 0600); !s.ok()) {
        ack.set_error(absl::StrCat("accepted, but not persisted: ", s.message()));
        log_.Error("cannot persist the desired state", {{"error", std::string(s.message())}});
      }
    }
    log_.Info("desired state accepted",
              {{"version", d.version()}, {"modules", static_cast<int64_t>(d.modules_size())}});
    on_desired_(std::move(*desired));
  }
  v1::NodeReport r = Report(state_.Snapshot());
  *r.mutable_ack() = std::move(ack);
  return r;
}

bool SyncClient::Session() {
  grpc::ClientContext ctx;
  std::string setup_error;
  if (!RefreshChannel()) {
    setup_error = absl::StrCat("cannot read the controller's CA ", options_.ca_file,
                               " (published by the controller at its first start)");
  } else if (!options_.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadFile(options_.token_file);
    if (!token.ok()) {
      setup_error = absl::StrCat("cannot read the token: ", token.status().message());
    } else {
      ctx.AddMetadata("authorization",
                      absl::StrCat("Bearer ", absl::StripAsciiWhitespace(*token)));
    }
  }
  if (!setup_error.empty()) {
    if (setup_error != last_error_) {
      log_.Warn("cannot dial the controller yet", {{"controller", options_.target},
                                                   {"error", setup_error}});
      last_error_ = setup_error;
    }
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      return false;
    }
    ctx_ = &ctx;
  }
  auto stream = stub_->Sync(&ctx);
  std::mutex write_mu;  // one writer at a time; a reader may run alongside
  AgentSnapshot snap = state_.Snapshot();
  v1::NodeReport hello = Report(snap);
  *hello.mutable_node() = ToProto(facts_);
  std::atomic<bool> done{false};
  std::thread writer;
  bool answered = false;
  if (stream->Write(hello)) {
    writer = std::thread([&, sent = snap.generation]() mutable {
      while (!done.load()) {
        const uint64_t gen = state_.WaitForChange(sent, Clock::now() + std::chrono::milliseconds(200));
        if (gen == sent || done.load()) {
          continue;
        }
        // Let a burst (a whole driver stack loading) settle into one report.
        std::this_thread::sleep_for(options_.coalesce);
        const AgentSnapshot s = state_.Snapshot();
        std::lock_guard<std::mutex> lock(write_mu);
        if (!stream->Write(Report(s))) {
          return;
        }
        sent = s.generation;
      }
    });
    v1::NodeDesired d;
    while (stream->Read(&d)) {
      if (!answered) {
        answered = true;
        last_error_.clear();
        state_.SetController(true, options_.target);
        log_.Info("connected to the controller", {{"controller", options_.target}});
      }
      const v1::NodeReport r = Answer(d);
      std::lock_guard<std::mutex> lock(write_mu);
      if (!stream->Write(r)) {
        break;
      }
    }
  }
  // The writer notices within its poll period; its writes fail on an ended stream.
  done = true;
  if (writer.joinable()) {
    writer.join();
  }
  const grpc::Status status = stream->Finish();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ctx_ = nullptr;
  }
  if (answered) {
    state_.SetController(false, options_.target);
  }
  std::string why = status.error_message().empty() ? "stream ended" : status.error_message();
  if (answered || why != last_error_) {
    // Logged once per distinct failure, not once per retry.
    log_.Warn("controller stream down; keeping the last desired state",
              {{"controller", options_.target}, {"error", why}});
    last_error_ = why;
  }
  return answered;
}

}  // namespace kmodd::agent
