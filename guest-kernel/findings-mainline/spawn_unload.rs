// SPDX-License-Identifier: GPL-2.0

//! A finding in upstream's 7.x workqueue API, booted by `mainline-spawn-unload` (run by name
//! only; it must fail): `Queue::try_spawn` is safe, and nothing in the API can cancel or wait
//! for the closure it queues, so a module can be unloaded while that closure, code of the
//! module, still runs. This module spawns one that sleeps for half a second and then prints;
//! the scenario unloads the module at once. The kernel then returns into freed module text.
//!
//! Without `unsafe`: the hole is in safe code.

#![forbid(unsafe_code)]

use kernel::{
    prelude::*,
    time::{delay::fsleep, Delta},
    workqueue,
};

module! {
    type: SpawnUnload,
    name: "spawn_unload",
    authors: ["pci-rig"],
    description: "Spawns a closure that outlives the module (a finding in 7.x's workqueue API)",
    license: "GPL",
}

struct SpawnUnload;

impl kernel::Module for SpawnUnload {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        workqueue::system().try_spawn(GFP_KERNEL, || {
            pr_info!("closure started\n");
            fsleep(Delta::from_millis(500));
            // Module code, half a second after `rmmod` returned.
            pr_info!("closure ran to its end\n");
        })?;
        pr_info!("closure spawned\n");
        Ok(SpawnUnload)
    }
}
