#include <string>

namespace net {
namespace detail {
int checksum(const char* data);
}

template <typename T>
class Client : public Base {
 public:
  Client();
  ~Client() {}
  virtual int send(const T& msg) = 0;
  bool operator==(const Client& o) const { return true; }
  static Client& instance();

  struct Options {
    int timeout;
  };

 private:
  int (*hook_)(int);
};

template <typename T>
Client<T>::Client() {}

int detail::checksum(const char* data) {
  return 0;
}
}  // namespace net

enum class Mode { Fast, Slow };
using Bytes = std::string;

int main(int argc, char** argv) {
  auto f = [](int x) { return x; };
  return 0;
}
