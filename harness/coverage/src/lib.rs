//! Coverage seen from outside the guest: the blocks of guest code the
//! `tcg-coverage` QEMU plugin saw run, mapped to the functions and source
//! lines of the images they belong to (our modules through their line
//! tables and the load addresses the guest printed, the kernel crate in
//! vmlinux), counted over the boots of a run, written as an lcov tracefile
//! and held against a committed bar.
//!
//! Nothing here runs a guest: a boot's evidence is two files' text (the
//! plugin's record and the console), so a run's coverage is recomputed from
//! its folder alone.

pub mod bar;
pub mod boot;
pub mod image;
pub mod lcov;
pub mod manifest;
pub mod run;
pub mod tally;

pub use bar::Bar;
pub use boot::{Load, BLOCKS};
pub use image::Image;
pub use manifest::{Manifest, MANIFEST};
pub use tally::Tally;
