//! pci-rig's vocabulary: the words every other crate of the rig speaks. The three arches, the
//! kernel lines, the scenario catalog, the removal-point sweep's plans, what a verdict is, and
//! the device-tree contract. Plain data and pure functions over it: no processes, no files, no
//! clock; every crate of the rig depends on this one, and it on none of them.

pub mod arch;
pub mod devicetree;
pub mod line;
pub mod matrix;
pub mod scenario;
pub mod sweep;
pub mod verdict;
