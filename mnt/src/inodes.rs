//! Inodes: what the kernel calls a file, as a path from the 9P root.
//!
//! 9P has no inode numbers, but every file's qid.path is unique on its
//! server, so an inode number is derived from it (the root is 1, as FUSE
//! wants). Each inode keeps the names from the root (so it can be walked
//! to again), the last stat, how many lookups the kernel holds, and, once
//! one has been walked, a fid for stat and for cloning at open. Entries
//! that readdirplus hands out get no fid until they are used.

use apex_ninep::fcall::{Qid, Stat};
use std::collections::HashMap;

/// The root's inode number.
pub const ROOT: u64 = 1;

/// One inode.
#[derive(Clone, Debug)]
pub struct Node {
    /// Names from the attach root.
    pub names: Vec<String>,
    pub stat: Stat,
    /// A fid on this file, once walked.
    pub fid: Option<u32>,
    /// Lookups the kernel holds (FUSE_FORGET gives them back).
    pub lookups: u64,
}

/// Every inode the kernel knows.
pub struct Inodes {
    root_path: u64,
    nodes: HashMap<u64, Node>,
}

impl Inodes {
    /// The table of a mount whose root has `root` as qid, walked as `fid`.
    pub fn new(root: Qid, root_stat: Stat, fid: u32) -> Inodes {
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, Node { names: Vec::new(), stat: root_stat, fid: Some(fid), lookups: 1 });
        Inodes { root_path: root.path, nodes }
    }

    /// The inode number of the file with qid `qid`.
    pub fn number(&self, qid: &Qid) -> u64 {
        match qid.path {
            p if p == self.root_path => ROOT,
            // Keep clear of 0 (no inode) and 1 (the root).
            p => p.checked_add(2).filter(|n| *n > ROOT).unwrap_or(u64::MAX),
        }
    }

    pub fn get(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    pub fn get_mut(&mut self, ino: u64) -> Option<&mut Node> {
        self.nodes.get_mut(&ino)
    }

    /// Records a lookup of the file `names` with `stat`, walked as `fid`
    /// if one was. Returns its number and a fid the caller clunks: the
    /// new one when the inode already had a fid on the same file, or the
    /// old one when the file at this qid is another now (a server gave a
    /// deleted file's qid.path to a new one: the old fid is on the file
    /// that went).
    pub fn looked_up(&mut self, names: Vec<String>, stat: Stat, fid: Option<u32>) -> (u64, Option<u32>) {
        let ino = self.number(&stat.qid);
        match self.nodes.get_mut(&ino) {
            Some(node) => {
                node.lookups += 1;
                // The root is walked to by no names, whatever a server
                // that gives another file its qid says. Only a fresh walk
                // says which file is there now: a listing read before a
                // rename still has the old names.
                let another = ino != ROOT && fid.is_some() && node.names != names;
                if ino != ROOT {
                    node.names = names;
                }
                node.stat = stat;
                match (node.fid, fid) {
                    (None, f) => {
                        node.fid = f;
                        (ino, None)
                    }
                    (Some(old), Some(new)) if another => {
                        node.fid = Some(new);
                        (ino, Some(old))
                    }
                    (Some(_), spare) => (ino, spare),
                }
            }
            None => {
                self.nodes.insert(ino, Node { names, stat, fid, lookups: 1 });
                (ino, None)
            }
        }
    }

    /// The file `from` is now named `to` (a rename): it and everything
    /// under it are walked to by the new names from here on.
    pub fn renamed(&mut self, from: &[String], to: &[String]) {
        for node in self.nodes.values_mut() {
            if !from.is_empty() && node.names.starts_with(from) {
                node.names.splice(..from.len(), to.iter().cloned());
            }
        }
    }

    /// Gives back `n` lookups; when none remain the inode is dropped and
    /// its fid returned for clunking. The root stays.
    pub fn forget(&mut self, ino: u64, n: u64) -> Option<u32> {
        if ino == ROOT {
            return None;
        }
        let node = self.nodes.get_mut(&ino)?;
        node.lookups = node.lookups.saturating_sub(n);
        match node.lookups {
            0 => self.nodes.remove(&ino).and_then(|n| n.fid),
            _ => None,
        }
    }

    /// The number of inodes held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(path: u64) -> Stat {
        Stat { qid: Qid { path, ..Qid::default() }, ..Stat::default() }
    }

    #[test]
    fn lookups_count_and_forget_frees_the_fid() {
        let mut t = Inodes::new(Qid { path: 0, ..Qid::default() }, stat(0), 100);
        assert_eq!(t.number(&Qid::default()), ROOT);
        let (a, spare) = t.looked_up(vec!["a".into()], stat(5), Some(1));
        assert_eq!((a, spare), (7, None));
        // A second lookup keeps the first fid and hands back the new one.
        assert_eq!(t.looked_up(vec!["a".into()], stat(5), Some(2)), (7, Some(2)));
        // Another file given a gone one's qid.path: the node takes the new
        // fid (on the file there now) and hands back the old one.
        assert_eq!(t.looked_up(vec!["c".into()], stat(5), Some(3)), (7, Some(1)));
        assert_eq!(t.get(7).unwrap().fid, Some(3));
        assert_eq!(t.looked_up(vec!["c".into()], stat(5), Some(4)), (7, Some(4)));
        // A listing (no fid walked) may be older than a rename: it says
        // nothing of which file is there, and the fid stays.
        let (b, _) = t.looked_up(vec!["b".into()], stat(9), Some(8));
        assert_eq!(t.looked_up(vec!["e".into()], stat(9), None), (b, None));
        assert_eq!(t.get(b).unwrap().fid, Some(8));
        assert_eq!(t.forget(b, 2), Some(8));
        // readdirplus entries have no fid yet.
        let (b, _) = t.looked_up(vec!["b".into()], stat(9), None);
        assert_eq!(t.get(b).unwrap().fid, None);
        assert_eq!(t.forget(a, 3), None);
        assert_eq!(t.forget(a, 1), Some(3));
        assert!(t.get(a).is_none());
        assert_eq!(t.forget(ROOT, 5), None);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn a_rename_renames_what_is_under_it_and_the_roots_names_stay_none() {
        let mut t = Inodes::new(Qid { path: 0, ..Qid::default() }, stat(0), 100);
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (d, _) = t.looked_up(names(&["d"]), stat(5), None);
        let (f, _) = t.looked_up(names(&["d", "f"]), stat(6), None);
        let (other, _) = t.looked_up(names(&["dd"]), stat(7), None);
        t.renamed(&names(&["d"]), &names(&["e"]));
        assert_eq!(t.get(d).unwrap().names, names(&["e"]));
        assert_eq!(t.get(f).unwrap().names, names(&["e", "f"]));
        assert_eq!(t.get(other).unwrap().names, names(&["dd"]), "a name that only begins the same");
        t.looked_up(names(&["x"]), stat(0), None);
        assert!(t.get(ROOT).unwrap().names.is_empty());
    }
}
