//! One guest: the initramfs it boots, QEMU running it (QMP beside), its
//! console, what it asks of the host, and our device server attached to it.

pub mod cpio;
pub mod device;
pub mod dt;
pub mod image;
pub mod oracle;
pub mod qemu;
pub mod qmp;

// The guest's languages, which the judge parses.
pub use judge::requests::{GuestRequest, HostAction, DONE, SETTLED};
pub use judge::{console, requests};
