#include "controller/rollout/rollout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kmodd::rollout {

int64_t Amount::Step(int64_t total) const {
  if (!percent) {
    return count;
  }
  if (*percent <= 0) {
    return 0;
  }
  return std::max<int64_t>(1, (total * *percent + 99) / 100);
}

int64_t Amount::Budget(int64_t total) const {
  return percent ? total * std::max(0, *percent) / 100 : count;
}

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kProgressing:
      return "Progressing";
    case Phase::kPaused:
      return "Paused";
    case Phase::kWaitingAfterCanary:
      return "WaitingAfterCanary";
    case Phase::kHalted:
      return "Halted";
    case Phase::kComplete:
      return "Complete";
  }
  return "Progressing";
}

namespace {

bool Matches(const std::map<std::string, std::string>& selector,
             const std::map<std::string, std::string>& labels) {
  return std::all_of(selector.begin(), selector.end(), [&](const auto& kv) {
    auto it = labels.find(kv.first);
    return it != labels.end() && it->second == kv.second;
  });
}

bool Started(Progress p) { return p != Progress::kNotStarted; }

}  // namespace

Output Plan(const Input& in) {
  Output out;
  const Policy& policy = in.policy;
  const auto total = static_cast<int64_t>(in.nodes.size());

  // The order: canaries, then the others, each by name.
  std::vector<const NodeInput*> sorted;
  sorted.reserve(in.nodes.size());
  for (const NodeInput& n : in.nodes) {
    sorted.push_back(&n);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const NodeInput* a, const NodeInput* b) { return a->name < b->name; });
  std::vector<const NodeInput*> canaries;
  std::vector<const NodeInput*> others;
  for (const NodeInput* n : sorted) {
    const bool canary = !policy.canary_selector.empty()
                            ? Matches(policy.canary_selector, n->labels)
                            : static_cast<int64_t>(canaries.size()) < policy.canary;
    (canary ? canaries : others).push_back(n);
  }
  std::vector<const NodeInput*> order = canaries;
  order.insert(order.end(), others.begin(), others.end());
  for (const NodeInput* n : order) {
    out.order.push_back(n->name);
  }
  for (const NodeInput* n : canaries) {
    out.canaries.insert(n->name);
  }

  // What the nodes say.
  for (const NodeInput* n : order) {
    switch (n->progress) {
      case Progress::kUpdating:
        ++out.updating;
        break;
      case Progress::kReady:
        ++out.ready;
        break;
      case Progress::kFailed:
        ++out.failed;
        if (policy.rollback) {
          out.rollback.insert(n->name);
        }
        break;
      case Progress::kNotStarted:
        break;
    }
    if (Started(n->progress)) {
      out.admitted.insert(n->name);  // what has begun is not taken back here
    }
  }

  auto finish = [&](Phase phase, std::string message) {
    out.phase = phase;
    out.message = std::move(message);
    out.waiting = total - static_cast<int64_t>(out.admitted.size());
    return out;
  };

  if (total > 0 && out.ready == total) {
    return finish(Phase::kComplete, absl::StrCat("all ", total, " nodes Ready"));
  }
  if (policy.max_failed && out.failed > policy.max_failed->Budget(total)) {
    return finish(Phase::kHalted,
                  absl::StrCat(out.failed, " nodes Failed, more than the budget of ",
                               policy.max_failed->Budget(total), ": halted, ",
                               total - static_cast<int64_t>(out.admitted.size()),
                               " nodes keep their previous driver"));
  }
  // A canary that fails stops the rollout whatever the budget: that is what it is for.
  for (const NodeInput* n : canaries) {
    if (n->progress == Progress::kFailed) {
      return finish(Phase::kHalted,
                    absl::StrCat("canary ", n->name, " Failed: halted, ",
                                 total - static_cast<int64_t>(out.admitted.size()),
                                 " nodes keep their previous driver; change the Module or undo"));
    }
  }
  if (in.paused) {
    return finish(Phase::kPaused, "paused");
  }

  int64_t capacity = policy.max_parallel ? policy.max_parallel->Step(total) - out.updating : total;
  auto admit = [&](const std::vector<const NodeInput*>& group) {
    for (const NodeInput* n : group) {
      if (capacity <= 0) {
        return;
      }
      if (!Started(n->progress) && n->available && out.admitted.insert(n->name).second) {
        --capacity;
      }
    }
  };

  admit(canaries);
  const bool canaries_ready =
      std::all_of(canaries.begin(), canaries.end(),
                  [](const NodeInput* n) { return n->progress == Progress::kReady; });
  if (!canaries.empty() && !canaries_ready) {
    const auto ready = std::count_if(canaries.begin(), canaries.end(), [](const NodeInput* n) {
      return n->progress == Progress::kReady;
    });
    return finish(Phase::kProgressing,
                  absl::StrCat("canaries: ", ready, " of ", canaries.size(), " Ready"));
  }
  if (!canaries.empty() && policy.pause_after_canary && !in.resumed) {
    if (!policy.canary_soak_ms) {
      return finish(Phase::kWaitingAfterCanary,
                    "canaries Ready: waiting for a person to resume the rollout");
    }
    int64_t last_ready = 0;
    for (const NodeInput* n : canaries) {
      last_ready = std::max(last_ready, n->ready_since_ms);
    }
    const int64_t soak_end = last_ready + *policy.canary_soak_ms;
    if (in.now_ms < soak_end) {
      out.recheck_at_ms = soak_end;
      return finish(Phase::kWaitingAfterCanary,
                    absl::StrCat("canaries Ready: soaking for ", (soak_end - in.now_ms) / 1000,
                                 " s more"));
    }
  }
  admit(others);
  return finish(Phase::kProgressing,
                absl::StrCat(out.ready, " of ", total, " nodes Ready, ", out.updating,
                             " updating, ", out.failed, " Failed"));
}

}  // namespace kmodd::rollout
