"""Drive apexd's acme service with PyPI's python-9p (plan9port's C codec),
as `9p read acme/index` and acme.rc scripts do.

Usage: python python9p_acme.py NSDIR/acme. Prints "python-9p acme: ok ID"
when every check holds; raises otherwise.
"""
import sys
import threading

from py9p import OREAD, ORDWR, OTRUNC, OWRITE, RemoteError
from python9p_util import attach, listing, read_all, walk_open
from python9p_util import write as write_mode

def write(c, path, data):
    # 9p write opens OWRITE|OTRUNC; acme ignores OTRUNC.
    return write_mode(c, path, data, OWRITE | OTRUNC)


def refused(c, path, data, says):
    try:
        write(c, path, data)
    except RemoteError as e:
        assert says in str(e), (path, str(e))
        return
    raise AssertionError(f"{path} took {data!r}")


def main():
    c = attach(sys.argv[1], 8192, "nobody-in-particular")

    # acme.rc's newwindow: read new/ctl to EOF, the first word is the id.
    ctl = read_all(c, "new/ctl").decode()
    wid = ctl.split()[0]
    assert len(ctl.split()) == 10 and not ctl.endswith("\n"), ctl
    names = listing(c, "")
    assert names[:9] == ["acme", "cons", "consctl", "draw", "editout", "index", "label", "log", "new"], names
    assert wid in names
    assert sorted(listing(c, wid)) == sorted(
        ["addr", "body", "ctl", "data", "editout", "errors", "event", "rdsel", "tag", "wrsel", "xdata"]
    )

    # winctl with echo: newline-terminated messages.
    write(c, f"{wid}/ctl", b"name /tmp/py9p-acme\n")
    write(c, f"{wid}/body", b"alpha\nbeta\n")
    index = read_all(c, "index").decode()
    line = next(l for l in index.splitlines() if l.split()[0] == wid)
    assert line[60:].startswith("/tmp/py9p-acme Del Snarf "), line
    assert int(line[24:35]) == 11, line

    # An event reader sees a body write as an E event; written-back Look.
    ev = walk_open(c, f"{wid}/event", ORDWR)
    got = {}

    def follow():
        # Opening the events turns the file menu off, and the tag's
        # change (Undo and Put gone) comes first, as tag events.
        seen = b""
        while b"EI" not in seen:
            seen += c.read(ev, 8192, 0)
        got["ev"] = seen

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    write(c, f"{wid}/body", b"gamma\n")
    t.join(10)
    # The text carries its own newline, then the message's.
    events = got.get("ev", b"")
    body_at = events.find(b"EI")
    assert events[body_at:] == b"EI11 17 0 6 gamma\n\n", got
    assert all(l[1:2] in (b"d", b"i") for l in events[:body_at].splitlines()), got
    c.write(ev, b"ML6 10\n")
    c.clunk(ev)

    # addr and xdata on one connection, fids of their own.
    a = walk_open(c, f"{wid}/addr", ORDWR)
    c.write(a, b"/beta/")
    assert c.read(a, 40, 0) == b"          6          10 ", c.read(a, 40, 0)
    x = walk_open(c, f"{wid}/xdata", OREAD)
    assert c.read(x, 100, 0) == b"beta"
    c.clunk(x)
    c.clunk(a)

    refused(c, f"{wid}/ctl", b"bogus\n", "ill-formed control message")
    refused(c, f"{wid}/event", b"MZ0 0\n", "bad event syntax")
    try:
        walk_open(c, "consctl", OREAD)
        raise AssertionError("consctl opened")
    except RemoteError as e:
        assert "permission denied" in str(e), str(e)
    print(f"python-9p acme: ok {wid}")


main()
