//! The host: what must be installed (host packages, bindgen, QEMU, busybox),
//! how its commands are run, and our QEMU plugins.

pub mod apt;
pub mod plugins;
pub mod process;
pub mod provision;
pub mod tsc;
