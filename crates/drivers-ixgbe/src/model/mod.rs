//! The model of the 82599 (being written; see the crate docs).
