#include "controller/server/sync_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <filesystem>
#include <condition_variable>
#include <mutex>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file.h"
#include "controller/server/bounded_pool.h"
#include "controller/server/stream_limits.h"
#include "kmodd/v1/sync.grpc.pb.h"

namespace kmodd::server {

namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  return {static_cast<grpc::StatusCode>(s.code()), std::string(s.message())};
}

std::vector<std::string> Property(const grpc::AuthContext& ctx, const char* name) {
  std::vector<std::string> out;
  for (const auto& v : ctx.FindPropertyValues(name)) {
    out.emplace_back(v.data(), v.size());
  }
  return out;
}

}  // namespace

// What every stream of one server shares.
struct StreamContext {
  Hub& hub;
  Logger& log;
  const bool check_identity;
  Authenticator* const authenticator;
  BoundedPool& reviews;
  PeerLimiter& peers;
  StreamDeadlines& deadlines;
};

namespace {

// One agent stream. Reads run one at a time; writes too, and a desired state that arrives
// while one is on the wire replaces any other still waiting (only the newest matters).
// StartWrite and Finish are called under mu_: gRPC does not serialize them itself, and
// their completions are never run inline, so holding mu_ cannot deadlock.
class SyncReactor final : public grpc::ServerBidiReactor<v1::NodeReport, v1::NodeDesired>,
                          public AgentStream {
 public:
  SyncReactor(grpc::CallbackServerContext* ctx, const StreamContext& shared)
      : ctx_(ctx), hub_(shared.hub), log_(shared.log), check_identity_(shared.check_identity),
        authenticator_(shared.authenticator), shared_(shared), peer_(ctx->peer()) {
    admitted_ = shared_.peers.Admit(peer_);
    if (!admitted_) {
      log_.Warn("agent stream refused: its address has too many connections",
                {{"peer", peer_}});
      FinishOnce(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                              "too many connections from this address (an agent needs one)"));
      return;
    }
    StartRead(&in_);
  }

  void Push(std::shared_ptr<const v1::NodeDesired> desired) override {
    std::lock_guard lock(mu_);
    if (finished_ || broken_) {
      return;
    }
    if (writing_) {
      pending_ = std::move(desired);
      return;
    }
    writing_ = true;
    current_ = std::move(desired);
    StartWrite(current_.get());
  }

  void Close(const absl::Status& why) override { FinishOnce(ToGrpc(why)); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      FinishOnce(grpc::Status::OK);  // the agent went away or half-closed
      return;
    }
    Entered();
    if (!said_hello_ && NeedsToken()) {
      // A TokenReview is a call to the API server: never on gRPC's callback threads. No
      // read is pending meanwhile, and OnDone waits for the review's Process to return.
      if (!shared_.reviews.TrySubmit([this, token = BearerToken()] { Process(CheckToken(token)); })) {
        log_.Warn("agent stream refused: token reviews are backed up",
                  {{"node", in_.node().name()}, {"peer", peer_}});
        FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the controller is busy checking tokens: retry"));
        Left();
      }
      return;
    }
    Process(said_hello_ ? absl::OkStatus() : CheckHello());
  }

  // After the credential check of the hello (`st`), or for any later report. Entered()
  // was called for it; it calls Left() last.
  void Process(absl::Status st) {
    ProcessOne(std::move(st));
    Left();
  }

  void ProcessOne(absl::Status st) {
    if (st.ok() && !said_hello_) {
      st = hub_.Hello(this, in_.node());
      said_hello_ = st.ok();
    }
    if (st.ok()) {
      st = hub_.Report(this, in_);
    }
    if (!st.ok()) {
      FinishOnce(ToGrpc(st));
      return;
    }
    std::lock_guard lock(mu_);
    if (finished_) {
      return;  // ended meanwhile (its token expired, a newer stream): no read after Finish
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    current_.reset();
    if (!ok) {
      broken_ = true;  // the read side sees the end and finishes
      pending_.reset();
      return;
    }
    if (pending_ && !finished_) {
      writing_ = true;
      current_ = std::move(pending_);
      StartWrite(current_.get());
    }
  }

  void OnDone() override {
    // A stream may be finished (its token expired, a newer stream replaced it) while a
    // Process is still running on the review pool or a gRPC thread: it must return before
    // anything below, or it would say hello to the hub for a deleted stream, or read `in_`
    // after the delete (seen in CI as a crash in Hub::Report).
    {
      std::unique_lock lock(mu_);
      idle_.wait(lock, [this] { return in_flight_ == 0; });
    }
    shared_.deadlines.Remove(this);  // no Close from the deadlines after this
    if (said_hello_) {
      hub_.Goodbye(this);  // no Push from the hub after this
    }
    if (admitted_) {
      shared_.peers.Release(peer_);
    }
    // gRPC may call OnDone on another thread as soon as Finish is called, while FinishOnce
    // still holds mu_: take it once, so that no one is inside a member function any more.
    { std::lock_guard lock(mu_); }
    delete this;
  }

 private:
  static bool HasNodeName(const v1::NodeReport& r) {
    return r.has_node() && !r.node().name().empty();
  }

  // A hello on a server that takes tokens (and no certificates).
  bool NeedsToken() const {
    return authenticator_ != nullptr && check_identity_ && HasNodeName(in_);
  }

  std::string BearerToken() const {
    const auto& md = ctx_->client_metadata();
    auto it = md.find("authorization");
    if (it == md.end()) {
      return "";
    }
    const std::string value(it->second.data(), it->second.size());
    constexpr std::string_view kBearer = "Bearer ";
    return value.compare(0, kBearer.size(), kBearer) == 0 ? value.substr(kBearer.size()) : "";
  }

  absl::Status CheckToken(const std::string& token) {
    absl::StatusOr<absl::Time> until;
    try {
      until = authenticator_->Authenticate(token, in_.node().name());
    } catch (const std::exception& e) {  // the stream must still end, and nothing else
      until = absl::UnavailableError(absl::StrCat("cannot check the agent's token: ", e.what()));
    }
    if (!until.ok()) {
      log_.Warn("agent stream refused: its token does not name the node it claims",
                {{"node", in_.node().name()}, {"error", until.status().ToString()},
                 {"peer", peer_}});
      return until.status();
    }
    shared_.deadlines.Set(this, *until);
    return absl::OkStatus();
  }

  absl::Status CheckHello() {
    if (!HasNodeName(in_)) {
      return absl::InvalidArgumentError(
          "the first report of a stream must carry node.name (the hello)");
    }
    if (!check_identity_) {
      return absl::OkStatus();
    }
    const auto auth = ctx_->auth_context();
    const std::vector<std::string> cns =
        auth ? Property(*auth, GRPC_X509_CN_PROPERTY_NAME) : std::vector<std::string>{};
    const std::vector<std::string> dns =
        auth ? Property(*auth, GRPC_PEER_DNS_PROPERTY_NAME) : std::vector<std::string>{};
    absl::Status st = CheckIdentity(in_.node().name(), cns, dns);
    if (!st.ok()) {
      log_.Warn("agent stream refused: its certificate does not name the node it claims",
                {{"node", in_.node().name()},
                 {"certificateCN", absl::StrJoin(cns, ",")},
                 {"certificateDNS", absl::StrJoin(dns, ",")},
                 {"peer", ctx_->peer()}});
    }
    return st;
  }

  void FinishOnce(grpc::Status s) {
    std::lock_guard lock(mu_);
    if (finished_) {
      return;
    }
    finished_ = true;
    pending_.reset();
    Finish(std::move(s));
  }

  grpc::CallbackServerContext* const ctx_;
  Hub& hub_;
  Logger& log_;
  const bool check_identity_;
  Authenticator* const authenticator_;
  const StreamContext& shared_;
  const std::string peer_;
  bool admitted_ = false;  // counted by shared_.peers
  v1::NodeReport in_;
  bool said_hello_ = false;  // touched by the read side only

  // A Process begins (Entered) and ends (Left): OnDone waits until none is running.
  void Entered() {
    std::lock_guard lock(mu_);
    ++in_flight_;
  }
  void Left() {
    std::lock_guard lock(mu_);
    --in_flight_;
    idle_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable idle_;  // with mu_: in_flight_ went down
  int in_flight_ = 0;             // Process calls running
  bool finished_ = false;
  bool broken_ = false;
  bool writing_ = false;
  std::shared_ptr<const v1::NodeDesired> current_;  // on the wire until OnWriteDone
  std::shared_ptr<const v1::NodeDesired> pending_;
};

}  // namespace

absl::Status CheckIdentity(const std::string& claimed, const std::vector<std::string>& common_names,
                           const std::vector<std::string>& dns_names) {
  for (const auto* names : {&common_names, &dns_names}) {
    for (const auto& n : *names) {
      if (n == claimed) {
        return absl::OkStatus();
      }
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "node \"", claimed, "\" is not the node of this client certificate (CN ",
      common_names.empty() ? std::string("none") : absl::StrJoin(common_names, ", "),
      "; DNS names ", dns_names.empty() ? std::string("none") : absl::StrJoin(dns_names, ", "),
      "): an agent can only report as itself"));
}

class SyncServer::Service final : public v1::Controller::CallbackService {
 public:
  Service(Hub& hub, Logger& log, bool check_identity, Authenticator* authenticator,
          const SyncLimits& limits, const Clock& clock)
      : reviews_(limits.review_workers, limits.review_queue),
        peers_(limits.max_connections_per_peer), deadlines_(clock),
        shared_{hub, log, check_identity, authenticator, reviews_, peers_, deadlines_} {}

  grpc::ServerBidiReactor<v1::NodeReport, v1::NodeDesired>* Sync(
      grpc::CallbackServerContext* ctx) override {
    return new SyncReactor(ctx, shared_);
  }

 private:
  // Destroyed after the server has stopped (SyncServer::Shutdown): no stream is left.
  BoundedPool reviews_;
  PeerLimiter peers_;
  StreamDeadlines deadlines_;
  const StreamContext shared_;
};

SyncServer::SyncServer(Hub& hub, ServerOptions options, Logger& log)
    : hub_(hub), options_(std::move(options)), log_(log) {}

SyncServer::~SyncServer() { Shutdown(); }

absl::Status SyncServer::SetCertificate(const std::string& cert_pem, const std::string& key_pem,
                                       const std::string& ca_pem) {
  if (own_dir_.empty()) {
    return absl::FailedPreconditionError(
        "the Sync server reads its certificate from the files it was given: replace those");
  }
  // The key first: gRPC's watcher re-reads a pair whose files changed while it read them.
  for (const auto& [name, pem, mode] : {std::tuple{"tls.key", &key_pem, 0600},
                                        std::tuple{"tls.crt", &cert_pem, 0644},
                                        std::tuple{"ca.crt", &ca_pem, 0644}}) {
    if (absl::Status st = WriteFileAtomic(absl::StrCat(own_dir_, "/", name), *pem, mode);
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

absl::Status SyncServer::Start() {
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (options_.insecure) {
    creds = grpc::InsecureServerCredentials();
  } else {
    std::string cert = options_.cert_file;
    std::string key = options_.key_file;
    std::string ca = options_.ca_file;
    if (cert.empty() && key.empty() && ca.empty()) {
      if (options_.cert_pem.empty() || options_.key_pem.empty() || options_.ca_pem.empty()) {
        return absl::InvalidArgumentError(
            "TLS needs a certificate, its key and the agents' CA (or plain text with --insecure)");
      }
      const char* tmp = getenv("TMPDIR");
      std::string dir = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                     "/kmodd-sync-tls-XXXXXX");
      if (mkdtemp(dir.data()) == nullptr) {
        return ErrnoStatus(errno, "mkdtemp", dir);
      }
      own_dir_ = dir;
      if (absl::Status st = SetCertificate(options_.cert_pem, options_.key_pem, options_.ca_pem);
          !st.ok()) {
        return st;
      }
      cert = own_dir_ + "/tls.crt";
      key = own_dir_ + "/tls.key";
      ca = own_dir_ + "/ca.crt";
    } else {
      for (const std::string* f : {&cert, &key, &ca}) {
        if (absl::StatusOr<std::string> text = ReadFile(*f); !text.ok()) {
          return text.status();  // the watcher would only log it: refuse to start instead
        }
      }
    }
    certificates_ = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        key, cert, ca, static_cast<unsigned>(std::max<int64_t>(1, options_.reload_every.count())));
    grpc::experimental::TlsServerCredentialsOptions tls(certificates_);
    tls.watch_root_certs();
    tls.watch_identity_key_cert_pairs();
    // With tokens, no client certificate is asked for or believed: the CA that signs the
    // controller's serving certificate must not also mint node identities.
    tls.set_cert_request_type(options_.authenticator != nullptr
                                  ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                  : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    creds = grpc::experimental::TlsServerCredentials(tls);
  }
  const SyncLimits& limits = options_.limits;
  service_ = std::make_unique<Service>(hub_, log_, !options_.insecure, options_.authenticator,
                                       limits,
                                       options_.clock != nullptr ? *options_.clock : real_clock_);
  grpc::ServerBuilder b;
  b.AddListeningPort(options_.listen, creds, &port_);
  b.RegisterService(service_.get());
  // Find agents that vanished without closing (power loss, partition) within a minute,
  // and let agents ping as often as every 10 s.
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_streams_per_connection);
  b.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                       static_cast<int>(limits.handshake_timeout.count()));
  b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, static_cast<int>(limits.max_idle.count()));
  if (options_.authenticator != nullptr) {
    b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                         static_cast<int>(limits.max_connection_age.count()));
    b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                         static_cast<int>(limits.max_connection_age_grace.count()));
  }
  server_ = b.BuildAndStart();
  if (!server_ || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen,
                                               " (address in use, or not an address of this host)"));
  }
  log_.Info("sync server listening", {{"address", options_.listen},
                                      {"port", port_},
                                      {"tls", !options_.insecure},
                                      {"tokens", options_.authenticator != nullptr}});
  return absl::OkStatus();
}

void SyncServer::Shutdown() {
  if (server_) {
    // Streams never end by themselves: give them a moment, then cancel them.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    server_->Wait();
    server_.reset();
  }
  if (!own_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(own_dir_, ec);
    own_dir_.clear();
  }
}

}  // namespace kmodd::server
