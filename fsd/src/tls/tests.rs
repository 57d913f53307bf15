//! Both ends of the record layer, each with the keys of a real handshake
//! between rustls's client and server on a loopback socket.

use super::handshake::{handshake, Handshaken};
use super::records::{record_len, Opened, Opener, Part, Sealer, Side};
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};

type Client = Handshaken<ClientConnectionData>;
type Server = Handshaken<ServerConnectionData>;

/// A client and a server, their handshake done.
async fn pair() -> (Client, Server) {
    static PAIRS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PAIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("apex-tls-pair-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (server_config, pin) = crate::access::tls::server(&dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let client_config = crate::access::tls::client(&pin).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let conn = UnbufferedServerConnection::new(server_config).unwrap();
        handshake(&mut tcp, conn, 1 << 16).await.unwrap()
    });
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let conn = UnbufferedClientConnection::new(client_config, crate::access::tls::server_name()).unwrap();
    let client = handshake(&mut tcp, conn, 1 << 16).await.unwrap();
    (client, server.await.unwrap())
}

/// Opens every record of `wire` in place, down over their heads: the data,
/// in order. Handshake messages go to `sealer`.
fn open_all<D: Side>(opener: &mut Opener, sealer: &mut Sealer<D>, wire: &mut [u8]) -> Vec<u8> {
    let (mut to, mut from) = (0, 0);
    while from < wire.len() {
        let length = record_len(&wire[from..]).unwrap().unwrap();
        assert!(from + length <= wire.len(), "a record cut short");
        match opener.open(wire, to, from).unwrap() {
            (Opened::Data(n), _) => to += n,
            (Opened::Handshake(n), _) => sealer.take_handshake(&wire[to..to + n], opener).unwrap(),
            (Opened::Closed, _) => panic!("closed"),
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
