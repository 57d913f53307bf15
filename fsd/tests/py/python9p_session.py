"""Drive apexd with PyPI's python-9p (plan9port's C codec in a wheel).

Usage: python python9p_session.py SOCKET. Exits 0 and prints
"python-9p: ok BUFFER" when every check holds; raises otherwise. Run by
fsd/tests/apexd (the Rust side then checks what it left behind).
"""
import sys
import threading
import time

from py9p import OREAD, ORDWR, OTRUNC, OWRITE, RemoteError, Rflush, Rread, Tflush, Tread
from python9p_util import attach, listing, read_all, walk_open, write

def ctl_field(c, b, key):
    for line in read_all(c, f"main/buffers/{b}/ctl").decode().splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return v
    raise AssertionError(f"no {key} in ctl")


def main():
    c = attach(sys.argv[1], 65536, "glenda")

    assert "main" in listing(c, "")
    assert sorted(listing(c, "main")) == sorted(
        ["id", "label", "ctl", "hash", "snapshot", "proposals", "attach", "meta", "shards", "buffers", "acme", "terms", "plumb"]
    )
    assert sorted(listing(c, "main/meta")) == sorted(
        ["attachments", "leases", "rules", "notifications", "processes", "settings", "windows"]
    )

    b = read_all(c, "main/buffers/new").decode().strip()
    assert b.isdigit(), b
    assert f"buffer.{b}" in listing(c, "main/shards")
    assert sorted(listing(c, f"main/buffers/{b}")) == sorted(["body", "name", "ctl", "addr", "data", "event"])

    write(c, f"main/buffers/{b}/body", b"hello\n")
    write(c, f"main/buffers/{b}/body", b"there\n")
    assert read_all(c, f"main/buffers/{b}/body") == b"hello\nthere\n"
    # An open with OTRUNC empties the body first.
    write(c, f"main/buffers/{b}/body", b"hello\n", OWRITE | OTRUNC)
    assert read_all(c, f"main/buffers/{b}/body") == b"hello\n"

    # A reader blocked at the end of the shard's entries sees a proposal
    # made on another fid of the same connection (tags multiplexed).
    entries = walk_open(c, f"main/shards/buffer.{b}/entries", OREAD)
    seen = read_until(c, entries, 0, b"hello")
    got = {}

    def follow():
        got["lines"] = read_until(c, entries, len(seen), b"world")

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    version = ctl_field(c, b, "version")
    write(c, "main/proposals", f"insert {b} {version} 6\nworld\n".encode())
    t.join(10)
    assert not t.is_alive(), "the entries reader never saw the insert"
    assert b'"text":"world\\n"' in got["lines"], got["lines"]

    # Tflush of a read blocked at the end: the read gets no reply, the
    # flush gets Rflush, and the connection goes on.
    offset = len(seen) + len(got["lines"])
    blocked = threading.Thread(
        target=lambda: c.rpc(Tread(fid=entries, offset=offset, count=8192), Rread, tag=77), daemon=True
    )
    blocked.start()
    blocked.join(0.3)
    assert blocked.is_alive(), "a read at the end of entries did not block"
    c.rpc(Tflush(oldtag=77), Rflush)
    c.clunk(entries)

    # addr and data, as acme's: select "hello", replace it.
    a = walk_open(c, f"main/buffers/{b}/addr", ORDWR)
    c.write(a, b"#0,#5")
    assert c.read(a, 64, 0) == b"          0           5 ", c.read(a, 64, 0)
    write(c, f"main/buffers/{b}/data", b"HELLO")
    c.clunk(a)
    assert read_all(c, f"main/buffers/{b}/body") == b"HELLO\nworld\n"

    # Refused writes say why, and change nothing.
    hash_before = read_all(c, "main/hash")
    for path, data, says in [
        ("main/proposals", b"insrt 1 0 0\nx", "unknown verb"),
        ("main/proposals", f"insert {b} 0\nx".encode(), "insert wants"),
        (f"main/buffers/{b}/ctl", b"frobnicate", "expected"),
        (f"main/buffers/{b}/addr", b"/nomatch/", "no match"),
        ("ctl", b"del nosuch\n", "nosuch"),
    ]:
        try:
            write(c, path, data)
            raise AssertionError(f"{path} accepted {data!r}")
        except RemoteError as e:
            assert says in str(e), (path, str(e))
    assert read_all(c, "main/hash") == hash_before

    # A terminal: the ctl write's reply names it; its screen shows what
    # its program printed, and cons streams what it prints next.
    ctl = walk_open(c, "main/ctl", ORDWR)
    c.write(ctl, b"term -d / -s 40x5 /bin/sh\n")
    t = c.read(ctl, 64, 0).decode().strip()
    c.clunk(ctl)
    assert t.isdigit(), t
    assert read_all(c, "main/terms/index").decode().startswith(f"{t} ")
    cons = walk_open(c, f"main/terms/{t}/cons", OREAD)
    write(c, f"main/terms/{t}/cons", b"echo from-py9p-$((2+3))\n")
    out = b""
    while b"from-py9p-5" not in out:
        out += c.read(cons, 4096, 0)
    c.clunk(cons)
    for _ in range(500):
        if "from-py9p-5" in read_all(c, f"main/terms/{t}/screen").decode():
            break
        time.sleep(0.02)
    else:
        raise AssertionError("the screen never showed the output")
    write(c, f"main/terms/{t}/ctl", b"close\n")

    assert f"buffer.{b} 0 " in read_all(c, "main/meta/leases").decode()
    assert read_all(c, f"main/shards/buffer.{b}/lease").decode().startswith("0 ")
    print("python-9p: ok", b)


def read_until(c, f, offset, needle):
    out = b""
    while needle not in out:
        buf = c.read(f, 8192, offset + len(out))
        if not buf:
            raise AssertionError(f"entries ended before {needle!r}: {out!r}")
        out += buf
    return out


if __name__ == "__main__":
    main()
