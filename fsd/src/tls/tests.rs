//! Both ends of the record layer, each with the keys of a real handshake
//! between rustls's client and server on a loopback socket.

use super::handshake::{handshake, Handshaken};
use super::records::{Opened, Opener, Part, Sealer, Side};
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};

type Client = Handshaken<ClientConnectionData>;
type Server = Handshaken<ServerConnectionData>;

/// A client's handshake with what `serve` makes of the socket a daemon
/// accepts (with a certificate of its own, which the client pins).
async fn connected<S, F>(
    serve: impl FnOnce(tokio::net::TcpStream, std::sync::Arc<rustls::ServerConfig>) -> F + Send + 'static,
) -> (Client, S, tokio::net::TcpStream)
where
    S: Send + 'static,
    F: std::future::Future<Output = S> + Send + 'static,
{
    static DAEMONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = DAEMONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("apex-tls-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (server_config, pin) = crate::access::tls::server(&dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let daemon = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        tcp.set_nodelay(true).unwrap();
        serve(tcp, server_config).await
    });
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let config = crate::access::tls::client(&pin).unwrap();
    let conn = UnbufferedClientConnection::new(config, crate::access::tls::server_name()).unwrap();
    let client = handshake(&mut tcp, conn, 1 << 16).await.unwrap();
    (client, daemon.await.unwrap(), tcp)
}

/// A client and a server, their handshake done.
async fn pair() -> (Client, Server) {
    let (client, server, _) = connected(|mut tcp, config| async move {
        let conn = UnbufferedServerConnection::new(config).unwrap();
        handshake(&mut tcp, conn, 1 << 16).await.unwrap()
    })
    .await;
    (client, server)
}

/// Opens every record of `wire` in place, down over their heads: the data,
/// in order. Handshake messages go to `sealer`.
fn open_all<D: Side>(opener: &mut Opener, sealer: &mut Sealer<D>, wire: &mut [u8]) -> Vec<u8> {
    let (mut to, mut from) = (0, 0);
    while from < wire.len() {
        let (opened, length) = opener.open_whole(wire, to, from).unwrap().expect("a record cut short");
        match opened {
            Opened::Data(n) => to += n,
            Opened::Handshake(n) => sealer.take_handshake(&wire[to..to + n], opener).unwrap(),
            Opened::Closed => panic!("closed"),
        }
        from += length;
    }
    wire[..to].to_vec()
}

/// What `parts` say to write.
fn written(meta: &[u8], data: &[u8], parts: &[Part]) -> Vec<u8> {
    parts
        .iter()
        .flat_map(|p| match p {
            Part::Meta(r) => meta[r.clone()].to_vec(),
            Part::Data(r) => data[r.clone()].to_vec(),
        })
        .collect()
}

/// Data of every length around a record's (and none) sealed where it
/// lies with a head before it, as the daemon writes a large Rread: the
/// client opens exactly the head and the data, and the daemon copied no
/// more than a byte a record and the last piece.
#[tokio::test]
async fn data_sealed_where_it_lies_opens_whole_at_the_client() {
    let (mut client, mut server) = pair().await;
    for len in [0, 1, 16_382, 16_383, 16_384, 16_385, 32_767, 32_768, (1 << 20) + 7] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let mut sealing = data.clone();
        let (mut meta, mut parts) = (Vec::new(), Vec::new());
        server.sealer.seal_meta(b"head", &mut meta, &mut parts).unwrap();
        server.sealer.seal_in_place(&mut sealing, &mut meta, &mut parts).unwrap();
        assert!(meta.len() < 64 + 44 * (len / 16_383 + 1) + 16_384 + 22, "{len}: meta of {} bytes", meta.len());
        let mut wire = written(&meta, &sealing, &parts);
        let opened = open_all(&mut client.opener, &mut client.sealer, &mut wire);
        assert!(opened == [&b"head"[..], &data].concat(), "{len} bytes came back changed");
    }
}

/// The peer asks for key updates three times before anything is sent
/// back: one update of ours is owed, said before the next data and not
/// again, and both ends go on under the new keys.
#[tokio::test]
async fn a_key_update_asked_is_answered_once_before_the_next_data() {
    let (mut client, mut server) = pair().await;
    let mut asks = Vec::new();
    for _ in 0..3 {
        server.sealer.ask_update(&mut asks);
    }
    server.sealer.seal(b"after", &mut asks).unwrap();
    assert_eq!(open_all(&mut client.opener, &mut client.sealer, &mut asks), b"after");
    let mut answer = Vec::new();
    client.sealer.seal(b"one", &mut answer).unwrap();
    client.sealer.seal(b"two", &mut answer).unwrap();
    // One key update (a message of 5 bytes in a record of its own), then
    // the data: a record's head, content, type and tag.
    assert_eq!(answer.len(), (5 + 5 + 1 + 16) + 2 * (5 + 3 + 1 + 16));
    assert_eq!(open_all(&mut server.opener, &mut server.sealer, &mut answer), b"onetwo");
}

/// After an alert, either side's, nothing more is sealed; a record that
/// says the end is read as the end.
#[tokio::test]
async fn nothing_is_sealed_after_an_alert() {
    let (mut client, mut server) = pair().await;
    let mut wire = Vec::new();
    server.sealer.alert(None, &mut wire);
    assert!(server.sealer.seal(b"more", &mut wire).is_err(), "sealed after close_notify");
    let length = wire.len();
    assert!(matches!(client.opener.open(&mut wire, 0, 0).unwrap(), (Opened::Closed, l) if l == length));
    let mut alert = Vec::new();
    client.sealer.alert(Some(&super::records::RecordError::Opened), &mut alert);
    assert!(!alert.is_empty());
    assert!(client.sealer.seal(b"more", &mut alert).is_err(), "sealed after an alert");
    let e = server.opener.open(&mut alert, 0, 0).unwrap_err();
    assert!(e.to_string().contains("alert 20"), "{e}");
}

/// Asks the kernel for a socket buffer of about `bytes` (`option`
/// SO_SNDBUF): a socket with little room takes a writev in pieces cut
/// anywhere.
fn small_buffer(fd: std::os::fd::RawFd, option: libc::c_int, bytes: libc::c_int) {
    // SAFETY: setsockopt reads a c_int from a live local; `fd` is open.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Reads from `tcp` onto `wire` and opens the records that come, a few
/// kilobytes a read, until `want` bytes of data are opened (or the
/// peer's end).
async fn read_opened(
    tcp: &mut tokio::net::TcpStream,
    client: &mut Client,
    wire: &mut Vec<u8>,
    want: usize,
) -> (Vec<u8>, bool) {
    use tokio::io::AsyncReadExt;
    let (mut got, mut closed) = (Vec::new(), false);
    while got.len() < want && !closed {
        loop {
            if got.len() >= want {
                break;
            }
            let Some((opened, length)) = client.opener.open_whole(wire, 0, 0).unwrap() else { break };
            match opened {
                Opened::Data(n) => got.extend_from_slice(&wire[..n]),
                Opened::Handshake(n) => {
                    let message = wire[..n].to_vec();
                    client.sealer.take_handshake(&message, &mut client.opener).unwrap();
                }
                Opened::Closed => closed = true,
            }
            wire.drain(..length);
        }
        if got.len() >= want || closed {
            break;
        }
        let mut chunk = [0; 3000];
        let n = tcp.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the daemon hung up after {} bytes of {want}", got.len());
        wire.extend_from_slice(&chunk[..n]);
    }
    (got, closed)
}

/// The daemon's halves (its socket's send buffer small: a writev is taken
/// in pieces cut anywhere) and a client's record layer, connected.
async fn halves() -> (super::serve::Reader, super::serve::Writer, Client, tokio::net::TcpStream) {
    let (client, (reader, writer), tcp) = connected(|tcp, config| async move {
        small_buffer(std::os::fd::AsRawFd::as_raw_fd(&tcp), libc::SO_SNDBUF, 5000);
        super::serve::accept(tcp, config).await.unwrap()
    })
    .await;
    (reader, writer, client, tcp)
}

/// A reply of 1 MiB and 7 bytes sealed where it lies goes out through a
/// socket with little room and opens whole; the client's large write
/// comes in whole (the reader's room grown for it); a key update the
/// client asks for is followed, the daemon's own said before its next
/// reply; its end is close_notify.
#[tokio::test]
async fn the_daemon_s_halves_carry_replies_and_requests_whole() {
    use apex_ninep::srv::ReplyWrite;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut reader, mut writer, mut client, mut tcp) = halves().await;
    let first: Vec<u8> = (0..(1 << 20) + 7).map(|i| (i * 13 % 251) as u8).collect();
    let second: Vec<u8> = first.iter().rev().copied().collect();
    let request: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
    let (sent, asked) = ((first.clone(), second.clone()), request.clone());
    let daemon = tokio::spawn(async move {
        let (mut first, mut second) = sent;
        writer.write_reply(b"head", &mut first).await.unwrap();
        let mut got = vec![0; asked.len()];
        reader.read_exact(&mut got).await.unwrap();
        assert!(got == asked, "the client's write came in changed");
        writer.write_reply(b"next", &mut second).await.unwrap();
        writer.end().await;
    });
    let mut wire = client.stage[..client.end].to_vec();
    let (got, _) = read_opened(&mut tcp, &mut client, &mut wire, 4 + first.len()).await;
    assert!(got == [&b"head"[..], &first].concat(), "the first reply came changed");
    let mut out = Vec::new();
    client.sealer.ask_update(&mut out);
    client.sealer.seal(&request, &mut out).unwrap();
    tcp.write_all(&out).await.unwrap();
    let (got, _) = read_opened(&mut tcp, &mut client, &mut wire, 4 + second.len()).await;
    assert!(got == [&b"next"[..], &second].concat(), "the reply after the key update came changed");
    let (rest, closed) = read_opened(&mut tcp, &mut client, &mut wire, usize::MAX).await;
    assert!(rest.is_empty() && closed, "the end is close_notify");
    daemon.await.unwrap();
}

/// A record changed on the way: the daemon's read fails saying so, and
/// its end tells the client why (bad_record_mac), not close_notify.
#[tokio::test]
async fn a_record_that_does_not_open_is_answered_with_an_alert() {
    use apex_ninep::srv::ReplyWrite;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut reader, mut writer, mut client, mut tcp) = halves().await;
    let mut out = Vec::new();
    client.sealer.seal(b"Tversion", &mut out).unwrap();
    out[7] ^= 1;
    tcp.write_all(&out).await.unwrap();
    let e = reader.read(&mut [0; 64]).await.unwrap_err();
    assert!(e.to_string().contains("bad_record_mac"), "{e}");
    writer.end().await;
    let mut wire = Vec::new();
    tcp.read_to_end(&mut wire).await.unwrap();
    let e = client.opener.open(&mut wire, 0, 0).unwrap_err();
    assert!(e.to_string().contains("alert 20"), "{e}");
}
