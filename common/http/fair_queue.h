#pragma once

// A queue whose keys take turns: one item of each key that has items waiting, round and
// round, each key's own items in the order they came. The HTTP server keys its work by the
// client's address, so that a client with a hundred requests waiting delays another
// client's one request by one turn, not by a hundred. Not thread-safe: its owner locks.

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace kmodd::http {

template <class T>
class FairQueue {
 public:
  void Push(const std::string& key, T item) {
    std::deque<T>& items = items_[key];
    if (items.empty()) {
      turns_.push_back(key);
    }
    items.push_back(std::move(item));
    ++size_;
  }

  // The item Pop() would return, or nullptr when the queue is empty.
  T* Front() {
    if (turns_.empty()) {
      return nullptr;
    }
    return &items_.find(turns_.front())->second.front();
  }

  std::optional<T> Pop() {
    if (turns_.empty()) {
      return std::nullopt;
    }
    std::string key = std::move(turns_.front());
    turns_.pop_front();
    auto it = items_.find(key);
    T item = std::move(it->second.front());
    it->second.pop_front();
    --size_;
    if (it->second.empty()) {
      items_.erase(it);  // a key with nothing waiting costs nothing
    } else {
      turns_.push_back(std::move(key));
    }
    return item;
  }

  void Clear() {
    items_.clear();
    turns_.clear();
    size_ = 0;
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  size_t keys() const { return items_.size(); }

 private:
  std::unordered_map<std::string, std::deque<T>> items_;
  std::deque<std::string> turns_;  // each key with items, once, in the order of its turn
  size_t size_ = 0;
};

}  // namespace kmodd::http
