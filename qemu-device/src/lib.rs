//! pci-rig's emulated PCI device.
//!
//! - [`model`]: the device as a pure state machine (config space, BAR0 registers, BAR2 window,
//!   interrupt state, fault knobs, access log). REGISTERS.md documents it.
//! - [`control`]: the JSON-lines control protocol, and a socket server for it.
//! - [`transport`]: a thin vfio-user server that feeds QEMU's accesses to the model.

pub mod control;
pub mod model;
pub mod transport;
