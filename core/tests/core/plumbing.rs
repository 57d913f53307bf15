//! The plumbing rule language against plumb(7)'s example rule file and
//! apex's basic set, message by message: which rule set takes it, the
//! message it sends, the port, and what it would start.

use apex_core::plumb::route::{Files, RouteError};
use apex_core::plumb::rules::{IncludeError, Includes, Var};
use apex_core::plumb::{builtin_rules, Message, Routed, Rules, Start, DEFAULT_RULES};
use std::collections::BTreeMap;

/// A machine with these files (a name ending in `/` is a directory).
struct Disk(BTreeMap<String, bool>);

impl Disk {
    fn with(names: &[&str]) -> Disk {
        Disk(names.iter().map(|n| (n.trim_end_matches('/').to_string(), n.ends_with('/'))).collect())
    }
}

impl Files for Disk {
    fn is_dir(&mut self, path: &str) -> Option<bool> {
        self.0.get(path).copied()
    }
}

/// `include` as the daemon does it with no plan9port: apex's own files.
struct Builtin;

impl Includes for Builtin {
    fn include(&mut self, name: &str) -> Result<(String, String), IncludeError> {
        let text = builtin_rules(name).ok_or(IncludeError { name: name.to_string(), why: None })?;
        Ok((name.to_string(), text.to_string()))
    }
}

/// plumb(7)'s EXAMPLE section, its rule file as the manual prints it.
const MANUAL: &str = r#"# these are generally in order from most specific to least,
# since first rule that fires wins.

addr=':(#?[0-9]+)'
protocol='(https?|ftp|file|gopher|mailto|news|nntp|telnet|wais)'
domain='[a-zA-Z0-9_@]+([.:][a-zA-Z0-9_@]+)*/?[a-zA-Z0-9_?,%#~&/\-]+'
file='([:.][a-zA-Z0-9_?,%#~&/\-]+)*'

# image files go to page
type is text
data matches '[a-zA-Z0-9_\-./]+'
data matches '([a-zA-Z0-9_\-./]+).(jpe?g|gif|bit)'
arg isfile $0
plumb to image
plumb start page -w $file

# URLs go to web browser
type is text
data matches $protocol://$domain$file
plumb to web
plumb start window webbrowser $0

# existing files, possibly tagged by line number, go to edit/sam
type is text
data matches '([.a-zA-Z0-9_/-]+[a-zA-Z0-9_/\-])('$addr')?'
arg isfile $1
data set $file
attr add addr=$3
plumb to edit
plumb start window sam $file

# .h files are looked up in /sys/include and passed to edit/sam
type is text
data matches '([a-zA-Z0-9]+\.h)('$addr')?'
arg isfile /sys/include/$1
data set $file
attr add addr=$3
plumb to edit
plumb start window sam $file
"#;

fn clicked(data: &str, click: usize) -> Message {
    let mut m = Message::text("acme", "/src", data);
    m.attr.push(("click".into(), click.to_string()));
    m
}

fn start(words: &[&str], client: bool) -> Option<Start> {
    Some(Start { argv: words.iter().map(|w| w.to_string()).collect(), client })
}

#[track_caller]
fn routed(rules: &Rules, disk: &mut Disk, m: &Message) -> Routed {
    rules.route(m, disk).unwrap_or_else(|e| panic!("{:?}: {e}", m.data_text()))
}

#[test]
fn the_manual_s_example_rules_route_as_the_manual_says() {
    let rules = Rules::parse("plumbing", MANUAL, &mut Builtin, &[]).unwrap();
    assert_eq!(rules.sets.len(), 4);
    assert_eq!(rules.ports, ["image", "web", "edit"]);
    let mut disk = Disk::with(&["/src/main.c", "/src/horse.gif", "/sys/include/u.h", "/src/dir/"]);

    // An existing file with a line number: to edit, the name made whole.
    let r = routed(&rules, &mut disk, &Message::text("acme", "/src", "main.c:42"));
    assert_eq!((r.message.dst.as_str(), r.message.data_text()), ("edit", "/src/main.c".to_string()));
    assert_eq!(r.message.attr("addr"), Some("42"));
    assert_eq!(r.start, start(&["window", "sam", "/src/main.c"], false));
    assert_eq!(r.rule, Some(("plumbing".to_string(), 24)));

    // A click in the middle of text: the rules choose the file around it.
    let r = routed(&rules, &mut disk, &clicked("(main.c:42)", 4));
    assert_eq!(r.message.data_text(), "/src/main.c");
    assert_eq!(r.message.attr("click"), None, "the click is used up");

    // The manual's horse.gift: the image rule's two patterns must take
    // the same text, so a .gift is no image, and no file either.
    let r = routed(&rules, &mut disk, &clicked("horse.gif", 2));
    assert_eq!((r.message.dst.as_str(), r.start), ("image", start(&["page", "-w", "/src/horse.gif"], false)));
    assert_eq!(rules.route(&clicked("horse.gift", 2), &mut disk), Err(RouteError::NoRule));

    // URLs, by the variables the file defines.
    let r = routed(&rules, &mut disk, &Message::text("acme", "/src", "http://9fans.net/plan9port/man"));
    assert_eq!(r.message.dst, "web");
    assert_eq!(r.start, start(&["window", "webbrowser", "http://9fans.net/plan9port/man"], false));

    // A header found in the include directory.
    let r = routed(&rules, &mut disk, &Message::text("acme", "/src", "u.h:3"));
    assert_eq!((r.message.data_text(), r.message.attr("addr")), ("/sys/include/u.h".to_string(), Some("3")));

    // A directory is no file; nothing takes it, and with no dst it is refused.
    assert_eq!(rules.route(&Message::text("acme", "/src", "dir"), &mut disk), Err(RouteError::NoRule));
    assert_eq!(rules.route(&Message::text("acme", "/src", "nofile.c:3"), &mut disk), Err(RouteError::NoRule));

    // A message naming its port goes there when no rule takes it, as it is.
    let mut m = Message::text("plumb", "/src", "anything at all");
    m.dst = "edit".into();
    let r = routed(&rules, &mut disk, &m);
    assert_eq!((r.message, r.start, r.rule), (m, None, None));

    // A rule set for another port is passed over for a message with a dst.
    let mut m = Message::text("plumb", "/src", "main.c");
    m.dst = "web".into();
    let r = routed(&rules, &mut disk, &m);
    assert_eq!((r.message.data_text(), r.rule), ("main.c".to_string(), None));
}

#[test]
fn apex_s_basic_set_sends_files_with_addresses_to_edit_and_urls_to_web() {
    let rules = Rules::parse("rules", DEFAULT_RULES, &mut Builtin, &[]).unwrap();
    assert!(rules.ports.iter().any(|p| p == "edit") && rules.ports.iter().any(|p| p == "web"));
    assert!(rules.ports.iter().any(|p| p == "seemail"), "declared ports count too");
    let mut disk = Disk::with(&["/w/FILE", "/w/notes.txt", "/w/src/main.go", "/usr/include/stdio.h", "/w/sub/"]);

    let cases: [(Message, &str, &str, Option<&str>); 9] = [
        (clicked("FILE:3", 1), "edit", "/w/FILE", Some("3")),
        (clicked("src/main.go:12:5", 3), "edit", "/w/src/main.go", Some("12-#0+#5-#1")),
        (clicked("FILE:/^fn main/", 0), "edit", "/w/FILE", Some("/^fn")),
        (clicked("FILE:3,5", 0), "edit", "/w/FILE", Some("3,5")),
        (clicked("(FILE:#40),", 3), "edit", "/w/FILE", Some("#40")),
        (clicked("./src/../FILE", 0), "edit", "/w/FILE", Some("")),
        (clicked("https://example.com/a/b.", 9), "web", "https://example.com/a/b", None),
        (clicked("file:notes.txt", 2), "web", "file:///w/notes.txt", None),
        (clicked("stdio.h:9", 0), "edit", "/usr/include/stdio.h", Some("9")),
    ];
    for (mut m, port, data, addr) in cases {
        m.wdir = "/w".into();
        let r = routed(&rules, &mut disk, &m);
        assert_eq!((r.message.dst.as_str(), r.message.data_text().as_str()), (port, data), "{:?}", m.data_text());
        assert_eq!(r.message.attr("addr"), addr, "{:?}", m.data_text());
        assert_eq!(r.message.attr("click"), None);
    }
    // plan9port's B: `plumb -s B -d edit /w/FILE:7`; and a sender's own
    // addr, which the rule's added one does not displace (plumb(3)
    // appends, and the first of a name counts).
    let mut b = Message::text("B", "/w", "/w/FILE:7");
    b.dst = "edit".into();
    let r = routed(&rules, &mut disk, &b);
    assert_eq!((r.message.data_text(), r.message.attr("addr")), ("/w/FILE".to_string(), Some("7")));
    let mut own = Message::text("plumb", "/w", "FILE");
    own.attr.push(("addr".into(), "12".into()));
    let r = routed(&rules, &mut disk, &own);
    assert_eq!((r.message.dst.as_str(), r.message.attr("addr")), ("edit", Some("12")));
    // The browser is started with the URL when nothing reads `web`.
    let r = routed(&rules, &mut disk, &Message::text("acme", "/w", "http://x.org/y"));
    assert_eq!(r.start, start(&["xdg-open", "http://x.org/y"], false));
    // A name with no file, a directory, a word: no rule takes them.
    for data in ["nofile.c:3", "sub", "issue 42", "hello"] {
        let m = Message::text("acme", "/w", data);
        assert_eq!(rules.route(&m, &mut disk), Err(RouteError::NoRule), "{data}");
    }
}

#[test]
fn actions_and_rewrites_expand_what_the_match_found() {
    let text = "type is text\n\
                src is acme\n\
                data matches 'issue ([0-9]+)'\n\
                attr add n=$1\n\
                attr add 'where=$wdir from=$src'\n\
                plumb to issues\n\
                plumb client tracker -n $1 -a $attr -d $dst '$0 stays' ''\n";
    let rules = Rules::parse("tool", text, &mut Builtin, &[]).unwrap();
    let r = routed(&rules, &mut Disk::with(&[]), &Message::text("acme", "/p", "issue 42"));
    assert_eq!(r.message.attr("n"), Some("42"));
    assert_eq!(r.message.attr("where"), Some("$wdir"), "quoted text is not expanded");
    assert_eq!(r.message.attr("from"), Some("$src"));
    let attrs = "n=42 where=$wdir from=$src";
    assert_eq!(r.start, start(&["tracker", "-n", "42", "-a", attrs, "-d", "issues", "$0 stays", ""], true));
    assert_eq!(rules.route(&Message::text("plumb", "/p", "issue 42"), &mut Disk::with(&[])), Err(RouteError::NoRule));

    // `attr delete` of an attribute the message lacks fails the set, as
    // in the plumber; `set` rewrites every field.
    let text =
        "attr delete gone\nplumb to a\n\ndata set x$data\ntype set t\nsrc set s\nwdir set /d\ndst set b\nplumb to b\n";
    let rules = Rules::parse("r", text, &mut Builtin, &[]).unwrap();
    let r = routed(&rules, &mut Disk::with(&[]), &Message::text("me", "/", "y"));
    assert_eq!(
        (r.message.data_text(), r.message.kind, r.message.src, r.message.wdir),
        ("xy".into(), "t".into(), "s".into(), "/d".into())
    );
    assert_eq!(r.message.dst, "b");

    // Variables a file sets later are what its actions see, as the
    // plumber's are; those given from outside come first.
    let outer = [Var { name: "plan9".into(), value: "/p9".into(), expanded: "/p9".into() }];
    let text = "data is x\nplumb to e\nplumb start $editor $plan9\n\neditor=acme\n";
    let rules = Rules::parse("r", text, &mut Builtin, &outer).unwrap();
    let r = routed(&rules, &mut Disk::with(&[]), &Message::text("me", "/", "x"));
    assert_eq!(r.start, start(&["acme", "/p9"], false));
}

#[test]
fn rules_of_several_owners_match_in_the_order_given() {
    let tool = Rules::parse("tool", "data matches 'FILE.*'\nplumb to mine\n", &mut Builtin, &[]).unwrap();
    let own = Rules::parse("rules", DEFAULT_RULES, &mut Builtin, &[]).unwrap();
    let both = tool.then(own);
    assert_eq!(both.ports[0], "mine");
    let r = routed(&both, &mut Disk::with(&["/w/FILE"]), &Message::text("acme", "/w", "FILE:3"));
    assert_eq!(r.message.dst, "mine", "the tool's claim comes first");
}

#[test]
fn isdir_sets_dir_and_isn_t_turns_is_round() {
    let text = "data isn't skip\narg isdir $data\nplumb to dirs\nplumb start ls $dir\n\nattr is x\nplumb to never\n";
    let rules = Rules::parse("r", text, &mut Builtin, &[]).unwrap();
    let mut disk = Disk::with(&["/w/sub/", "/w/file"]);
    let r = routed(&rules, &mut disk, &Message::text("me", "/w", "sub/."));
    assert_eq!((r.message.dst.as_str(), r.start), ("dirs", start(&["ls", "/w/sub"], false)));
    for data in ["skip", "file", "none"] {
        // `skip` is turned away by isn't; a file is no directory; and
        // `attr is`, which the plumber takes and never acts on, never
        // matches here either.
        assert_eq!(rules.route(&Message::text("me", "/w", data), &mut disk), Err(RouteError::NoRule), "{data}");
    }
}

/// Random messages, clicks and data through the manual's rules and the
/// basic set: every outcome is a routing or a refusal, never a panic.
#[test]
fn hostile_messages_are_routed_or_refused_never_a_panic() {
    let manual = Rules::parse("plumbing", MANUAL, &mut Builtin, &[]).unwrap();
    let basic = Rules::parse("rules", DEFAULT_RULES, &mut Builtin, &[]).unwrap();
    let pieces = ["FILE", ":", "3", "/", "..", "http://", "é", "'", "$0", "#", ",", " ", "\t", "(", ")", ".h", "a"];
    let mut disk = Disk::with(&["/w/FILE", "/w/"]);
    let mut x = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..3000 {
        let n = next() % 12;
        let data: String = (0..n).map(|_| pieces[(next() % pieces.len() as u64) as usize]).collect();
        let mut m = Message::text("fuzz", "/w", &data);
        let clicks = ["0", "-1", "99999999999999999999", "3x", ""];
        match next() % 3 {
            0 => m.attr.push(("click".into(), clicks[(next() % 5) as usize].into())),
            1 => m.attr.push(("click".into(), (next() % 40).to_string())),
            _ => {}
        }
        if next() % 4 == 0 {
            m.dst = ["edit", "web", "nowhere", ""][(next() % 4) as usize].into();
        }
        for rules in [&manual, &basic] {
            let _ = rules.route(&m, &mut disk);
        }
    }
    // A large clicked message is matched in time: a search per match.
    let mut m = Message::text("fuzz", "/w", &"!a".repeat(1 << 17));
    m.attr.push(("click".into(), ((1usize << 18) - 1).to_string()));
    assert_eq!(basic.route(&m, &mut disk), Err(RouteError::NoRule));
}
