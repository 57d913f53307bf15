//! The 9P2000 messages (intro(5)): `Fcall`, one variant per T- and
//! R-message, and the records they carry, `Qid` and `Stat`.
//!
//! Plain data: what each field means is the manual's; how it is laid out on
//! the wire is `codec.rs`'s. plan9port's `Topenfd`/`Ropenfd` (types 98 and
//! 99, an open that also passes a file descriptor) are here because acme's
//! clients (`win`, `mc`) use them.

/// "No tag": the tag of Tversion.
pub const NOTAG: u16 = 0xFFFF;
/// "No fid": the afid of a Tattach without authentication.
pub const NOFID: u32 = 0xFFFF_FFFF;
/// Most names one Twalk may carry (walk(5)).
pub const MAXWELEM: usize = 16;
/// Bytes of a Twrite or Rread header before its data: size[4] type[1]
/// tag[2] fid[4] offset[8] count[4] (Twrite, the larger). A server's iounit
/// is msize minus this.
pub const IOHDRSZ: u32 = 24;

/// Qid types (the high byte of a directory entry's mode).
pub const QTDIR: u8 = 0x80;
pub const QTAPPEND: u8 = 0x40;
pub const QTEXCL: u8 = 0x20;
pub const QTAUTH: u8 = 0x08;
pub const QTFILE: u8 = 0x00;

/// Mode bits of `Stat::mode`.
pub const DMDIR: u32 = 0x8000_0000;
pub const DMAPPEND: u32 = 0x4000_0000;
pub const DMEXCL: u32 = 0x2000_0000;
pub const DMAUTH: u32 = 0x0800_0000;

/// Open modes (open(5)).
pub const OREAD: u8 = 0;
pub const OWRITE: u8 = 1;
pub const ORDWR: u8 = 2;
pub const OEXEC: u8 = 3;
pub const OTRUNC: u8 = 0x10;
pub const ORCLOSE: u8 = 0x40;

/// The server's unique identification of a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Qid {
    /// QTDIR, QTAPPEND, ...
    pub ty: u8,
    /// Version: changes when the file does.
    pub vers: u32,
    /// Unique among the server's files, never reused.
    pub path: u64,
}

/// A directory entry (stat(5)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// For kernel use.
    pub ty: u16,
    pub dev: u32,
    pub qid: Qid,
    /// Permissions and DM* flags.
    pub mode: u32,
    pub atime: u32,
    pub mtime: u32,
    pub length: u64,
    pub name: Name,
    pub uid: Name,
    pub gid: Name,
    /// Last modifier.
    pub muid: Name,
}

/// A stat record's string: kept inline up to 24 bytes, so the names a
/// stat carries (a file's, a user's) cost no allocation to make, copy or
/// decode.
pub type Name = compact_str::CompactString;

impl Stat {
    /// The "don't touch" stat of wstat(5): every field its maximum or
    /// empty, so a Twstat changes only what its caller sets.
    pub fn dont_touch() -> Stat {
        Stat {
            ty: !0,
            dev: !0,
            qid: Qid { ty: !0, vers: !0, path: !0 },
            mode: !0,
            atime: !0,
            mtime: !0,
            length: !0,
            name: Name::default(),
            uid: Name::default(),
            gid: Name::default(),
            muid: Name::default(),
        }
    }
}

/// One 9P2000 message body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fcall {
    Tversion {
        msize: u32,
        version: String,
    },
    Rversion {
        msize: u32,
        version: String,
    },
    Tauth {
        afid: u32,
        uname: String,
        aname: String,
    },
    Rauth {
        aqid: Qid,
    },
    Tattach {
        fid: u32,
        afid: u32,
        uname: String,
        aname: String,
    },
    Rattach {
        qid: Qid,
    },
    Rerror {
        ename: String,
    },
    Tflush {
        oldtag: u16,
    },
    Rflush,
    Twalk {
        fid: u32,
        newfid: u32,
        wnames: Vec<String>,
    },
    Rwalk {
        wqids: Vec<Qid>,
    },
    Topen {
        fid: u32,
        mode: u8,
    },
    Ropen {
        qid: Qid,
        iounit: u32,
    },
    /// plan9port: an open whose reply also passes a file descriptor.
    Topenfd {
        fid: u32,
        mode: u8,
    },
    Ropenfd {
        qid: Qid,
        iounit: u32,
        unixfd: u32,
    },
    Tcreate {
        fid: u32,
        name: String,
        perm: u32,
        mode: u8,
    },
    Rcreate {
        qid: Qid,
        iounit: u32,
    },
    Tread {
        fid: u32,
        offset: u64,
        count: u32,
    },
    Rread {
        data: Vec<u8>,
    },
    Twrite {
        fid: u32,
        offset: u64,
        data: Vec<u8>,
    },
    Rwrite {
        count: u32,
    },
    Tclunk {
        fid: u32,
    },
    Rclunk,
    Tremove {
        fid: u32,
    },
    Rremove,
    Tstat {
        fid: u32,
    },
    // A stat is boxed: with it inline every message would be twice the
    // size, and each move of one a call to memcpy.
    Rstat {
        stat: Box<Stat>,
    },
    Twstat {
        fid: u32,
        stat: Box<Stat>,
    },
    Rwstat,
}

/// A message: its tag and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    pub tag: u16,
    pub body: Fcall,
}

impl Fcall {
    /// The wire type byte.
    pub fn ty(&self) -> u8 {
        use Fcall::*;
        match self {
            Topenfd { .. } => 98,
            Ropenfd { .. } => 99,
            Tversion { .. } => 100,
            Rversion { .. } => 101,
            Tauth { .. } => 102,
            Rauth { .. } => 103,
            Tattach { .. } => 104,
            Rattach { .. } => 105,
            Rerror { .. } => 107,
            Tflush { .. } => 108,
            Rflush => 109,
            Twalk { .. } => 110,
            Rwalk { .. } => 111,
            Topen { .. } => 112,
            Ropen { .. } => 113,
            Tcreate { .. } => 114,
            Rcreate { .. } => 115,
            Tread { .. } => 116,
            Rread { .. } => 117,
            Twrite { .. } => 118,
            Rwrite { .. } => 119,
            Tclunk { .. } => 120,
            Rclunk => 121,
            Tremove { .. } => 122,
            Rremove => 123,
            Tstat { .. } => 124,
            Rstat { .. } => 125,
            Twstat { .. } => 126,
            Rwstat => 127,
        }
    }

    /// Whether this is a request (T-message).
    pub fn is_request(&self) -> bool {
        // T-types are even, R-types odd, in both the 98/99 and 100..127 ranges.
        self.ty() % 2 == 0
    }

    /// Whether this request changes something (a write, create, remove or
    /// wstat), as opposed to looking.
    pub fn changes(&self) -> bool {
        matches!(self, Fcall::Twrite { .. } | Fcall::Tcreate { .. } | Fcall::Tremove { .. } | Fcall::Twstat { .. })
    }
}
