//! One guest: the initramfs it boots, QEMU running it (QMP beside), its
//! console, what it asks of the host, and our device server attached to it.

pub mod console;
pub mod cpio;
pub mod device;
pub mod dt;
pub mod image;
pub mod qemu;
pub mod qmp;
pub mod requests;

pub use requests::{GuestRequest, HostAction, DONE, SETTLED};
