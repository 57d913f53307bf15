//! TLS 1.3's handshake, either side, by rustls's unbuffered connection
//! over a TCP socket of ours; then its keys are taken over by the record
//! layer (`records`).

use super::records::{self, Opener, Sealer, Side};
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, UnbufferedStatus};
use rustls::ExtractedSecrets;
use std::io;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A connection of rustls's, unbuffered, client or server.
pub trait Unbuffered: Send {
    type Data: Side;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data>;
    fn into_kernel(self) -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error>;
}

impl Unbuffered for UnbufferedClientConnection {
    type Data = ClientConnectionData;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
    fn into_kernel(self) -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error> {
        self.dangerous_into_kernel_connection()
    }
}

impl Unbuffered for UnbufferedServerConnection {
    type Data = ServerConnectionData;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
    fn into_kernel(self) -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error> {
        self.dangerous_into_kernel_connection()
    }
}

/// A connection whose handshake is done: its record layer, and what came
/// with the handshake's end.
pub struct Handshaken<D: Side> {
    pub opener: Opener,
    pub sealer: Sealer<D>,
    /// The buffer records were read into, with records not yet opened at
    /// `[..end]`.
    pub stage: Box<[u8]>,
    pub end: usize,
    /// Data rustls opened with the handshake's last records (a client's
    /// first request, sent with its Finished).
    pub early: Vec<u8>,
}

/// What the handshake does next, once rustls's state is let go of.
enum Step {
    Read,
    Again,
    Done,
}

/// TLS's handshake over `tcp`, reading into a stage of `stage` bytes.
pub async fn handshake<C: Unbuffered>(
    tcp: &mut tokio::net::TcpStream,
    mut conn: C,
    stage: usize,
) -> io::Result<Handshaken<C::Data>> {
    let mut incoming = vec![0; stage].into_boxed_slice();
    let mut filled = 0;
    let mut outgoing = Vec::new();
    let mut early = Vec::new();
    loop {
        let UnbufferedStatus { discard, state } = conn.process(&mut incoming[..filled]);
        let state = match state {
            Ok(state) => state,
            Err(e) => {
                // rustls has the alert that says why: sent, as far as the
                // peer takes it, then the error.
                let after = conn.process(&mut incoming[discard..filled]);
                if let Ok(ConnectionState::EncodeTlsData(mut data)) = after.state {
                    let mut alert = Vec::new();
                    if encode(&mut alert, |out| data.encode(out)).is_ok() {
                        let _ = tcp.write_all(&alert).await;
                    }
                }
                return Err(invalid(e));
            }
        };
        let step = match state {
            ConnectionState::EncodeTlsData(mut data) => {
                encode(&mut outgoing, |out| data.encode(out))?;
                Step::Again
            }
            ConnectionState::TransmitTlsData(data) => {
                tcp.write_all(&outgoing).await?;
                outgoing.clear();
                data.done();
                Step::Again
            }
            ConnectionState::BlockedHandshake => Step::Read,
            // Done; records that came after its end are opened by the
            // record layer, and those rustls opened already are kept.
            ConnectionState::WriteTraffic(_) => Step::Done,
            ConnectionState::ReadTraffic(mut traffic) => {
                while let Some(record) = traffic.next_record() {
                    early.extend_from_slice(record.map_err(invalid)?.payload);
                }
                Step::Done
            }
            ConnectionState::PeerClosed | ConnectionState::Closed => {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed the connection"))
            }
            other => return Err(invalid(format!("unexpected TLS state in the handshake: {other:?}"))),
        };
        incoming.copy_within(discard..filled, 0);
        filled -= discard;
        match step {
            Step::Again => {}
            Step::Done => {
                // What rustls encoded and has not yet asked to be sent
                // (a client's Finished, when the server's data came with
                // its own): sent now, before the record layer seals
                // anything.
                tcp.write_all(&outgoing).await?;
                let (opener, sealer) = records::split(conn.into_kernel().map_err(invalid)?).map_err(invalid)?;
                return Ok(Handshaken { opener, sealer, stage: incoming, end: filled, early });
            }
            Step::Read => match tcp.read(&mut incoming[filled..]).await? {
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed the connection")),
                n => filled += n,
            },
        }
    }
}

/// Room first made for a handshake message.
const HANDSHAKE_ROOM: usize = 1024;

/// Puts what `write` writes onto the end of `out`: room is made for it,
/// as much as it says it needs.
fn encode(out: &mut Vec<u8>, mut write: impl FnMut(&mut [u8]) -> Result<usize, EncodeError>) -> io::Result<()> {
    let len = out.len();
    let mut room = HANDSHAKE_ROOM;
    loop {
        out.resize(len + room, 0);
        match write(&mut out[len..]) {
            Ok(n) => {
                out.truncate(len + n);
                return Ok(());
            }
            Err(EncodeError::InsufficientSize(s)) if s.required_size > room => room = s.required_size,
            Err(e) => {
                out.truncate(len);
                return Err(invalid(e));
            }
        }
    }
}

fn invalid(e: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}
