//! apex-tests: end-to-end and repository-wide tests live in this crate's test targets; the library is empty on purpose.
