//! One module per command. Each takes its parsed arguments (`crate::args`) and does the work
//! through the library crates; nothing here is policy or model code.

pub(crate) mod bench;
pub(crate) mod calibrate;
pub(crate) mod compare;
pub(crate) mod list;
pub(crate) mod mrc;
pub(crate) mod replay;
pub(crate) mod replay_nbd;
pub(crate) mod reproduce;
pub(crate) mod serve;
pub(crate) mod sim;
pub(crate) mod trace;
pub(crate) mod workbench;
