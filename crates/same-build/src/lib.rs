//! Feature pins and no code. This crate's manifest asks for every feature
//! the workspace's test build gives a crate, so the README's commands
//! compile each crate once (see `docs/build.md`, "Feature pins").

#![forbid(unsafe_code)]
