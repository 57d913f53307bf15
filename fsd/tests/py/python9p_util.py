"""What the python-9p scripts share: fids, walks and whole-file reads.

python-9p is plan9port's C codec in a wheel; these are the few calls the
scripts make with it, as plan9port's 9p(1) makes them.
"""
import struct

from py9p import Client, OREAD, OWRITE, decode_dir

next_fid = [10]


def attach(socket, msize, uname):
    """Version (plain 9P2000 is what must come back) and attach fid 0 to
    the root, as 9p(1) does."""
    c = Client.connect_unix(socket, msize=msize)
    c.negotiate()
    assert c.version_string == "9P2000", c.version_string
    c.attach(0, uname=uname, aname="")
    return c


def fid():
    next_fid[0] += 1
    return next_fid[0]


def walk_open(c, path, mode):
    f = fid()
    c.walk(0, f, path)
    c.open(f, mode)
    return f


def read_all(c, path):
    f = walk_open(c, path, OREAD)
    out, offset = b"", 0
    while True:
        buf = c.read(f, 8192, offset)
        if not buf:
            break
        out += buf
        offset += len(buf)
    c.clunk(f)
    return out


def write(c, path, data, mode=OWRITE):
    f = walk_open(c, path, mode)
    try:
        return c.write(f, data)
    finally:
        c.clunk(f)


def listing(c, path):
    raw = read_all(c, path)
    names = []
    while raw:
        (n,) = struct.unpack("<H", raw[:2])
        names.append(decode_dir(raw[: n + 2]).name)
        raw = raw[n + 2 :]
    return names
