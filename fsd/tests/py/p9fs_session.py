"""Drive apexd with PyPI's p9fs (its own 9P codec, in 9P2000 mode).

Usage: python p9fs_session.py HOST PORT. Exits 0 when every check holds;
prints what failed otherwise. Run by fsd/tests/apexd.rs.
"""
import hashlib
import socket
import sys

from py9p import py9p


def connect(host, port, aname=""):
    s = socket.create_connection((host, port))
    c = py9p.Client(s, py9p.Credentials("glenda"), ver=py9p.Version.v9P2000, msize=65536, aname=aname)
    return c


def read_all(c, path):
    c.open(path, py9p.OREAD)
    out = b""
    while True:
        buf = c.read(8192)
        if not buf:
            break
        out += buf
    c.close()
    return out


def write(c, path, data):
    c.open(path, py9p.OWRITE)
    c.write(data)  # on an Rerror, p9fs clunks the fid itself
    c.close()


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    c = connect(host, port)
    index = read_all(c, "/index").decode()
    assert index.startswith("main "), index
    write(c, "/ctl", b"new fromp9fs\n")
    names = [l.split()[0] for l in read_all(c, "/index").decode().splitlines()]
    assert names == ["main", "fromp9fs"], names
    try:
        write(c, "/ctl", b"frobnicate\n")
        raise AssertionError("a bad ctl message was accepted")
    except py9p.RpcError as e:
        assert "expected" in str(e), e
    c.open("/", py9p.OREAD)
    listing = sorted(s.name.decode() if isinstance(s.name, bytes) else s.name for s in c.lsdir())
    c.close()
    assert listing == sorted(["index", "ctl", "new", "registry", "machine", "services", "main", "fromp9fs"]), listing
    uuid = read_all(c, "/main/id").decode().strip()
    assert len(uuid) == 36, uuid
    snapshot = read_all(c, "/main/snapshot")
    assert len(snapshot) > 100, len(snapshot)
    h = read_all(c, "/main/hash").decode().strip()
    assert len(h) == 64, h
    # The hash is blake3 of the snapshot bytes; hashlib has no blake3, so
    # the Rust side checks the value; here, that two reads agree.
    assert read_all(c, "/main/hash").decode().strip() == h
    write(c, "/fromp9fs/label", b"renamed\n")
    assert read_all(c, "/renamed/label") == b"renamed\n"
    # An attach name selects a session directory.
    s = connect(host, port, aname="renamed")
    assert read_all(s, "label") == b"renamed\n"
    # A buffer: made through buffers/new, written, proposed into, followed.
    b = read_all(c, "/main/buffers/new").decode().strip()
    assert b.isdigit(), b
    write(c, "/main/buffers/%s/body" % b, b"from p9fs\n")
    assert read_all(c, "/main/buffers/%s/body" % b) == b"from p9fs\n"
    ctl = dict(l.split(" ", 1) for l in read_all(c, "/main/buffers/%s/ctl" % b).decode().splitlines() if " " in l)
    assert ctl["length"] == "10", ctl
    write(c, "/main/proposals", ("insert %s %s 0\nsaid: " % (b, ctl["version"])).encode())
    assert read_all(c, "/main/buffers/%s/body" % b) == b"said: from p9fs\n"
    try:
        write(c, "/main/proposals", b"insrt 1 0 0\nx")
        raise AssertionError("a bad proposal was accepted")
    except py9p.RpcError as e:
        assert "unknown verb" in str(e), e
    # entries blocks at its end: read only as far as the insert.
    c.open("/main/shards/buffer.%s/entries" % b, py9p.OREAD)
    lines = b""
    while b"said: " not in lines:
        lines += c.read(8192)
    c.close()
    assert lines.startswith(b"1 0 0 {"), lines[:40]
    leases = read_all(c, "/main/meta/leases").decode()
    assert ("buffer.%s 0 " % b) in leases, leases
    info = read_all(c, "/main/shards/buffer.%s/info" % b).decode()
    assert info.startswith("base 0\nlast "), info
    print("p9fs: ok", b, hashlib.sha256(snapshot).hexdigest()[:8])


if __name__ == "__main__":
    main()
