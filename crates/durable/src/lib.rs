#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod checkpoint;
pub mod dir;
mod disk;
mod envelope;
mod error;
pub mod hash;
mod key;
mod leased;
mod read;
mod run_id;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod write;

#[doc(inline)]
pub use checkpoint::{Checkpoint, Durable, Opened, Options};
#[doc(inline)]
pub use dir::Dir;
pub use disk::DiskDir;
pub use error::{Error, Result};
pub use key::key;
pub use run_id::RunId;
