import functools

TIMEOUT = 30


@functools.total_ordering
class Client:
    """HTTP client."""

    def __init__(self, url):
        self.url = url

    def send(self, msg):
        def encode(m):
            return str(m)

        return encode(msg)

    class Retry:
        async def wait(self):
            pass


def connect(url):
    return Client(url)
