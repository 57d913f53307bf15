//! Running Edit commands (`edit.rs` parses them) on a set of windows'
//! texts, as sam and acme do: every address and every change of one run is
//! computed against the original texts, and the changes are returned, in
//! order and not overlapping, for the caller to apply as one edit per
//! buffer. Pure: pipes (`<`, `>`, `|`) go through the caller's [`Pipes`].

use crate::addr::{Address, Context, Dialect, Range};
pub use crate::changes::Changes;
pub use crate::edit::PipeError;
use crate::edit::{self, Cmd, EditError, FileCmd, Kind, Loop, Pipe, Position};
use crate::regx::{Found, Haystack, Regexp, RopeMatches, RunesOnward};
use ropey::Rope;
use std::collections::BTreeMap;
use std::rc::Rc;

type Result<T> = std::result::Result<T, EditError>;

/// One window's text as the command sees it.
#[derive(Clone, Debug)]
pub struct EditFile {
    pub name: String,
    pub text: Rope,
    /// The selection.
    pub dot: Range,
    pub dirty: bool,
    /// Warned once already that its changes would be lost (`e` goes
    /// ahead then, as acme's winclean lets a second try).
    pub warned: bool,
}

/// Runs a shell command for `<`, `>` and `|`: `input` on its standard
/// input (none for `<`), its output returned.
pub trait Pipes {
    fn run(&mut self, command: &str, input: Option<&str>, file: &EditFile) -> std::result::Result<String, PipeError>;
    /// `e` and `r`: the file's bytes, or why not (acme's `%r`).
    fn load(&mut self, path: &str) -> std::result::Result<Vec<u8>, PipeError>;
    /// `w`: writes the bytes to the file, or says why not.
    fn save(&mut self, path: &str, bytes: &[u8]) -> std::result::Result<(), PipeError>;
    /// Whether the Edit was told to stop (`Kill Edit`): asked as it goes,
    /// and then it ends changing nothing.
    fn interrupted(&mut self) -> bool {
        false
    }
}

/// What a run asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Per file (index into the files given), its changes sorted by
    /// position and not overlapping.
    pub changes: BTreeMap<usize, Changes>,
    /// Per file whose dot a command set, the new dot, in the text as it
    /// will be once the changes are applied.
    pub dots: BTreeMap<usize, Range>,
    /// What `p`, `=`, `f` and `>` printed.
    pub printed: String,
    /// `u N` per file, in order.
    pub undo: Vec<(usize, i64)>,
    /// Files an `e` or `w` named anew (acme's cmdname).
    pub renamed: BTreeMap<usize, String>,
    /// Files that hold their file's text once the changes are applied (an
    /// `e` of their own file, a `w` of all of it to their own name).
    pub cleaned: Vec<usize>,
    /// `B`: files to open, each in a window ("" for an empty one).
    pub open: Vec<String>,
    /// `D`: files whose windows to close.
    pub close: Vec<usize>,
}

/// Runs `src` with `current` the window it was executed in. `last` is the
/// last regular expression used, which `//` means: acme keeps one for the
/// whole program (`lastpat`), so it carries from one Edit to the next,
/// set even by an Edit that fails.
pub fn run(
    src: &str,
    files: &[EditFile],
    current: usize,
    pipes: &mut dyn Pipes,
    last: &mut Option<String>,
) -> Result<Outcome> {
    let cmds = edit::parse(src)?;
    let mut r = Runner::new(files, current, pipes, last.take());
    let mut ran = Ok(());
    for cmd in &cmds {
        let f = r.current;
        let dot = r.dot(f);
        ran = r.cmd(cmd, f, dot);
        if ran.is_ok() && r.pipes.interrupted() {
            ran = Err(EditError::Killed);
        }
        if ran.is_err() {
            break;
        }
    }
    last.clone_from(&r.last);
    ran?;
    r.finish()
}

impl<'a> Runner<'a> {
    fn new(files: &'a [EditFile], current: usize, pipes: &'a mut dyn Pipes, last: Option<String>) -> Runner<'a> {
        Runner {
            files,
            flats: files.iter().map(|_| std::cell::OnceCell::new()).collect(),
            lens: files.iter().map(|f| f.text.len_chars() as u64).collect(),
            pipes,
            changes: files.iter().map(|_| Changes::new()).collect(),
            dots: vec![None; files.len()],
            out: Outcome::default(),
            last,
            nest: 0,
            written: Vec::new(),
            compiled: BTreeMap::new(),
            current,
        }
    }
}

/// File `f`'s text as one string, made the first time it is asked for.
/// A free function over the two fields, so a caller may hold it while it
/// changes the runner's others.
fn flat<'f>(flats: &'f [std::cell::OnceCell<Rc<Haystack>>], files: &[EditFile], f: usize) -> &'f Rc<Haystack> {
    flats[f].get_or_init(|| Rc::new(Haystack::new(&files[f].text)))
}

/// How many matches a loop or a substitution goes through between asking
/// whether it was told to stop.
const ASK_EVERY: usize = 4096;

/// Where a file's dot ended up: a range of the original text, or the
/// text a change put in (its change index).
#[derive(Clone, Copy, Debug)]
enum Dot {
    Original(Range),
    Changed(usize),
}

struct Runner<'a> {
    files: &'a [EditFile],
    /// Each file's text as one string, made when a command first searches
    /// it ([`flat`]): an Edit in one window copies no other window's text.
    /// (Shared, so that a loop holds its file's while it runs its command,
    /// which may search it again.)
    flats: Vec<std::cell::OnceCell<Rc<Haystack>>>,
    /// Each file's length in runes, for its [`Context`] (the texts do not
    /// change while the commands run: their changes are gathered).
    lens: Vec<u64>,
    pipes: &'a mut dyn Pipes,
    /// Each file's changes, by its index (a loop's command adds one a
    /// match: no lookup in a map for it).
    changes: Vec<Changes>,
    /// Each file's dot, where a command set it.
    dots: Vec<Option<Dot>>,
    out: Outcome,
    last: Option<String>,
    /// Loop depth: `s` without a match is an error only at the top.
    nest: usize,
    /// Files a `w` wrote whole to their own name: clean unless changed.
    written: Vec<usize>,
    /// Regexps compiled in this run, by pattern.
    compiled: BTreeMap<String, Regexp>,
    /// The window commands work on: the one the command was executed in,
    /// until a `b` names another.
    current: usize,
}

impl Runner<'_> {
    /// A file's dot in the original text (a changed dot counts as its range).
    fn dot(&self, f: usize) -> Range {
        match self.dots[f] {
            Some(Dot::Original(r)) => r,
            Some(Dot::Changed(i)) => {
                let (q0, q1, _) = self.changes[f].get(i);
                Range::new(q0, q1)
            }
            None => self.files[f].dot,
        }
    }

    /// What `address` is evaluated against in file `f`: with the flat
    /// text when it searches (made then if not yet), else with it only if
    /// made already (a loop over a plain string's matches makes none).
    fn context(&self, f: usize, address: &Address) -> Context<'_> {
        let flat = match address.searches() {
            true => Some(flat(&self.flats, self.files, f)),
            false => self.flats[f].get(),
        };
        Context {
            text: &self.files[f].text,
            flat: flat.map(|h| &**h),
            dialect: Dialect::Sam,
            limit: None,
            len: self.lens[f],
        }
    }

    fn address(&mut self, cmd: &Cmd, f: usize, dot: Range) -> Result<Range> {
        // No address (a loop's command, once a match): dot, where it lies
        // in the text, with no context made for it (what the evaluation
        // gives; it says what is wrong with a dot that does not lie so).
        if cmd.addr.is_empty() && dot.q0 <= dot.q1 && dot.q1 <= self.lens[f] {
            return Ok(dot);
        }
        let mut last = self.last.take();
        let r = cmd.addr.eval(&self.context(f, &cmd.addr), dot, &mut last);
        self.last = last;
        Ok(r?)
    }

    fn change(&mut self, f: usize, q0: u64, q1: u64, text: &str) {
        let list = &mut self.changes[f];
        list.push(q0, q1, text);
        self.dots[f] = Some(Dot::Changed(list.len() - 1));
    }

    fn slice(&self, f: usize, r: Range) -> String {
        self.files[f].text.slice(r.q0 as usize..r.q1 as usize).to_string()
    }

    fn cmd(&mut self, cmd: &Cmd, f: usize, dot: Range) -> Result<()> {
        let r = self.address(cmd, f, dot)?;
        match &cmd.kind {
            Kind::Dot => {
                self.dots[f] = Some(Dot::Original(r));
            }
            Kind::Append(t) => self.change(f, r.q1, r.q1, t),
            Kind::Insert(t) => self.change(f, r.q0, r.q0, t),
            Kind::Change(t) => self.change(f, r.q0, r.q1, t),
            Kind::Delete => self.change(f, r.q0, r.q1, ""),
            Kind::Substitute { pattern, replacement, nth, global } => {
                self.substitute(f, r, pattern, replacement, *nth, *global)?
            }
            Kind::Move(to) | Kind::Copy(to) => {
                let mut last = self.last.take();
                let at = to.eval(&self.context(f, to), r, &mut last);
                self.last = last;
                let at = at?;
                let text = self.slice(f, r);
                if matches!(cmd.kind, Kind::Move(_)) {
                    if at.q1 > r.q0 && at.q1 < r.q1 {
                        return Err(EditError::Overlap(at.q1));
                    }
                    self.change(f, r.q0, r.q1, "");
                }
                self.change(f, at.q1, at.q1, &text);
            }
            Kind::Print => {
                let t = self.slice(f, r);
                self.out.printed.push_str(&t);
                self.dots[f] = Some(Dot::Original(r));
            }
            Kind::Equals(form) => {
                let line = self.position(f, r, *form);
                self.out.printed.push_str(&line);
                self.out.printed.push('\n');
            }
            Kind::Name => {
                let line = self.name_line(f);
                self.out.printed.push_str(&line);
            }
            Kind::File { kind, arg } => {
                let r = match (kind, cmd.addr.is_empty()) {
                    (FileCmd::Write, true) => Range::new(0, self.files[f].text.len_chars() as u64),
                    _ => r,
                };
                self.file_cmd(f, r, *kind, arg)?
            }
            Kind::Undo(n) => self.out.undo.push((f, *n)),
            Kind::Pipe { kind, command } => {
                let input = match kind {
                    Pipe::From => None,
                    _ => Some(self.slice(f, r)),
                };
                let output = self.pipes.run(command, input.as_deref(), &self.files[f]).map_err(EditError::Pipe)?;
                match kind {
                    Pipe::To => self.out.printed.push_str(&output),
                    _ => self.change(f, r.q0, r.q1, &output),
                }
            }
            Kind::Group(cmds) => {
                for c in cmds {
                    self.cmd(c, f, r)?;
                }
            }
            Kind::Loop { kind, pattern, body } => self.looping(f, r, *kind, pattern.as_deref(), body)?,
        }
        Ok(())
    }

    /// acme's `pfilename`: changed, shown, current, then the name.
    fn name_line(&self, f: usize) -> String {
        let file = &self.files[f];
        let name = self.out.renamed.get(&f).unwrap_or(&file.name);
        let changed = file.dirty && !crate::look::never_warns(name) && !crate::look::is_dir(name);
        let dirty = if changed { '\'' } else { ' ' };
        let current = if f == self.current { '.' } else { ' ' };
        format!("{dirty}+{current} {name}\n")
    }

    /// A file's name as it stands in this run.
    fn name_of(&self, f: usize) -> &str {
        self.out.renamed.get(&f).unwrap_or(&self.files[f].name)
    }

    /// acme's `cmdname`: the file an `e`, `r` or `w` means, relative names
    /// taken in the window's directory; a window without a name, or with
    /// `set` (`e`), takes the name given.
    fn file_name(&mut self, f: usize, arg: &str, set: bool) -> Option<String> {
        let own = self.name_of(f).to_string();
        if arg.is_empty() {
            return (!own.is_empty()).then_some(own);
        }
        let name = match (arg.starts_with('/'), crate::look::window_dir(&own)) {
            (false, Some(dir)) => format!("{}/{arg}", dir.trim_end_matches('/')),
            _ => arg.to_string(),
        };
        if (set || own.is_empty()) && name != own {
            self.out.renamed.insert(f, name.clone());
        }
        Some(name)
    }

    /// The window named `name` (acme's lookfile, after `D` makes a
    /// relative name its directory's).
    fn file_named(&self, name: &str) -> Option<usize> {
        (0..self.files.len()).find(|g| self.name_of(*g) == name)
    }

    fn file_cmd(&mut self, f: usize, r: Range, kind: FileCmd, arg: &str) -> Result<()> {
        match kind {
            FileCmd::Switch => {
                let g = self.file_named(arg).ok_or_else(|| EditError::NoSuchFile(arg.to_string()))?;
                // Printed before the switch, as b_cmd does: the '.' still
                // marks the window it leaves.
                if self.nest == 0 {
                    let line = self.name_line(g);
                    self.out.printed.push_str(&line);
                }
                self.current = g;
            }
            FileCmd::Open => {
                let dir = crate::look::window_dir(self.name_of(f));
                let resolve = |n: &str| match (n.starts_with('/'), &dir) {
                    (false, Some(d)) => format!("{}/{n}", d.trim_end_matches('/')),
                    _ => n.to_string(),
                };
                match arg.split_whitespace().map(resolve).collect::<Vec<_>>() {
                    names if names.is_empty() => self.out.open.push(String::new()),
                    names => self.out.open.extend(names),
                }
            }
            FileCmd::Close => {
                if arg.is_empty() {
                    self.out.close.push(f);
                    return Ok(());
                }
                let dir = crate::look::window_dir(self.name_of(f));
                for n in arg.split_whitespace() {
                    let name = match (n.starts_with('/'), &dir) {
                        (false, Some(d)) => format!("{}/{n}", d.trim_end_matches('/')),
                        _ => n.to_string(),
                    };
                    let g = self.file_named(&name).ok_or(EditError::NoSuchFile(name))?;
                    self.out.close.push(g);
                }
            }
            FileCmd::Replace | FileCmd::Read => {
                let whole = kind == FileCmd::Replace;
                let file = &self.files[f];
                let small_and_unnamed = file.name.is_empty() && file.text.len_chars() < 100;
                let keeps_changes = file.dirty
                    && !file.warned
                    && !small_and_unnamed
                    && !crate::look::never_warns(&file.name)
                    && !crate::look::is_dir(&file.name);
                if whole && keeps_changes {
                    return Err(EditError::Modified { file: f, name: file.name.clone() });
                }
                let name = self.file_name(f, arg, whole).ok_or(EditError::NoFileName)?;
                // After cmdname's rename, as acme compares (e_cmd).
                let own = self.name_of(f).to_string();
                let bytes = self.pipes.load(&name).map_err(|why| EditError::CantOpen { file: name.clone(), why })?;
                // As acme's cvttorunes: NULs dropped, bad bytes U+FFFD.
                let (text, _) = crate::text::acme_file_text(bytes);
                let r = if whole { Range::new(0, self.files[f].text.len_chars() as u64) } else { r };
                self.change(f, r.q0, r.q1, &text);
                if whole && name == own {
                    self.out.cleaned.push(f);
                }
            }
            FileCmd::Write => {
                // The text as it was before this Edit's changes, which
                // acme applies only at the end (w_cmd's pending check
                // never fires within one Edit).
                let own = self.name_of(f).to_string();
                let name = self
                    .file_name(f, arg, false)
                    .ok_or_else(|| EditError::Syntax("no name specified for 'w' command".into()))?;
                let text = self.slice(f, r);
                self.pipes
                    .save(&name, text.as_bytes())
                    .map_err(|why| EditError::CantOpen { file: name.clone(), why })?;
                // Clean, as putfile leaves it, unless this Edit changes the
                // text too: acme applies those changes after, and they make
                // it dirty again (see `finish`).
                let all = r.q0 == 0 && r.q1 == self.files[f].text.len_chars() as u64;
                if all && (name == own || own.is_empty()) {
                    self.written.push(f);
                }
            }
        }
        Ok(())
    }

    fn regex(&mut self, pattern: Option<&str>, default: &str) -> Result<Regexp> {
        let p = match pattern {
            Some("") => self.last.clone().ok_or_else(|| EditError::Syntax("no previous regexp for //".into()))?,
            Some(p) => p.to_string(),
            None => default.to_string(),
        };
        self.last = Some(p.clone());
        // Loops compile the same pattern once per range: once will do.
        if let Some(re) = self.compiled.get(&p) {
            return Ok(re.clone());
        }
        let re = Regexp::new(&p).map_err(crate::addr::AddrError::from)?;
        self.compiled.insert(p, re.clone());
        Ok(re)
    }

    /// Whether `re` matches in `r` of file `f` (`g` and `v`).
    fn hits(&self, f: usize, r: Range, re: &Regexp) -> bool {
        let text = &self.files[f].text;
        let (start, end) = (text.char_to_byte(r.q0 as usize), text.char_to_byte(r.q1 as usize));
        flat(&self.flats, self.files, f).steps(re, start, end, false).next().is_some()
    }

    fn looping(&mut self, f: usize, r: Range, kind: Loop, pattern: Option<&str>, body: &Cmd) -> Result<()> {
        self.nest += 1;
        let result = self.looping_inner(f, r, kind, pattern, body);
        self.nest -= 1;
        result
    }

    fn looping_inner(&mut self, f: usize, r: Range, kind: Loop, pattern: Option<&str>, body: &Cmd) -> Result<()> {
        match kind {
            Loop::Matches | Loop::Between => {
                let re = self.regex(pattern, ".*\\n")?;
                // acme's looper finds every range before it runs the
                // command on any; the text searched does not change while
                // an Edit runs, so each is run on as found: a loop over a
                // file's million lines holds none of them.
                let files = self.files;
                let text = &files[f].text;
                let (start, end) = (text.char_to_byte(r.q0 as usize), text.char_to_byte(r.q1 as usize));
                let mut from = r.q0;
                let mut i = 0;
                let mut each = |runner: &mut Self, m: Range| {
                    if i % ASK_EVERY == 0 && runner.pipes.interrupted() {
                        return Err(EditError::Killed);
                    }
                    i += 1;
                    runner.cmd(body, f, m)
                };
                let mut found = |runner: &mut Self, m: Range| match kind {
                    Loop::Matches => each(runner, m),
                    _ => {
                        each(runner, Range::new(from, m.q0))?;
                        from = m.q1;
                        Ok(())
                    }
                };
                // A plain string's matches (never empty) are found chunk by
                // chunk, with no flat copy of the text: `y/\n/` over a file.
                let exhausted = match re.plain() {
                    Some(finder) => {
                        for (_, q) in RopeMatches::new(finder, text, start, end, r.q0) {
                            found(self, Range::new(q.start, q.end))?;
                        }
                        true
                    }
                    None => {
                        let hay = Rc::clone(flat(&self.flats, files, f));
                        let mut runes = RunesOnward::new(&hay, text, start, r.q0);
                        let mut steps = hay.steps(&re, start, end, kind == Loop::Between);
                        for m in steps.by_ref() {
                            let w = m.whole();
                            found(self, Range::new(runes.rune_at(w.start), runes.rune_at(w.end)))?;
                        }
                        steps.exhausted()
                    }
                };
                if kind == Loop::Between && exhausted {
                    each(self, Range::new(from, r.q1))?;
                }
            }
            Loop::Files | Loop::OtherFiles => {
                let re = match pattern {
                    Some(_) => Some(self.regex(pattern, "")?),
                    None => None,
                };
                for g in 0..self.files.len() {
                    let hit = re.as_ref().is_none_or(|re| re.is_match(&self.files[g].name));
                    if hit == (kind == Loop::Files) {
                        let dot = self.dot(g);
                        self.cmd(body, g, dot)?;
                    }
                }
            }
            Loop::If | Loop::Unless => {
                let re = self.regex(pattern, "")?;
                let hit = self.hits(f, r, &re);
                if hit == (kind == Loop::If) {
                    self.cmd(body, f, r)?;
                }
            }
        }
        Ok(())
    }

    fn substitute(&mut self, f: usize, r: Range, pattern: &str, rep: &str, nth: usize, global: bool) -> Result<()> {
        let re = self.regex(Some(pattern), "")?;
        let text = &self.files[f].text;
        let (start, end) = (text.char_to_byte(r.q0 as usize), text.char_to_byte(r.q1 as usize));
        // acme's s_cmd: the nth match and, with g, every one after it,
        // each expanded straight into the file's list of changes.
        let list = &mut self.changes[f];
        let before = list.len();
        let most = if global { usize::MAX } else { nth };
        let mut i = 0;
        let mut killed = false;
        let pipes = &mut self.pipes;
        // Whether match `i` is one to change (asking now and then whether
        // the Edit was killed).
        let mut wanted = || {
            i += 1;
            if i % ASK_EVERY == 0 && !killed {
                killed = pipes.interrupted();
            }
            !(killed || i < nth || (!global && i > nth))
        };
        // A replacement with nothing to expand is put in as it is; a plain
        // string replaced so is found chunk by chunk, with no flat copy of
        // the text.
        let plain = !rep.contains(['&', '\\']);
        match re.plain().filter(|_| plain) {
            Some(finder) => RopeMatches::new(finder, text, start, end, r.q0).take(most).for_each(|(_, q)| {
                if wanted() {
                    list.push(q.start, q.end, rep);
                }
            }),
            None => {
                let hay = flat(&self.flats, self.files, f);
                // Matches come in order: each one's runes are counted on
                // from the last.
                let mut runes = RunesOnward::new(hay, text, start, r.q0);
                hay.steps(&re, start, end, false).take(most).for_each(|m| {
                    if !wanted() {
                        return;
                    }
                    let whole = m.whole();
                    let q0 = runes.rune_at(whole.start);
                    let q1 = runes.rune_at(whole.end);
                    match plain {
                        true => list.push(q0, q1, rep),
                        false => list.push_with(q0, q1, |out| expand(rep, hay, &m, out)),
                    }
                })
            }
        }
        if killed {
            return Err(EditError::Killed);
        }
        let made = list.len();
        if made == before {
            if self.nest == 0 {
                let used = if pattern.is_empty() { self.last.as_deref().unwrap_or_default() } else { pattern };
                return Err(EditError::NoSubstitution(used.to_string()));
            }
            return Ok(());
        }
        self.dots[f] = Some(Dot::Changed(made - 1));
        Ok(())
    }

    fn position(&self, f: usize, r: Range, form: Position) -> String {
        let file = &self.files[f];
        let text = &file.text;
        let line_of = |q: u64| text.char_to_line(q as usize) as u64 + 1;
        match form {
            Position::Runes if r.q0 == r.q1 => format!("{}:#{}", file.name, r.q0),
            Position::Runes => format!("{}:#{},#{}", file.name, r.q0, r.q1),
            // acme's PosnLineChars: the start, and the end too when it is
            // on another line (no allowance for a final newline).
            Position::LineColumn => {
                let column = |q: u64, line: u64| q - text.line_to_char(line as usize - 1) as u64;
                let (l1, l2) = (line_of(r.q0), line_of(r.q1));
                let start = format!("{}:{l1}+#{}", file.name, column(r.q0, l1));
                match l2 == l1 {
                    true => start,
                    false => format!("{start},{l2}+#{}", column(r.q1, l2)),
                }
            }
            Position::Lines => {
                let l1 = line_of(r.q0);
                let mut l2 = line_of(r.q1);
                if r.q1 > r.q0 && text.char(r.q1 as usize - 1) == '\n' {
                    l2 -= 1;
                }
                match l2 > l1 {
                    true => format!("{}:{l1},{l2}", file.name),
                    false => format!("{}:{l1}", file.name),
                }
            }
        }
    }

    /// Sorts each file's changes, refuses overlaps, and maps the dots into
    /// the text as it will be.
    fn finish(mut self) -> Result<Outcome> {
        for (list, dot) in self.changes.iter_mut().zip(&mut self.dots) {
            // Stable: inserts at one place keep the order they were made in.
            let follow = match dot {
                Some(Dot::Changed(i)) => Some(*i),
                _ => None,
            };
            let followed = list.sort(follow).map_err(EditError::Overlap)?;
            if let Some(at) = followed {
                *dot = Some(Dot::Changed(at));
            }
        }
        for (f, dot) in self.dots.iter().enumerate() {
            let Some(dot) = dot else { continue };
            let list = &self.changes[f];
            // How far the changes before change `upto` move a point.
            let shift = |q: u64, upto: usize| -> u64 {
                // Their texts lie one after another: counted in one go.
                let put = list.text_of(0..upto).chars().count() as i128;
                let removed = i128::from(list.removed_runes(0..upto));
                (q as i128 + put - removed).max(0) as u64
            };
            let r = match *dot {
                Dot::Changed(i) => {
                    let (q0, _, text) = list.get(i);
                    let q0 = shift(q0, i);
                    Range::new(q0, q0 + text.chars().count() as u64)
                }
                Dot::Original(r) => {
                    // A point inside a replaced range goes to the start of
                    // what replaced it; one at or past its end, past it.
                    let point = |q: u64| {
                        let before = list.iter().take_while(|c| c.1 <= q).count();
                        match (before < list.len()).then(|| list.get(before)) {
                            Some((q0, _, _)) if q0 < q => shift(q0, before),
                            _ => shift(q, before),
                        }
                    };
                    Range::new(point(r.q0), point(r.q1))
                }
            };
            self.out.dots.insert(f, r);
        }
        for f in std::mem::take(&mut self.written) {
            if self.changes[f].is_empty() && !self.out.cleaned.contains(&f) {
                self.out.cleaned.push(f);
            }
        }
        // The files the commands changed, not the rest.
        self.out.changes = self.changes.into_iter().enumerate().filter(|(_, list)| !list.is_empty()).collect();
        Ok(self.out)
    }
}

/// A replacement with `&` (the match), `\1`..`\9` (groups), `\n` (newline)
/// and `\c` (c itself) expanded onto the end of `out`.
fn expand(rep: &str, hay: &Haystack, m: &Found, out: &mut String) {
    let group = |g: usize| m.group(g).map_or("", |r| hay.str(r));
    let mut chars = rep.chars();
    while let Some(c) = chars.next() {
        match c {
            '&' => out.push_str(group(0)),
            '\\' => match chars.next() {
                Some(d @ '0'..='9') => out.push_str(group(d as usize - '0' as usize)),
                Some('n') => out.push('\n'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
}

/// Applies `changes` (sorted, not overlapping) to `text`: what the caller
/// does with each buffer, here for tests and for replicas that want it.
pub fn apply(text: &str, changes: &Changes) -> String {
    let mut rope = Rope::from_str(text);
    for (q0, q1, text) in changes.iter().rev() {
        rope.remove(q0 as usize..q1 as usize);
        rope.insert(q0 as usize, text);
    }
    rope.to_string()
}

#[cfg(test)]
mod tests;
