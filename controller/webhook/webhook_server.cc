#include "controller/webhook/webhook_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/http/server_tls.h"
#include "controller/webhook/webhook.h"

namespace kmodd::webhook {

namespace {

http::ServerReply Review(const http::ServerRequest& request) {
  absl::StatusOr<std::string> out = ReviewModuleJson(request.body);
  if (!out.ok()) {
    return {400, "text/plain", absl::StrCat(out.status().message(), "\n")};
  }
  return {200, "application/json", *std::move(out)};
}

}  // namespace

http::Router Routes() {
  http::Router routes;
  routes.Add("POST", "/validate-module", http::RunOn::kWorkers, Review);
  routes.Add("POST", "/validate-modulepolicy", http::RunOn::kWorkers, Review);
  return routes;
}

absl::StatusOr<std::unique_ptr<WebhookServer>> WebhookServer::Start(http::ServerOptions options,
                                                                    const std::string& cert_pem,
                                                                    const std::string& key_pem,
                                                                    Logger& log) {
  absl::StatusOr<std::shared_ptr<http::TlsServerContext>> ctx =
      http::MakeTlsServerContext(cert_pem, key_pem);
  if (!ctx.ok()) {
    return ctx.status();
  }
  auto webhook = std::unique_ptr<WebhookServer>(new WebhookServer());
  webhook->context_ = *std::move(ctx);
  options.name = "webhook";
  options.tls = [raw = webhook.get()] { return raw->Context(); };
  absl::StatusOr<std::unique_ptr<http::Server>> server =
      http::Server::Start(options, Routes(), log);
  if (!server.ok()) {
    return server.status();
  }
  webhook->server_ = *std::move(server);
  return webhook;
}

WebhookServer::~WebhookServer() { Stop(); }

absl::Status WebhookServer::SetCertificate(const std::string& cert_pem,
                                           const std::string& key_pem) {
  absl::StatusOr<std::shared_ptr<http::TlsServerContext>> ctx =
      http::MakeTlsServerContext(cert_pem, key_pem);
  if (!ctx.ok()) {
    return ctx.status();
  }
  std::lock_guard lock(mu_);
  context_ = *std::move(ctx);
  return absl::OkStatus();
}

std::shared_ptr<http::TlsServerContext> WebhookServer::Context() {
  std::lock_guard lock(mu_);
  return context_;
}

uint16_t WebhookServer::port() const { return server_->port(); }

http::ServerStats WebhookServer::stats() const { return server_->stats(); }

void WebhookServer::Stop() {
  if (server_) {
    server_->Stop();
  }
}

}  // namespace kmodd::webhook
