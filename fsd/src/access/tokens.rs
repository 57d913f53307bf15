//! Tokens: a name, a scope and a secret, kept one per line in the state
//! directory's `tokens` (mode 0600; read again at every Tauth, so `apex
//! token new` and `rm` apply at once), and the conversation of 9P's Tauth
//! that proves one: the auth fid reads a fresh challenge; the client
//! writes `NAME MAC`, the MAC (HMAC-SHA256, keyed by the secret) of the
//! challenge, the uname and the aname; a right one grants the token's
//! scope to an attach with that auth fid, for that uname and aname only.
//! A proof answers one challenge: replayed, it proves nothing. Secrets are
//! never logged.

use super::{AccessError, Scope};
use ring::rand::SecureRandom;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: line {line}: want NAME SCOPE SECRET", path.display())]
    Malformed { path: PathBuf, line: usize },
    #[error("a token named {0} exists already: apex token rm {0} first")]
    Exists(String),
    #[error("no token named {0} (apex token ls lists them)")]
    NoSuch(String),
    #[error("bad token name {0:?}: letters, digits, '-', '_' and '.', at most 64")]
    BadName(String),
    #[error("{}: not a token (want NAME:SECRET, as apex token new prints it)", path.display())]
    NotAToken { path: PathBuf },
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error("no randomness from the system")]
    Random,
}

/// A token as kept.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub name: String,
    pub scope: Scope,
    secret: Vec<u8>,
}

/// Its name and scope: the secret is never printed, logged or shown.
impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token").field("name", &self.name).field("scope", &self.scope).finish_non_exhaustive()
    }
}

/// The tokens of the state directory `dir`.
pub struct Tokens {
    path: PathBuf,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

fn random(n: usize) -> Result<Vec<u8>, TokenError> {
    let mut bytes = vec![0u8; n];
    ring::rand::SystemRandom::new().fill(&mut bytes).map_err(|_| TokenError::Random)?;
    Ok(bytes)
}

fn good_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl Tokens {
    pub fn new(state_dir: &Path) -> Tokens {
        Tokens { path: state_dir.join("tokens") }
    }

    pub fn list(&self) -> Result<Vec<Token>, TokenError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(TokenError::Io { path: self.path.clone(), source }),
        };
        let malformed = |line| TokenError::Malformed { path: self.path.clone(), line };
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                let [name, scope, secret] = l.split(' ').collect::<Vec<_>>()[..] else { return Err(malformed(i + 1)) };
                let secret = unhex(secret).ok_or_else(|| malformed(i + 1))?;
                Ok(Token { name: name.to_string(), scope: Scope::parse(scope)?, secret })
            })
            .collect()
    }

    fn save(&self, tokens: &[Token]) -> Result<(), TokenError> {
        let text: String =
            tokens.iter().map(|t| format!("{} {} {}\n", t.name, t.scope.name(), hex(&t.secret))).collect();
        super::tls::write_private(&self.path, text.as_bytes())
            .map_err(|source| TokenError::Io { path: self.path.clone(), source })
    }

    /// Makes token `name` of `scope`; returns what its holder keeps, as
    /// `--token FILE` reads it: `NAME:SECRET`.
    pub fn create(&self, name: &str, scope: Scope) -> Result<String, TokenError> {
        if !good_name(name) {
            return Err(TokenError::BadName(name.to_string()));
        }
        if let Some(dir) = self.path.parent() {
            super::tls::private_dir(dir).map_err(|source| TokenError::Io { path: dir.to_path_buf(), source })?;
        }
        let mut tokens = self.list()?;
        if tokens.iter().any(|t| t.name == name) {
            return Err(TokenError::Exists(name.to_string()));
        }
        let secret = random(32)?;
        let text = format!("{name}:{}", hex(&secret));
        tokens.push(Token { name: name.to_string(), scope, secret });
        self.save(&tokens)?;
        Ok(text)
    }

    pub fn remove(&self, name: &str) -> Result<(), TokenError> {
        let mut tokens = self.list()?;
        let before = tokens.len();
        tokens.retain(|t| t.name != name);
        if tokens.len() == before {
            return Err(TokenError::NoSuch(name.to_string()));
        }
        self.save(&tokens)
    }
}

/// What a client holds: a token's name and secret, read from `path`.
#[derive(Clone)]
pub struct Held {
    name: String,
    secret: Vec<u8>,
}

impl Held {
    pub fn read(path: &Path) -> Result<Held, TokenError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| TokenError::Io { path: path.to_path_buf(), source })?;
        let not = || TokenError::NotAToken { path: path.to_path_buf() };
        let (name, secret) = text.trim().split_once(':').ok_or_else(not)?;
        Ok(Held { name: name.to_string(), secret: unhex(secret).ok_or_else(not)? })
    }

    /// The proof of `challenge` for `uname` and `aname`: `NAME MAC\n`.
    pub fn prove(&self, challenge: &[u8], uname: &str, aname: &str) -> Vec<u8> {
        format!("{} {}\n", self.name, hex(&mac(&self.secret, challenge, uname, aname))).into_bytes()
    }
}

/// A name a client chose, as logged: at most 64 characters (quoted by
/// the `?` it is logged with, so it cannot make lines of its own).
fn said(name: &str) -> String {
    name.chars().take(64).collect()
}

fn mac(secret: &[u8], challenge: &[u8], uname: &str, aname: &str) -> Vec<u8> {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let mut ctx = ring::hmac::Context::with_key(&key);
    for part in [challenge, b"\0", uname.as_bytes(), b"\0", aname.as_bytes()] {
        ctx.update(part);
    }
    ctx.sign().as_ref().to_vec()
}

/// The daemon's side: a conversation per Tauth, against the tokens of a
/// state directory; `proven` is raised once any of a connection's proves
/// itself.
pub struct TokenAuth {
    pub state_dir: PathBuf,
    pub proven: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

struct Conversation {
    tokens: Tokens,
    connection_proven: std::sync::Arc<std::sync::atomic::AtomicBool>,
    challenge: Vec<u8>,
    uname: String,
    aname: String,
    /// The token proven: its name and secret, looked for again at every
    /// attach, so one removed (or made anew) grants nothing more.
    proven: Option<(String, Vec<u8>)>,
}

impl apex_ninep::srv::auth::Authenticate for TokenAuth {
    fn begin(&self, uname: &str, aname: &str) -> Box<dyn apex_ninep::srv::auth::Conversation> {
        // Without randomness no proof can be asked for: an empty challenge
        // is refused at the write.
        let challenge = random(32).map(|c| hex(&c).into_bytes()).unwrap_or_default();
        Box::new(Conversation {
            tokens: Tokens::new(&self.state_dir),
            connection_proven: self.proven.clone(),
            challenge,
            uname: uname.to_string(),
            aname: aname.to_string(),
            proven: None,
        })
    }
}

/// Why a proof was refused: said to the client as it is, so no more than
/// that a token failed to prove itself.
#[derive(Debug, thiserror::Error)]
enum ProofError {
    #[error("authentication failed: no such token, or a proof that is not its")]
    Failed,
    #[error("this auth fid proves nothing more: Tauth again")]
    Spent,
    #[error("write NAME MAC to the auth fid (apex import --token FILE does)")]
    Shape,
}

impl From<ProofError> for apex_ninep::srv::auth::Refused {
    fn from(e: ProofError) -> Self {
        apex_ninep::srv::auth::Refused(e.to_string())
    }
}

impl apex_ninep::srv::auth::Conversation for Conversation {
    fn read(&mut self, count: u32) -> Result<Vec<u8>, apex_ninep::srv::auth::Refused> {
        let mut c = self.challenge.clone();
        c.truncate(count as usize);
        Ok(c)
    }

    fn write(&mut self, data: &[u8]) -> Result<u32, apex_ninep::srv::auth::Refused> {
        let refused = || ProofError::Failed;
        if self.challenge.is_empty() || self.proven.is_some() {
            return Err(ProofError::Spent.into());
        }
        let text = std::str::from_utf8(data).map_err(|_| refused())?;
        let (name, proof) = text.trim().split_once(' ').ok_or(ProofError::Shape)?;
        let proof = unhex(proof).ok_or_else(refused)?;
        let tokens = self.tokens.list().map_err(|e| {
            tracing::warn!("tokens: {e}");
            refused()
        })?;
        let token = tokens.into_iter().find(|t| t.name == name).ok_or_else(|| {
            tracing::info!(token = ?said(name), "auth: no such token");
            refused()
        })?;
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &token.secret);
        let mut msg = self.challenge.clone();
        msg.extend_from_slice(b"\0");
        msg.extend_from_slice(self.uname.as_bytes());
        msg.extend_from_slice(b"\0");
        msg.extend_from_slice(self.aname.as_bytes());
        ring::hmac::verify(&key, &msg, &proof).map_err(|_| {
            tracing::info!(token = ?said(name), "auth: a wrong proof");
            refused()
        })?;
        tracing::info!(token = ?said(name), scope = token.scope.name(), uname = ?said(&self.uname), "auth: proven");
        self.proven = Some((token.name.clone(), token.secret.clone()));
        self.connection_proven.store(true, std::sync::atomic::Ordering::Release);
        Ok(data.len() as u32)
    }

    fn proven(&self) -> Option<String> {
        let (name, secret) = self.proven.as_ref()?;
        let tokens = self.tokens.list().map_err(|e| tracing::warn!("tokens: {e}")).ok()?;
        let token = tokens.into_iter().find(|t| &t.name == name && &t.secret == secret);
        if token.is_none() {
            tracing::info!(token = ?said(name), "auth: the token proven is gone: its auth fid grants no more");
        }
        token.map(|t| t.scope.name().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apex_ninep::srv::auth::Authenticate;

    #[test]
    fn a_proof_answers_its_own_challenge_only() {
        let dir = std::env::temp_dir().join(format!("apex-tokens-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let tokens = Tokens::new(&dir);
        let text = tokens.create("laptop", Scope::Edit).unwrap();
        assert!(matches!(tokens.create("laptop", Scope::Full), Err(TokenError::Exists(_))));
        assert!(matches!(tokens.create("a b", Scope::Full), Err(TokenError::BadName(_))));
        std::fs::write(dir.join("held"), &text).unwrap();
        let held = Held::read(&dir.join("held")).unwrap();
        let auth = TokenAuth { state_dir: dir.clone(), proven: Default::default() };
        let mut first = auth.begin("glenda", "");
        let c = first.read(4096).unwrap();
        let proof = held.prove(&c, "glenda", "");
        // Another conversation's challenge: the same proof proves nothing.
        let mut second = auth.begin("glenda", "");
        assert!(second.write(&proof).is_err());
        assert_eq!(second.proven(), None);
        // Another uname: nothing either.
        let mut third = auth.begin("glenda", "");
        let c3 = third.read(4096).unwrap();
        assert!(third.write(&held.prove(&c3, "other", "")).is_err());
        first.write(&proof).unwrap();
        assert_eq!(first.proven().as_deref(), Some("edit"));
        tokens.remove("laptop").unwrap();
        assert_eq!(first.proven(), None, "what a removed token proved grants nothing more");
        tokens.create("laptop", Scope::Full).unwrap();
        assert_eq!(first.proven(), None, "nor does a new token of its name");
        tokens.remove("laptop").unwrap();
        let mut gone = auth.begin("glenda", "");
        let c4 = gone.read(4096).unwrap();
        assert!(gone.write(&held.prove(&c4, "glenda", "")).is_err(), "a removed token proves nothing");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
