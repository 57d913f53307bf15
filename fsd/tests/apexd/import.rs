//! `apex import ssh!HOST` through a real sshd on a free port (Debian's
//! openssh-server; the remote's namespace, state and home the test's own):
//! the remote daemon posted here as `apex.localhost` and `acme.localhost`,
//! reached by `apex`, our client, python-9p and raw plan9port frames
//! (Topenfd); a local client's hang-up and flush passed upstream; ssh
//! dropped and coming back; and every way it cannot start, said plainly.

use crate::acme::rpc_raw;
use crate::{client_python, read, run_script, text, write};
use apex_ninep::fcall::*;
use apex_ninep::{dial, Client};
use apex_tests::sshd::Sshd;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

const APEX: &str = env!("CARGO_BIN_EXE_apex");
const APEXD: &str = env!("CARGO_BIN_EXE_apexd");

fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `apex import ADDR` with `flags`.
fn import(sshd: &Sshd, flags: &[&str]) -> Output {
    sshd.apex(Path::new(APEX)).arg("import").args(flags).arg(sshd.address()).output().unwrap()
}

/// An sshd whose sessions find the apexd under test on their PATH.
fn sshd(name: &str) -> Sshd {
    Sshd::start(name, Path::new(APEXD).parent())
}

async fn local(sshd: &Sshd, name: &str) -> Client {
    dial(&format!("unix!{}", sshd.local_ns().join(name).display()), 1 << 20).await.unwrap()
}

/// Retries `f` until it gives something, for at most 30 seconds.
async fn until<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(t) = f().await {
            return t;
        }
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_over_ssh_serves_the_remote_session_to_every_local_client() {
    let sshd = sshd("import");
    let out = import(&sshd, &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("posted acme.localhost apex.localhost"), "{}", said(&out));
    // Imported already: said, and left as it is.
    let again = import(&sshd, &[]);
    assert!(again.status.success() && said(&again).contains("imported already"), "{}", said(&again));

    // `apex` reaches the remote's root by the posted name; what it writes
    // is the remote daemon's (its own socket, in the remote namespace,
    // reads it back).
    let ls = sshd.apex(Path::new(APEX)).args(["-a", "apex.localhost", "ls"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&ls.stdout), "ctl\nindex\nmachine\nmain\nnew\nregistry\nservices\n");
    let c = local(&sshd, "apex.localhost").await;
    let root = c.attach("glenda", "").await.unwrap();
    assert_eq!(text(read(&c, root, "services").await.unwrap()), "acme main\n");
    let b = text(read(&c, root, "main/buffers/new").await.unwrap()).trim().to_string();
    write(&c, root, &format!("main/buffers/{b}/body"), "over ssh\n").await.unwrap();
    let remote = dial(&format!("unix!{}", sshd.remote_ns().join("apex").display()), 8192).await.unwrap();
    let rroot = remote.attach("glenda", "").await.unwrap();
    assert_eq!(text(read(&remote, rroot, &format!("main/buffers/{b}/body")).await.unwrap()), "over ssh\n");
    // `acme.localhost` is the remote's acme tree, as `acme` is there.
    let index = sshd.apex(Path::new(APEX)).args(["read", "acme.localhost/index"]).output().unwrap();
    assert!(index.status.success(), "{}", said(&index));

    // A plan9port client's Topenfd, served by the importer (no descriptor
    // crosses ssh): win's write of "Send " to a window's tag through one.
    let (acme, aroot) = {
        let a = local(&sshd, "acme.localhost").await;
        let r = a.attach("glenda", "").await.unwrap();
        (a, r)
    };
    // Its root is a root: `..` stays there, and nothing of the session
    // above it (the session's snapshot, ctl) is reached through it.
    let (up, qids) = acme.walk(aroot, &[".."]).await.unwrap();
    assert_eq!(qids[0], acme.stat(aroot).await.unwrap().qid, "`..` at the acme tree's root is that root");
    acme.clunk(up).await.unwrap();
    let above = acme.walk(aroot, &["..", "snapshot"]).await.unwrap_err().to_string();
    assert!(above.contains("snapshot"), "{above}");
    let ctl = acme.open_path(aroot, "new/ctl", ORDWR).await.unwrap();
    let id: u32 = text(acme.read(ctl.fid, 0, 12).await.unwrap()).split_whitespace().next().unwrap().parse().unwrap();
    let path = sshd.local_ns().join("acme.localhost");
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
        let v = rpc_raw(&mut s, NOTAG, Fcall::Tversion { msize: 8192, version: "9P2000".into() });
        assert!(matches!(v, Fcall::Rversion { .. }), "{v:?}");
        let a = rpc_raw(&mut s, 1, Fcall::Tattach { fid: 0, afid: NOFID, uname: "u".into(), aname: "".into() });
        assert!(matches!(a, Fcall::Rattach { .. }), "{a:?}");
        let w = rpc_raw(&mut s, 2, Fcall::Twalk { fid: 0, newfid: 1, wnames: vec![id.to_string(), "tag".into()] });
        assert!(matches!(w, Fcall::Rwalk { ref wqids } if wqids.len() == 2), "{w:?}");
        let o = rpc_raw(&mut s, 3, Fcall::Topenfd { fid: 1, mode: OWRITE });
        assert!(matches!(o, Fcall::Ropenfd { iounit, .. } if iounit > 0), "{o:?}");
        let mut f = std::fs::File::from(apex_ninep::fdpass::recv_fd(s.as_raw_fd()).unwrap());
        f.write_all(b"Send ").unwrap();
    })
    .await
    .unwrap();
    until("Send did not reach the tag", async || {
        let tag = text(read(&acme, aroot, &format!("{id}/tag")).await.ok()?);
        tag.ends_with("Send ").then_some(())
    })
    .await;

    // A local client's hang-up clunks its fids upstream: a port it was
    // reading has no reader then, and the plumber says so.
    let rules = "data matches 'ours [0-9]+'\nplumb to ours\n";
    let f = c.open_path(root, "main/plumb/rules", OWRITE | OTRUNC).await.unwrap();
    c.write(f.fid, 0, rules.as_bytes()).await.unwrap();
    c.clunk(f.fid).await.unwrap();
    let send = |n: u32| format!("me\n\n/\ntext\n\n7\nours {n:02}");
    {
        let reader = local(&sshd, "apex.localhost").await;
        let r = reader.attach("glenda", "").await.unwrap();
        let port = reader.open_path(r, "main/plumb/ours", OREAD).await.unwrap();
        write(&remote, rroot, "main/plumb/send", &send(1)).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), reader.read(port.fid, 0, 8192)).await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&got).ends_with("ours 01"), "{got:?}");
        // A read flushed locally is flushed upstream: the next message
        // is not taken by it, and a read after gets it.
        let flushed = tokio::time::timeout(Duration::from_millis(300), reader.read(port.fid, 0, 8192)).await;
        assert!(flushed.is_err(), "nothing was sent: the read waits");
        // A request after the flush reaches the daemon after it, through
        // the importer as on a connection of its own.
        reader.stat(port.fid).await.unwrap();
        write(&remote, rroot, "main/plumb/send", &send(2)).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), reader.read(port.fid, 0, 8192)).await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&got).ends_with("ours 02"), "{got:?}");
        // The reader's connection ends with the port open.
    }
    let refused = until("the port kept a reader after its client hung up", async || {
        write(&remote, rroot, "main/plumb/send", &send(3)).await.err()
    })
    .await;
    assert!(refused.to_string().contains("nobody reads port ours"), "{refused}");

    // An independent client through the import: python-9p's session
    // (with a flushed blocked read) on the posted socket.
    if let Some(python) = client_python("python-9p", "APEX_PYTHON9P_PYTHON") {
        let socket = sshd.local_ns().join("apex.localhost").display().to_string();
        let stdout = run_script(&python, "python9p_session.py", &[&socket]);
        let b = stdout.strip_prefix("python-9p: ok ").unwrap_or_else(|| panic!("{stdout}")).trim().to_string();
        assert_eq!(text(read(&remote, rroot, &format!("main/buffers/{b}/body")).await.unwrap()), "HELLO\nworld\n");
    }

    // Stopped, its names are gone, and so is it.
    let stop = sshd.apex(Path::new(APEX)).args(["import", "--stop", &sshd.address()]).output().unwrap();
    assert!(stop.status.success(), "{}", said(&stop));
    assert!(!sshd.local_ns().join("apex.localhost").exists());
    assert!(!sshd.local_ns().join("acme.localhost").exists());
    let again = sshd.apex(Path::new(APEX)).args(["import", "--stop", &sshd.address()]).output().unwrap();
    assert!(
        !again.status.success() && said(&again).contains("nothing is imported as apex.localhost"),
        "{}",
        said(&again)
    );
}

/// ssh dropped (its connection killed, then sshd gone a while): the local
/// clients are hung up, as after a daemon restart, the importer
/// reconnects when ssh comes back, and the remote session is as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_reconnects_when_ssh_comes_back() {
    let mut sshd = sshd("reconnect");
    let out = import(&sshd, &["-n", "far"]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("posted far"), "{}", said(&out));
    let c = local(&sshd, "far").await;
    let root = c.attach("glenda", "").await.unwrap();
    let b = text(read(&c, root, "main/buffers/new").await.unwrap()).trim().to_string();
    write(&c, root, &format!("main/buffers/{b}/body"), "before\n").await.unwrap();

    sshd.stop();
    sshd.drop_connections();
    tokio::time::timeout(Duration::from_secs(10), c.closed()).await.expect("the local client is hung up");
    std::thread::sleep(Duration::from_secs(2));
    sshd.restart();
    let body = until("no reconnect after ssh came back", async || {
        let c = dial(&format!("unix!{}", sshd.local_ns().join("far").display()), 8192).await.ok()?;
        let root = c.attach("glenda", "").await.ok()?;
        read(&c, root, &format!("main/buffers/{b}/body")).await.ok()
    })
    .await;
    assert_eq!(text(body), "before\n");
}

/// What cannot start is said, with what to do: no apexd there, an older
/// one, a different version, a bad address; `--upload` then copies this
/// machine's apexd there, and imports use it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_that_cannot_start_says_why_and_upload_fixes_a_missing_apexd() {
    // No apexd on its PATH.
    let sshd = Sshd::start("import-errors", None);
    let missing = import(&sshd, &["--remote-apexd", "/nonexistent/apexd"]);
    assert!(!missing.status.success());
    let m = said(&missing);
    assert!(m.contains("/nonexistent/apexd is not there") && m.contains("--upload"), "{m}");
    let none = said(&import(&sshd, &[]));
    assert!(none.contains("apexd is not on its PATH") && none.contains("--upload"), "{none}");
    // ssh's own failure (a key file missing, so no key is taken) is ssh's
    // words, not a guess that apexd is missing.
    let keyless = "ssh -F /dev/null -i /nonexistent/key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null";
    let out = sshd.apex(Path::new(APEX)).args(["import", &sshd.address()]).env("APEX_SSH", keyless).output().unwrap();
    let refused = said(&out);
    assert!(refused.contains("ssh exited 255") && !refused.contains("--upload"), "{refused}");
    // An apexd from before versions were checked: refuses the flag.
    let old = sshd.dir.join("old-apexd");
    std::fs::write(&old, "#!/bin/sh\necho \"error: unexpected argument '--client-version' found\" >&2\nexit 2\n")
        .unwrap();
    std::fs::set_permissions(&old, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let older = said(&import(&sshd, &["--remote-apexd", old.to_str().unwrap()]));
    assert!(older.contains("older than this apex") && older.contains("--upload"), "{older}");
    // The relay itself refuses another version, saying both.
    let relay = std::process::Command::new(APEXD)
        .args(["--stdio", "--client-version", "0.0.1"])
        .env("NAMESPACE", sshd.remote_ns())
        .output()
        .unwrap();
    let r = said(&relay);
    assert!(!relay.status.success() && r.contains("0.0.1") && r.contains(env!("CARGO_PKG_VERSION")), "{r}");
    let bad = sshd.apex(Path::new(APEX)).args(["import", "ssh!-oProxyCommand=true"]).output().unwrap();
    assert!(said(&bad).contains("want ssh!HOST"), "{}", said(&bad));
    // Nothing was posted by any of them.
    assert_eq!(std::fs::read_dir(sshd.local_ns()).unwrap().count(), 0);

    // No apexd on the remote's PATH: --upload puts this one in a versioned
    // path, which the import (and later ones) then use.
    let uploaded = import(&sshd, &["--upload"]);
    assert!(uploaded.status.success(), "{}", said(&uploaded));
    let path = sshd.dir.join(format!("home/.local/lib/apex/apexd-{}", env!("CARGO_PKG_VERSION")));
    assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(APEXD).unwrap());
    let c = local(&sshd, "apex.localhost").await;
    let root = c.attach("glenda", "").await.unwrap();
    assert!(text(read(&c, root, "index").await.unwrap()).starts_with("main "));
}

/// The remote's acme session is read again at every reconnect: once a
/// daemon there is started anew serving another session as its acme
/// tree, that is what `acme.localhost` serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_serves_the_acme_session_the_remote_serves_then() {
    let mut sshd = sshd("reacme");
    let out = import(&sshd, &[]);
    assert!(out.status.success(), "{}", said(&out));
    // A window of main's acme tree, named to be told apart.
    let c = local(&sshd, "acme.localhost").await;
    let root = c.attach("glenda", "").await.unwrap();
    let n = text(read(&c, root, "new/ctl").await.unwrap()).split_whitespace().next().unwrap().to_string();
    write(&c, root, &format!("{n}/ctl"), "name /in-main\n").await.unwrap();
    assert!(text(read(&c, root, "index").await.unwrap()).contains("/in-main"));

    // The link down; the remote's daemon gone, and another started there
    // serving session `other` as its acme tree; the link back.
    sshd.stop();
    sshd.drop_connections();
    sshd.kill_daemons();
    let start_other = || sshd.remote(Path::new(APEXD)).args(["-q", "--acme", "other"]).spawn().unwrap();
    let mut other = start_other();
    let remote = format!("unix!{}", sshd.remote_ns().join("apex").display());
    let direct = until("the remote's new daemon", async || {
        // A daemon an ssh session was starting as the link went down may
        // come up after the others ended and hold the state ("in use by
        // another apexd"): that one ended too, and ours started again.
        if other.try_wait().ok().flatten().is_some() {
            sshd.kill_daemons();
            other = start_other();
        }
        let c = dial(&remote, 1 << 20).await.ok()?;
        let root = c.attach("glenda", "").await.ok()?;
        text(read(&c, root, "services").await.ok()?).contains("acme other").then_some((c, root))
    })
    .await;
    sshd.restart();
    let (c, root) = until("acme.localhost serving other's acme tree", async || {
        let c = dial(&format!("unix!{}", sshd.local_ns().join("acme.localhost").display()), 1 << 20).await.ok()?;
        let root = c.attach("glenda", "").await.ok()?;
        let index = text(read(&c, root, "index").await.ok()?);
        (!index.contains("/in-main")).then_some((c, root))
    })
    .await;
    let n = text(read(&c, root, "new/ctl").await.unwrap()).split_whitespace().next().unwrap().to_string();
    write(&c, root, &format!("{n}/ctl"), "name /in-other\n").await.unwrap();
    let (d, droot) = direct;
    assert!(text(read(&d, droot, "other/acme/index").await.unwrap()).contains("/in-other"));
    assert!(!text(read(&d, droot, "main/acme/index").await.unwrap()).contains("/in-other"));
    let _ = other.kill();
    let _ = other.wait();
}
