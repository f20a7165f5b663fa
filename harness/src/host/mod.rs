//! The host: what must be installed (host packages, bindgen, QEMU, busybox)
//! and how its commands are run.

pub mod apt;
pub mod process;
pub mod provision;
