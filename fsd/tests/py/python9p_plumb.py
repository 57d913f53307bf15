"""Drive apexd's posted `plumb` service with PyPI's python-9p
(plan9port's C codec), as plumb(1), `9p write plumb/send` and a program
reading a port do: one client sends, another reads the port.

Usage: python python9p_plumb.py NSDIR/plumb DIR, where DIR holds a file
named FILE. Prints "python-9p plumb: ok" when every check holds; raises
otherwise.
"""
import sys
import threading

from py9p import OREAD, OTRUNC, OWRITE, RemoteError
from python9p_util import attach, listing, read_all, walk_open
from python9p_util import write as write_mode


def message(src, dst, wdir, attr, data):
    return f"{src}\n{dst}\n{wdir}\ntext\n{attr}\n{len(data)}\n{data}".encode()


def main():
    socket, wdir = sys.argv[1], sys.argv[2]
    sender = attach(socket, 8192, "sender")
    reader = attach(socket, 8192, "reader")

    # plumber(4)'s root: rules, send, and a file per port the rules name.
    names = listing(sender, "")
    assert "rules" in names and "send" in names and "edit" in names and "web" in names, names
    assert "include basic" in read_all(sender, "rules").decode()

    # The reader waits on `edit`; the sender plumbs FILE:3 from DIR.
    port = walk_open(reader, "edit", OREAD)
    got = {}

    def follow():
        got["m"] = reader.read(port, 8192, 0)

    t = threading.Thread(target=follow)
    t.start()
    # 9p write opens OWRITE|OTRUNC.
    write_mode(sender, "send", message("py", "", wdir, "click=1", "FILE:3"), OWRITE | OTRUNC)
    t.join(30)
    assert not t.is_alive(), "no message came to the edit port"
    fields = got["m"].split(b"\n", 6)
    assert fields[:6] == [b"py", b"edit", wdir.encode(), b"text", b"addr=3", str(len(wdir) + 5).encode()], got
    assert fields[6] == f"{wdir}/FILE".encode(), got

    # A message no rule takes is refused as the plumber refuses it.
    try:
        write_mode(sender, "send", message("py", "", wdir, "", "no such thing"), OWRITE)
        raise AssertionError("an unmatched message was taken")
    except RemoteError as e:
        assert "no matching plumb rule" in str(e), str(e)

    # Rules that do not read are refused whole, with line and reason,
    # and the rules stay as they were.
    try:
        write_mode(sender, "rules", b"type is text\ndata frob x\nplumb to edit\n", OWRITE | OTRUNC)
        raise AssertionError("bad rules were taken")
    except RemoteError as e:
        assert "rules:2: unknown verb frob" in str(e), str(e)
    assert "include basic" in read_all(sender, "rules").decode()
    reader.clunk(port)
    print("python-9p plumb: ok")


if __name__ == "__main__":
    main()
