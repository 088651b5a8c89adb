# feed_drain.py FILE: every line a feed file (NAME/events..., a subscription)
# has now, without waiting: O_NONBLOCK reads until EAGAIN. For the tests that read feeds.
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
out = b""
while True:
    try:
        b = os.read(fd, 65536)
    except BlockingIOError:
        break
    if not b:
        break
    out += b
os.close(fd)
sys.stdout.buffer.write(out)
