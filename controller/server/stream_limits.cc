#include "controller/server/stream_limits.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kmodd::server {

std::string PeerHost(std::string_view peer) {
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon == std::string_view::npos || colon == scheme) {
    return std::string(peer);
  }
  // An IPv6 address without brackets has no port we could tell from its last group.
  if (peer.find('[') == std::string_view::npos &&
      std::count(peer.begin() + static_cast<long>(scheme) + 1, peer.end(), ':') > 1) {
    return std::string(peer);
  }
  return std::string(peer.substr(0, colon));
}

bool PeerLimiter::Admit(const std::string& peer) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(peer);
  if (it != streams_.end()) {
    ++it->second;
    return true;
  }
  int& conns = connections_[PeerHost(peer)];
  if (max_ > 0 && conns >= max_) {
    return false;
  }
  ++conns;
  streams_[peer] = 1;
  return true;
}

void PeerLimiter::Release(const std::string& peer) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(peer);
  if (it == streams_.end() || --it->second > 0) {
    return;
  }
  streams_.erase(it);
  auto c = connections_.find(PeerHost(peer));
  if (c != connections_.end() && --c->second <= 0) {
    connections_.erase(c);
  }
}

int PeerLimiter::connections(const std::string& host) const {
  std::lock_guard lock(mu_);
  auto it = connections_.find(host);
  return it == connections_.end() ? 0 : it->second;
}

StreamDeadlines::StreamDeadlines(const Clock& clock)
    : clock_(clock), thread_([this] { Run(); }) {}

StreamDeadlines::~StreamDeadlines() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    ++changes_;
  }
  cv_.notify_all();
  thread_.join();
}

void StreamDeadlines::Set(AgentStream* stream, absl::Time until) {
  if (until == absl::InfiniteFuture()) {
    return;
  }
  {
    std::lock_guard lock(mu_);
    until_[stream] = until;
    ++changes_;
  }
  cv_.notify_all();
}

void StreamDeadlines::Remove(AgentStream* stream) {
  std::lock_guard lock(mu_);
  until_.erase(stream);
}

size_t StreamDeadlines::size() const {
  std::lock_guard lock(mu_);
  return until_.size();
}

void StreamDeadlines::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    const absl::Time now = clock_.Now();
    absl::Time next = absl::InfiniteFuture();
    for (auto it = until_.begin(); it != until_.end();) {
      if (it->second <= now) {
        // Under mu_: Remove (from the stream's end) waits, so the stream is alive; Close
        // only starts the stream's end, it never runs it inline.
        it->first->Close(absl::UnauthenticatedError(absl::StrCat(
            "the agent's token expired at ", absl::FormatTime(it->second, absl::UTCTimeZone()),
            ": dial again with the refreshed token")));
        it = until_.erase(it);
      } else {
        next = std::min(next, it->second);
        ++it;
      }
    }
    const uint64_t seen = changes_;
    const auto wait = next == absl::InfiniteFuture() ? std::chrono::hours(1)
                                                     : absl::ToChronoNanoseconds(next - now);
    clock_.WaitFor(lock, cv_, wait, [this, seen] { return stop_ || changes_ != seen; });
  }
}

}  // namespace kmodd::server
