//! Locks per session: while one session is held (a long look, a big
//! snapshot being copied), every other session and the root answer as
//! usual, and the held one answers once it is let go.

use apex_fsd::fsys::Fsys;
use apex_fsd::registry::Registry;
use apex_ninep::fcall::{OREAD, OWRITE};
use apex_ninep::srv::Serve;
use std::time::Duration;

/// Walks from `root` to `path` and opens it with `mode`.
async fn open(tree: &Fsys, root: &<Fsys as Serve>::Fid, path: &str, mode: u8) -> <Fsys as Serve>::Fid {
    let names: Vec<String> = path.split('/').map(String::from).collect();
    let (_, fid) = tree.walk(root, &names).await.unwrap_or_else(|e| panic!("walk {path}: {e}"));
    let fid = fid.unwrap_or_else(|| panic!("walk {path}: not all of it"));
    tree.open(&fid, mode).await.unwrap_or_else(|e| panic!("open {path}: {e}")).1
}

async fn read(tree: &Fsys, root: &<Fsys as Serve>::Fid, path: &str) -> String {
    let fid = open(tree, root, path, OREAD).await;
    let got = tree.read(&fid, 0, 1 << 16).await.unwrap_or_else(|e| panic!("read {path}: {e}"));
    tree.clunk(fid).await;
    String::from_utf8(got).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_session_holds_up_no_other() {
    let mut registry = Registry::new(Box::new(|| [9; 16]));
    registry.create(Some("main")).unwrap();
    registry.create(Some("other")).unwrap();
    let tree = Fsys::new(registry, "glenda");
    let (_, root) = tree.attach("glenda", "").await.unwrap();
    let main = tree.daemon.reg().by_name("main").unwrap();

    // Hold main's lock on a thread of its own, as a long look would.
    let busy = tree.daemon.session(main).unwrap();
    let (held_tx, held) = std::sync::mpsc::channel();
    let (release, let_go) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let _held = busy.lock().unwrap();
        held_tx.send(()).unwrap();
        let_go.recv().unwrap();
    });
    held.recv().unwrap();

    // A generous watchdog: a request that waited for main would hang here.
    let others = async {
        let id = read(&tree, &root, "other/buffers/new").await.trim().to_string();
        let body = format!("other/buffers/{id}/body");
        let w = open(&tree, &root, &body, OWRITE).await;
        tree.write(&w, 0, b"written while main is busy\n".to_vec()).await.unwrap();
        tree.clunk(w).await;
        assert_eq!(read(&tree, &root, &body).await, "written while main is busy\n");
        let leases = read(&tree, &root, "other/meta/leases").await;
        assert!(leases.contains(&format!("buffer.{id}")), "{leases}");
        // The root's listing and a session directory's stat come from the
        // registry, even main's.
        let (_, listing) = tree.open(&root, OREAD).await.unwrap();
        assert!(!tree.read(&listing, 0, 1 << 16).await.unwrap().is_empty());
        tree.clunk(listing).await;
        let (_, dir) = tree.walk(&root, &["main".to_string()]).await.unwrap();
        assert_eq!(tree.stat(&dir.unwrap()).await.unwrap().name, "main");
    };
    tokio::time::timeout(Duration::from_secs(60), others)
        .await
        .expect("requests on other sessions were answered while main was held");

    // A request on main waits for it, and is answered once it is let go.
    let waiting = {
        let (tree, root) = (tree.clone(), root.clone());
        tokio::spawn(async move { read(&tree, &root, "main/label").await })
    };
    release.send(()).unwrap();
    holder.join().unwrap();
    let label = tokio::time::timeout(Duration::from_secs(20), waiting).await.expect("main answers again").unwrap();
    assert_eq!(label, "main\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_session_answers_the_proposals_waiting_in_it() {
    use apex_fsd::attach::hub::HubConfig;
    use apex_fsd::attach::wire::{frame, ClientMsg};
    use apex_ninep::fcall::ORDWR;
    let mut registry = Registry::new(Box::new(|| [3; 16]));
    // No deadline comes to the rescue here.
    registry.attach = HubConfig { deadline_ms: 600_000, grace_ms: 600_000 };
    registry.create(Some("main")).unwrap();
    let tree = Fsys::new(registry, "glenda");
    let (_, root) = tree.attach("glenda", "").await.unwrap();
    let main = tree.daemon.reg().by_name("main").unwrap();

    // A UI that takes the leases and then never answers.
    let ui = open(&tree, &root, "main/attach", ORDWR).await;
    let hello = ClientMsg::Hello { kind: apex_core::AttachmentKind::Ui, name: "mute".into(), resume: None };
    tree.write(&ui, 0, frame(&hello)).await.unwrap();

    // A tool's proposal for the layout goes to it, and waits.
    let waiting = {
        let tree = tree.clone();
        tokio::spawn(async move {
            let p =
                apex_core::Proposal::CreateWindow { body: None, column: None, name: "/tmp/never".into(), near: None };
            tree.daemon.propose(main, "a window", p).await
        })
    };
    let pending = async {
        while tree.daemon.table_sizes().first().is_none_or(|t| t[1] == 0) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), pending).await.expect("the proposal was routed to the UI");

    // A built-in running on the session holds it (exec's DaemonHost) past
    // its deletion.
    let _running = tree.daemon.session(main).unwrap();
    let ctl = open(&tree, &root, "ctl", apex_ninep::fcall::OWRITE).await;
    tree.write(&ctl, 0, b"del main\n".to_vec()).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the writer hears of its proposal when the session goes")
        .unwrap();
    assert_eq!(got.unwrap_err().to_string(), "proposal lost: its session was deleted");
}
