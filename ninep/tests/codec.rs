//! The codec against the manual: every message round-trips, known byte
//! transcripts decode, malformed frames are refused cleanly, and no input
//! panics.

use apex_ninep::fcall::*;
use apex_ninep::*;
use proptest::prelude::*;

fn stat() -> Stat {
    Stat {
        ty: 1,
        dev: 2,
        qid: Qid { ty: QTDIR, vers: 3, path: 4 },
        mode: DMDIR | 0o755,
        atime: 5,
        mtime: 6,
        length: 7,
        name: "dir".into(),
        uid: "glenda".into(),
        gid: "sys".into(),
        muid: "é".into(),
    }
}

fn every_message() -> Vec<Fcall> {
    let q = Qid { ty: QTFILE, vers: 9, path: 1 << 40 };
    use Fcall::*;
    vec![
        Tversion { msize: 8192, version: "9P2000".into() },
        Rversion { msize: 8192, version: "9P2000".into() },
        Tauth { afid: 1, uname: "u".into(), aname: "".into() },
        Rauth { aqid: q },
        Tattach { fid: 0, afid: NOFID, uname: "glenda".into(), aname: "main".into() },
        Rattach { qid: q },
        Rerror { ename: "file does not exist".into() },
        Tflush { oldtag: 7 },
        Rflush,
        Twalk { fid: 0, newfid: 1, wnames: vec!["a".into(), "b".into()] },
        Twalk { fid: 0, newfid: 1, wnames: vec![] },
        Rwalk { wqids: vec![q, q] },
        Topen { fid: 1, mode: ORDWR | OTRUNC },
        Ropen { qid: q, iounit: 8168 },
        Topenfd { fid: 1, mode: OREAD },
        Ropenfd { qid: q, iounit: 0, unixfd: 5 },
        Tcreate { fid: 1, name: "f".into(), perm: 0o644, mode: OWRITE },
        Rcreate { qid: q, iounit: 0 },
        Tread { fid: 1, offset: 1 << 33, count: 100 },
        Rread { data: b"hello".to_vec() },
        Twrite { fid: 1, offset: 0, data: vec![0, 255, 10] },
        Rwrite { count: 3 },
        Tclunk { fid: 1 },
        Rclunk,
        Tremove { fid: 1 },
        Rremove,
        Tstat { fid: 1 },
        Rstat { stat: Box::new(stat()) },
        Twstat { fid: 1, stat: Box::new(Stat::dont_touch()) },
        Rwstat,
    ]
}

#[test]
fn every_message_round_trips() {
    for (i, body) in every_message().into_iter().enumerate() {
        let msg = Msg { tag: i as u16, body };
        let bytes = to_bytes(&msg);
        assert_eq!(check(&bytes, 1 << 20), Ok(Some(bytes.len())), "{msg:?}");
        assert_eq!(parse(&bytes), Ok(msg.clone()));
        assert_eq!(msg.body.is_request(), msg.body.ty() % 2 == 0);
    }
}

/// A frame whose bulk data is left out is the same bytes once the data
/// follows it, at every size around the threshold.
#[test]
fn frames_with_data_left_out_are_the_same_bytes() {
    for len in [0, 1, codec::LARGE - 1, codec::LARGE, codec::LARGE + 7] {
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        for body in [Fcall::Rread { data: data.clone() }, Fcall::Twrite { fid: 3, offset: 1 << 33, data: data.clone() }]
        {
            let msg = Msg { tag: 5, body };
            let mut out = vec![0xee];
            let after = codec::encode_frame(&msg, &mut out, codec::LARGE);
            assert_eq!(after.is_some(), len >= codec::LARGE);
            out.extend_from_slice(after.unwrap_or_default());
            assert_eq!(&out[1..], to_bytes(&msg).as_slice(), "{len} bytes");
        }
    }
}

#[test]
fn byte_transcripts() {
    // Rerror "x" on tag 1, and an Rstat's doubled length: stat[n] then the
    // record's own size, as plan9port writes them.
    assert_eq!(
        to_bytes(&Msg { tag: 1, body: Fcall::Rerror { ename: "x".into() } }),
        b"\x0a\x00\x00\x00\x6b\x01\x00\x01\x00x"
    );
    let bytes = to_bytes(&Msg { tag: 2, body: Fcall::Rstat { stat: Box::new(stat()) } });
    let n = u16::from_le_bytes([bytes[7], bytes[8]]);
    let size = u16::from_le_bytes([bytes[9], bytes[10]]);
    assert_eq!((n, size), (size + 2, bytes.len() as u16 - 11));
    let mut dir = Vec::new();
    put_stat(&mut dir, &stat());
    put_stat(&mut dir, &Stat { name: "other".into(), ..stat() });
    assert_eq!(parse_stats(&dir).unwrap().len(), 2);
    assert!(parse_stats(&dir[..dir.len() - 1]).is_err(), "half a record is refused");
}

/// A frame with `body` after a header claiming its true size.
fn frame(ty: u8, tag: u16, body: &[u8]) -> Vec<u8> {
    let mut v = ((7 + body.len()) as u32).to_le_bytes().to_vec();
    v.push(ty);
    v.extend_from_slice(&tag.to_le_bytes());
    v.extend_from_slice(body);
    v
}

#[test]
fn malformed_frames_are_refused_with_their_tag() {
    let mut walk17 = vec![0, 0, 0, 0, 1, 0, 0, 0, 17, 0];
    for _ in 0..17 {
        walk17.extend_from_slice(&[1, 0, b'a']);
    }
    let cases: Vec<(Vec<u8>, &str, Option<u16>)> = vec![
        (frame(200, 5, &[]), "unknown 9P message type 200", Some(5)),
        (frame(106, 5, &[]), "unknown 9P message type 106", Some(5)), // Terror does not exist
        (frame(110, 6, &walk17), "at most 16", Some(6)),
        (frame(100, 7, &[0, 32, 0, 0, 9, 0, b'9']), "version needs 9 bytes", Some(7)),
        (frame(118, 8, &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255]), "data needs 4294967295", Some(8)),
        (frame(120, 9, &[1, 0, 0, 0, 99]), "1 bytes after its message", Some(9)),
        (frame(104, 10, &[0, 0, 0, 0, 255, 255, 255, 255, 2, 0, 0xff, 0xfe, 0, 0]), "uname is not UTF-8", Some(10)),
        (frame(126, 11, &[1, 0, 0, 0, 4, 0, 2, 0, 0, 0]), "shorter than its fixed fields", Some(11)),
        (frame(125, 12, &[60, 0]), "stat needs 60 bytes", Some(12)),
        (vec![7, 0, 0, 0, 116, 1], "says it is 7 bytes but the frame is 6", None),
        (vec![7, 0, 0], "size needs 4 bytes", None),
    ];
    for (bytes, want, tag) in cases {
        let err = parse(&bytes).expect_err(want);
        assert!(err.to_string().contains(want), "{err} lacks {want:?}");
        assert_eq!(err.tag(), tag, "{err}");
    }
    // Framing errors: the connection closes.
    assert!(matches!(check(&[3, 0, 0, 0], 8192), Err(FrameError::TooSmall(3))));
    assert!(matches!(check(&[1, 0, 1, 0, 0, 0, 0], 8192), Err(FrameError::TooLarge { size: 65537, msize: 8192 })));
    assert_eq!(check(&[0, 1], 8192), Ok(None));
}

proptest! {
    /// No bytes make the decoder panic or allocate past the frame.
    #[test]
    fn arbitrary_bytes_never_panic(ty in any::<u8>(), body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let bytes = frame(ty, 1, &body);
        let _ = parse(&bytes);
        let _ = check(&bytes, 256);
        let _ = parse_stats(&body);
    }

    /// Any message survives encode and parse, however its fields are set.
    #[test]
    fn random_writes_and_walks_round_trip(
        tag in any::<u16>(), fid in any::<u32>(), offset in any::<u64>(),
        data in proptest::collection::vec(any::<u8>(), 0..100),
        names in proptest::collection::vec("[^/]{0,8}", 0..=16),
    ) {
        for body in [
            Fcall::Twrite { fid, offset, data: data.clone() },
            Fcall::Twalk { fid, newfid: fid ^ 1, wnames: names.clone() },
        ] {
            let msg = Msg { tag, body };
            prop_assert_eq!(parse(&to_bytes(&msg)), Ok(msg));
        }
    }

    /// Any stat survives Rstat, Twstat and a directory read: every fixed
    /// field, names short enough to be kept inline and longer, ASCII and
    /// not, with lengths whose bytes are ASCII and not (the decoder reads
    /// names checked all four at once when all of that is ASCII); each
    /// record's size field counts exactly the bytes after it.
    #[test]
    fn random_stats_round_trip(
        fields in proptest::array::uniform4("[ -~]{0,300}|.{0,40}"),
        (ty, dev, qty, vers) in (any::<u16>(), any::<u32>(), any::<u8>(), any::<u32>()),
        (mode, atime, mtime) in (any::<u32>(), any::<u32>(), any::<u32>()),
        length in any::<u64>(), path in any::<u64>(),
    ) {
        let [name, uid, gid, muid] = fields.map(|f| Name::from(f.as_str()));
        let qid = Qid { ty: qty, vers, path };
        let st = Stat { ty, dev, qid, mode, atime, mtime, length, name, uid, gid, muid };
        for body in [Fcall::Rstat { stat: Box::new(st.clone()) }, Fcall::Twstat { fid: 3, stat: Box::new(st.clone()) }] {
            let msg = Msg { tag: 4, body };
            prop_assert_eq!(parse(&to_bytes(&msg)), Ok(msg));
        }
        let mut dir = Vec::new();
        put_stat(&mut dir, &st);
        prop_assert_eq!(u16::from_le_bytes([dir[0], dir[1]]) as usize, dir.len() - 2);
        put_stat(&mut dir, &st);
        prop_assert_eq!(parse_stats(&dir), Ok(vec![st.clone(), st]));
    }

    /// Stats whose names and lengths are all ASCII, the case the decoder
    /// reads unchecked (names under 128 bytes), round-trip too.
    #[test]
    fn ascii_stats_round_trip(fields in proptest::array::uniform4("[ -~]{0,127}"), path in any::<u64>()) {
        let [name, uid, gid, muid] = fields.map(|f| Name::from(f.as_str()));
        let st = Stat { name, uid, gid, muid, qid: Qid { ty: QTFILE, vers: 7, path }, ..stat() };
        let msg = Msg { tag: 4, body: Fcall::Rstat { stat: Box::new(st) } };
        prop_assert_eq!(parse(&to_bytes(&msg)), Ok(msg));
    }
}

/// A record all ASCII, as the decoder's unchecked path reads it, that is
/// malformed is refused as any other: a name longer than what is left,
/// and bytes after the last name.
#[test]
fn a_malformed_ascii_stat_is_refused() {
    let mut rec = Vec::new();
    put_stat(&mut rec, &Stat { name: "abc".into(), uid: "u".into(), gid: "g".into(), muid: "m".into(), ..stat() });
    assert!(rec[2 + 39..].is_ascii(), "the names region is ASCII");
    // The name says 100 bytes, past the record's end.
    let mut long = rec.clone();
    long[2 + 39] = 100;
    assert!(
        matches!(parse_stats(&long), Err(DecodeError::Overrun { what: "stat name", .. })),
        "{:?}",
        parse_stats(&long)
    );
    // Two bytes more than the names, counted in the record's size.
    let mut trailing = rec.clone();
    trailing.extend_from_slice(b"zz");
    let size = u16::from_le_bytes([trailing[0], trailing[1]]) + 2;
    trailing[..2].copy_from_slice(&size.to_le_bytes());
    assert!(
        matches!(parse_stats(&trailing), Err(DecodeError::Trailing { what: "stat", extra: 2, .. })),
        "{:?}",
        parse_stats(&trailing)
    );
}

/// Names longer than a stat record can carry are cut at a rune boundary
/// to what fits (the record's size, and Rstat's count of it with its
/// size, are 16 bits), and the sizes say what was written, so the reply
/// parses; a name that is not UTF-8 is refused.
#[test]
fn stat_names_are_cut_whole_and_checked() {
    let long = format!("a{}", "é".repeat(40_000));
    let st = Stat { name: long.as_str().into(), uid: "".into(), gid: "".into(), muid: "".into(), ..stat() };
    let mut dir = Vec::new();
    put_stat(&mut dir, &st);
    let got = parse_stats(&dir).expect("a whole record");
    // 65535 less the size's 2 bytes and the 47 of fixed fields: 1 + 32742
    // two-byte runes; the next would split.
    assert_eq!(got[0].name.len(), 65_485);
    assert!(long.starts_with(got[0].name.as_str()));
    assert_eq!(dir.len(), 2 + 47 + 65_485);
    // Every field long: all four share the room, in order.
    let all = Stat { uid: long.as_str().into(), gid: long.as_str().into(), muid: "m".into(), ..st };
    for body in [Fcall::Rstat { stat: Box::new(all.clone()) }, Fcall::Twstat { fid: 1, stat: Box::new(all) }] {
        let msg = parse(&to_bytes(&Msg { tag: 1, body })).expect("a stat cut to fit parses");
        let (Fcall::Rstat { stat } | Fcall::Twstat { stat, .. }) = msg.body else { panic!("{msg:?}") };
        assert_eq!((stat.name.len(), stat.uid.len(), stat.gid.len(), stat.muid.len()), (65_485, 1, 0, 0));
    }
    let mut bad = Vec::new();
    put_stat(&mut bad, &Stat { name: "ab\u{e9}".into(), ..stat() });
    let at = bad.windows(2).position(|w| w == "é".as_bytes()).expect("the name's last rune");
    bad[at + 1] = b'x'; // 0xc3 then an ASCII byte: not UTF-8
    assert!(
        matches!(parse_stats(&bad), Err(DecodeError::NotUtf8 { what: "stat name", .. })),
        "{:?}",
        parse_stats(&bad)
    );
}
