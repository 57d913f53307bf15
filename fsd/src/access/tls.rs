//! TLS 1.3 (rustls, ring) for `--listen tcp!HOST!PORT`: the daemon's
//! certificate and key, made at first use in the state directory (0600)
//! and known by their `sha256:` fingerprint; the client's configuration,
//! which trusts exactly the certificate whose fingerprint it pinned (no
//! authority vouches for a daemon on someone's desk), its handshake
//! signatures checked as rustls checks any.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("making the daemon's certificate: {0}")]
    Make(#[from] rcgen::Error),
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("bad pin {0:?}: want sha256: and 64 hex digits, as apexd prints it at start")]
    BadPin(String),
}

/// ring's provider: it builds with a C compiler alone (aws-lc's, which
/// rustls now prefers for its post-quantum key exchange, wants more), and
/// both ends here are apex.
/// AES-128-GCM first: as safe as the 256-bit suite for this use, and a
/// third quicker per byte, which a bulk read over a fast link feels.
#[allow(deprecated)]
fn provider() -> Arc<CryptoProvider> {
    use rustls::crypto::ring::cipher_suite::{
        TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256,
    };
    let cipher_suites = vec![TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256];
    Arc::new(CryptoProvider { cipher_suites, ..rustls::crypto::ring::default_provider() })
}

/// A certificate's fingerprint, as pinned: `sha256:` and its hex.
pub fn fingerprint(cert: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, cert);
    format!("sha256:{}", digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// The daemon's certificate and key in `state_dir/tls/`, made there at
/// first use.
pub fn identity(state_dir: &Path) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), TlsError> {
    let dir = state_dir.join("tls");
    let (cert_path, key_path) = (dir.join("cert.der"), dir.join("key.der"));
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TlsError::Io { path, source }
    };
    if !cert_path.exists() || !key_path.exists() {
        private_dir(&dir).map_err(io(&dir))?;
        let made = rcgen::generate_simple_self_signed(vec!["apexd".to_string()])?;
        write_private(&key_path, &made.key_pair.serialize_der()).map_err(io(&key_path))?;
        write_private(&cert_path, made.cert.der()).map_err(io(&cert_path))?;
    }
    let cert = std::fs::read(&cert_path).map_err(io(&cert_path))?;
    let key = std::fs::read(&key_path).map_err(io(&key_path))?;
    Ok((CertificateDer::from(cert), PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key))))
}

/// Makes `dir` and what is missing above it, closed to others (0700), as
/// the daemon wants its state directory.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Writes `bytes` to a new file of `path` readable by its owner alone,
/// synced, then renamed over whatever was there.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fresh = path.with_extension(format!("new.{}", std::process::id()));
    let _ = std::fs::remove_file(&fresh);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&fresh)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&fresh, path)
}

/// The daemon's TLS 1.3 configuration, and its certificate's fingerprint.
pub fn server(state_dir: &Path) -> Result<(Arc<rustls::ServerConfig>, String), TlsError> {
    let (cert, key) = identity(state_dir)?;
    let print = fingerprint(&cert);
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)?;
    // The record layer is the daemon's own once the handshake is done
    // (`tls::serve`): rustls hands it the keys. No session is resumed, so
    // no ticket is sent.
    config.enable_secret_extraction = true;
    config.send_tls13_tickets = 0;
    Ok((Arc::new(config), print))
}

/// Trusts the one certificate whose fingerprint is `pin`.
#[derive(Debug)]
struct Pinned {
    pin: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got = fingerprint(end_entity);
        match got == self.pin {
            true => Ok(ServerCertVerified::assertion()),
            false => Err(rustls::Error::General(format!(
                "the daemon's certificate is {got}, not the pinned {}: another daemon, or a machine in between",
                self.pin
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not spoken: apexd serves TLS 1.3 only".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// Checks a pin's shape: `sha256:` and 64 hex digits.
pub fn check_pin(pin: &str) -> Result<String, TlsError> {
    let hex = pin.strip_prefix("sha256:").ok_or_else(|| TlsError::BadPin(pin.to_string()))?;
    match hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        true => Ok(format!("sha256:{}", hex.to_ascii_lowercase())),
        false => Err(TlsError::BadPin(pin.to_string())),
    }
}

/// A client's TLS 1.3 configuration that trusts the certificate `pin`
/// names, and it alone.
pub fn client(pin: &str) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let pin = check_pin(pin)?;
    let provider = provider();
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned { pin, provider }))
        .with_no_client_auth();
    // The import's record layer is its own once the handshake is done
    // (`crate::tls`): rustls hands it the keys.
    config.enable_secret_extraction = true;
    Ok(Arc::new(config))
}

/// The name the client asks for (the pin, not the name, is what is
/// trusted).
pub fn server_name() -> ServerName<'static> {
    ServerName::try_from("apexd").expect("a valid DNS name")
}

/// Whether a connection's first bytes are a 9P message (plain 9P to a TLS
/// port): size[4] then Tversion's type. A TLS ClientHello starts 0x16.
pub fn looks_like_9p(first: &[u8]) -> bool {
    first.len() >= 7 && first[4] == 100
}
