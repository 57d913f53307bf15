//! Writing a frame whose bulk data lies apart from its header.
//!
//! `codec::encode_frame` leaves large Rread/Twrite data where it is; this
//! sends header and data with one writev, so the peer wakes once per frame
//! and the data is not copied into a frame buffer first.

use std::io::IoSlice;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Writes all of `head` then all of `data`, gathered (as few writes as the
/// stream takes).
pub async fn write_two(w: &mut (impl AsyncWrite + Unpin), mut head: &[u8], mut data: &[u8]) -> std::io::Result<()> {
    while !head.is_empty() || !data.is_empty() {
        let n = w.write_vectored(&[IoSlice::new(head), IoSlice::new(data)]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let from_head = n.min(head.len());
        head = &head[from_head..];
        data = &data[n - from_head..];
    }
    Ok(())
}
