//! The connection loop's own tests: replies in order after a flush,
//! the fid table's answers.

use super::conn::{Ready, WAITING_READS_MAX};
use super::*;
use crate::fcall::{Fcall, NOTAG, OWRITE};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

/// A reply made here goes after every reply a task counted and sent
/// before (flush(5): an Rflush never overtakes the reply it follows),
/// and the channel is not looked in while the count is 0.
#[test]
fn a_reply_made_here_follows_those_tasks_queued_before() {
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let queued = AtomicUsize::new(0);
    let mut list = Vec::new();
    // Sent but not counted: not looked for (a reply is counted before
    // it is sent, so this is never so but here).
    tx.send(Msg { tag: 9, body: Fcall::Rclunk }).unwrap();
    Ready { list: &mut list, rx: &mut rx, queued: &queued }.push(1, Fcall::Rflush);
    assert_eq!(list.iter().map(|m| m.tag).collect::<Vec<_>>(), [1]);
    rx.try_recv().unwrap();
    list.clear();
    for tag in [5, 6] {
        queued.fetch_add(1, SeqCst);
        tx.send(Msg { tag, body: Fcall::Rwrite { count: 1 } }).unwrap();
    }
    Ready { list: &mut list, rx: &mut rx, queued: &queued }.push(7, Fcall::Rflush);
    assert_eq!(list.iter().map(|m| m.tag).collect::<Vec<_>>(), [5, 6, 7]);
    assert_eq!(queued.load(SeqCst), 0);
}

/// Keeps what is written to it, in order; every fid is the same. With
/// `stalls`, a read waits for ever (a stream nothing is written to).
#[derive(Default)]
struct Keep(Mutex<Vec<Vec<u8>>>, bool);

impl Serve for Keep {
    type Fid = ();
    type Error = String;
    async fn attach(&self, _: &str, _: &str) -> Result<(Qid, ())> {
        Ok((Qid::default(), ()))
    }
    async fn walk(&self, _: &(), names: &[String]) -> Result<(Vec<Qid>, Option<()>)> {
        Ok((names.iter().map(|_| Qid::default()).collect(), Some(())))
    }
    async fn open(&self, _: &(), _: u8) -> Result<(Qid, ())> {
        Ok((Qid::default(), ()))
    }
    async fn create(&self, _: &(), _: &str, _: u32, _: u8) -> Result<(Qid, ())> {
        Err("no create".into())
    }
    async fn read(&self, _: &(), _: u64, _: u32) -> Result<Vec<u8>> {
        if self.1 {
            std::future::pending::<()>().await;
        }
        Ok(Vec::new())
    }
    async fn write(&self, _: &(), _: u64, data: Vec<u8>) -> Result<u32> {
        let n = data.len() as u32;
        self.0.lock().unwrap().push(data);
        Ok(n)
    }
    async fn clunk(&self, _: ()) {}
    async fn remove(&self, _: ()) -> Result<()> {
        Err("no remove".into())
    }
    async fn stat(&self, _: &()) -> Result<Stat> {
        Ok(Stat::default())
    }
    async fn wstat(&self, _: &(), _: Stat) -> Result<()> {
        Err("no wstat".into())
    }
}

/// A stream that gives its pieces in turn, each read no more than it
/// is asked for, and notes how much each read asked for.
struct Script {
    pieces: std::collections::VecDeque<Vec<u8>>,
    asked: Arc<Mutex<Vec<usize>>>,
}

impl AsyncRead for Script {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if let Some(mut piece) = self.pieces.pop_front() {
            self.asked.lock().unwrap().push(buf.remaining());
            let n = piece.len().min(buf.remaining());
            buf.put_slice(&piece[..n]);
            if n < piece.len() {
                self.pieces.push_front(piece.split_off(n));
            }
        }
        std::task::Poll::Ready(Ok(()))
    }
}

fn frame(tag: u16, body: Fcall) -> Vec<u8> {
    crate::codec::to_bytes(&Msg { tag, body })
}

/// A large Twrite's data is read into a buffer of its own: once its
/// head (here cut between reads) and some data are in, each read asks
/// for no more than what is left of the frame, so the read that ends
/// it ends exactly there, and the frames after it are read as ever; nor
/// for more than has come, so the buffer is never more than twice what
/// the peer sent (one that declares msize bytes and stalls holds little).
#[tokio::test]
async fn a_large_writes_data_is_read_up_to_its_frames_end_and_no_further() {
    let (one, two): (Vec<u8>, Vec<u8>) = ((0..300_000u32).map(|i| i as u8).collect(), vec![b'z'; 280_000]);
    let mut setup = frame(NOTAG, Fcall::Tversion { msize: 1 << 20, version: "9P2000".into() });
    setup.extend(frame(1, Fcall::Tattach { fid: 0, afid: crate::fcall::NOFID, uname: "u".into(), aname: "".into() }));
    setup.extend(frame(1, Fcall::Twalk { fid: 0, newfid: 1, wnames: vec!["f".into()] }));
    setup.extend(frame(1, Fcall::Topen { fid: 1, mode: OWRITE }));
    let first = frame(2, Fcall::Twrite { fid: 1, offset: 0, data: one.clone() });
    let mut rest = first[100_023 + 70_000..].to_vec();
    rest.extend(frame(3, Fcall::Twrite { fid: 1, offset: 0, data: two.clone() }));
    rest.extend(frame(4, Fcall::Tclunk { fid: 1 }));
    let pieces = [
        setup,
        first[..10].to_vec(),
        first[10..23 + 70_000].to_vec(),
        first[23 + 70_000..100_023 + 70_000].to_vec(),
        rest,
    ];
    let asked = Arc::new(Mutex::new(Vec::new()));
    let script = Script { pieces: pieces.into(), asked: asked.clone() };
    let keep = Arc::new(Keep::default());
    serve_halves(keep.clone(), script, tokio::io::sink(), Config { msize: 1 << 20, ..Config::default() }, None)
        .await
        .expect("served to the end");
    assert!(*keep.0.lock().unwrap() == [one, two], "both writes whole, in order");
    let asked = asked.lock().unwrap().clone();
    // The setup, the head's first 10 bytes, the rest of it with 70,000
    // of data: then as much again (70,000 of the 100,000 that came), as
    // much again (the other 30,000), the room left in that (110,000, of
    // which the last piece gives all), and the frame's last 20,000.
    assert_eq!(asked[3..7], [70_000, 140_000, 110_000, 20_000], "reads asked for: {asked:?}");
}

/// Keeps every byte written to it.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.lock().unwrap().extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// A connection holds at most MAX_FIDS fids: the next walk to a new one
/// is refused, saying so, and a clunk makes room again.
#[tokio::test]
async fn fids_per_connection_are_bounded() {
    let mut script = frame(NOTAG, Fcall::Tversion { msize: 1 << 16, version: "9P2000".into() });
    script.extend(frame(1, Fcall::Tattach { fid: 0, afid: crate::fcall::NOFID, uname: "u".into(), aname: "".into() }));
    for fid in 1..MAX_FIDS as u32 {
        script.extend(frame(2, Fcall::Twalk { fid: 0, newfid: fid, wnames: Vec::new() }));
    }
    script.extend(frame(3, Fcall::Twalk { fid: 0, newfid: MAX_FIDS as u32, wnames: Vec::new() }));
    script.extend(frame(4, Fcall::Tclunk { fid: 1 }));
    script.extend(frame(5, Fcall::Twalk { fid: 0, newfid: MAX_FIDS as u32, wnames: Vec::new() }));
    let out = Capture::default();
    let input = Script { pieces: vec![script].into(), asked: Arc::default() };
    serve_halves(Arc::new(Keep::default()), input, out.clone(), Config::default(), None).await.unwrap();
    let bytes = out.0.lock().unwrap().clone();
    let mut replies = Vec::new();
    let mut at = 0;
    while let Some(n) = crate::codec::check(&bytes[at..], 1 << 16).unwrap() {
        replies.push(crate::codec::parse(&bytes[at..at + n]).unwrap());
        at += n;
    }
    let by_tag = |tag: u16| replies.iter().filter(|m| m.tag == tag).map(|m| m.body.clone()).collect::<Vec<_>>();
    assert!(matches!(&by_tag(3)[..], [Fcall::Rerror { ename }] if ename.contains("clunk some")), "{:?}", by_tag(3));
    assert!(matches!(&by_tag(5)[..], [Fcall::Rwalk { .. }]), "room again after a clunk: {:?}", by_tag(5));
}

/// Reads that wait may ask for WAITING_READS_MAX bytes in all: past it a
/// read that would wait is refused, saying so, while one answered at once
/// (a stat) is served as ever.
#[tokio::test]
async fn reads_that_wait_are_bounded_by_what_they_ask_for() {
    let count = 1u32 << 20;
    let mut script = frame(NOTAG, Fcall::Tversion { msize: count + 24, version: "9P2000".into() });
    script.extend(frame(1, Fcall::Tattach { fid: 0, afid: crate::fcall::NOFID, uname: "u".into(), aname: "".into() }));
    script.extend(frame(1, Fcall::Topen { fid: 0, mode: 0 }));
    let reads = (WAITING_READS_MAX / count as usize) as u16 + 3;
    for tag in 10..10 + reads {
        script.extend(frame(tag, Fcall::Tread { fid: 0, offset: 0, count }));
    }
    script.extend(frame(2, Fcall::Tstat { fid: 0 }));
    let out = Capture::default();
    let input = Script { pieces: vec![script].into(), asked: Arc::default() };
    let config = Config { msize: count + 24, ..Config::default() };
    serve_halves(Arc::new(Keep(Mutex::default(), true)), input, out.clone(), config, None).await.unwrap();
    let bytes = out.0.lock().unwrap().clone();
    let mut replies = Vec::new();
    let mut at = 0;
    while let Some(n) = crate::codec::check(&bytes[at..], count + 24).unwrap() {
        replies.push(crate::codec::parse(&bytes[at..at + n]).unwrap());
        at += n;
    }
    let refused: Vec<_> = replies
        .iter()
        .filter(|m| matches!(&m.body, Fcall::Rerror { ename } if ename.contains("reads wait on this connection")))
        .map(|m| m.tag)
        .collect();
    let first_refused = 10 + (WAITING_READS_MAX / count as usize) as u16;
    assert_eq!(refused, (first_refused..10 + reads).collect::<Vec<_>>(), "{replies:?}");
    assert!(replies.iter().any(|m| m.tag == 2 && matches!(m.body, Fcall::Rstat { .. })), "a stat is answered");
}

/// A stream that keeps what is written to it until it is flushed, as
/// TLS keeps sealed records the socket had no room for: every reply is
/// flushed, or a client would wait for it for ever.
#[tokio::test]
async fn replies_are_flushed_not_left_in_the_writer() {
    let (client_end, server_end) = tokio::net::UnixStream::pair().unwrap();
    let held = tokio::io::BufWriter::with_capacity(1 << 16, server_end);
    let server = tokio::spawn(serve_conn(Arc::new(Keep::default()), held, Config::default()));
    let answered = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let c = crate::Client::handshake(client_end, 8192).await.unwrap();
        let root = c.attach("u", "").await.unwrap();
        c.stat(root).await.unwrap();
    })
    .await;
    assert!(answered.is_ok(), "the replies stayed in the writer");
    server.abort();
}
