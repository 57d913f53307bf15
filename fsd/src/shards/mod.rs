//! What `shards/` and `meta/` are made of as text: a shard's entries as
//! lossless lines (`entrytext`), and the tables of the metalog's state,
//! leases and proposal outcomes (`tables`). Their files are served by
//! `fsys::shard` and `fsys::session`.

pub mod entrytext;
pub mod files;
pub mod tables;
