// SPDX-License-Identifier: GPL-2.0

//! A generic device-tree cpufreq driver in Rust (after the kernel's C `cpufreq-dt`), safe code
//! only.
//!
//! It is a platform driver for the node `compatible = "pci-rig,cpufreq-dt"`: its probe registers
//! the cpufreq driver, its removal unregisters it. Each policy covers the CPUs sharing the first
//! CPU's OPP table (`opp-shared`), lists that table's frequencies, and moves between them with
//! `dev_pm_opp_set_rate`, which sets the CPUs' clock. Every step is logged (`rcpufreq-dt: …`),
//! with the clock's rate read back, for the harness to judge.

#![forbid(unsafe_code)]

use core::pin::Pin;
use kernel::{
    c_str,
    clk::{Clk, Hertz},
    cpufreq::{self, FreqTable, Policy, PolicySetup},
    dev_info,
    device::Device,
    driver::Registration,
    of, opp, platform,
    prelude::*,
    types::ARef,
};

/// A policy's CPUs, as the driver keeps them.
struct CpuData {
    cpu_dev: ARef<Device>,
    opp: opp::Table,
    /// The CPUs' clock, read back after each change (the policy holds its own handle).
    clk: Clk,
    /// The frequency table's entries, in kHz.
    khz: KVec<u64>,
}

struct CpufreqDt;

impl cpufreq::Driver for CpufreqDt {
    type Data = CpuData;

    fn init(policy: &mut Policy) -> Result<PolicySetup<CpuData>> {
        let cpu_dev = policy.cpu_device()?;
        policy.share_opp_cpus(&cpu_dev)?;
        let opp = opp::Table::from_of_policy(policy)?;
        let mut khz = KVec::new();
        for f in opp.freqs()? {
            khz.push(f.as_khz(), GFP_KERNEL)?;
        }
        let freq_table = FreqTable::new(&khz)?;
        let latency = u32::try_from(opp.max_transition_latency_ns()).ok();
        policy.set_transition_latency_ns(latency.filter(|&ns| ns > 0));
        let clk = Clk::get(&cpu_dev, None)?;
        dev_info!(
            &*cpu_dev,
            "rcpufreq-dt: init policy cpu{} cpus={} opps={:?} kHz clock={} Hz\n",
            policy.cpu(),
            policy.cpus().weight(),
            &khz[..],
            clk.rate().as_hz()
        );
        Ok(PolicySetup {
            freq_table,
            clk: Clk::get(&cpu_dev, None)?,
            data: CpuData {
                cpu_dev,
                opp,
                clk,
                khz,
            },
        })
    }

    fn target_index(policy: &Policy, data: &CpuData, index: usize) -> Result {
        let khz = *data.khz.get(index).ok_or(EINVAL)?;
        data.opp.set_rate(Hertz::from_khz(khz))?;
        dev_info!(
            &*data.cpu_dev,
            "rcpufreq-dt: target_index policy cpu{} index={} freq={} kHz clock={} Hz\n",
            policy.cpu(),
            index,
            khz,
            data.clk.rate().as_hz()
        );
        Ok(())
    }

    fn exit(policy: &Policy, data: CpuData) {
        dev_info!(
            &*data.cpu_dev,
            "rcpufreq-dt: exit policy cpu{}\n",
            policy.cpu()
        );
    }
}

kernel::of_device_table!(
    IDS,
    (),
    [(of::DeviceId::new(c_str!("pci-rig,cpufreq-dt")), ())]
);

struct RcpufreqDt;

impl platform::Driver for RcpufreqDt {
    type IdInfo = ();
    const OF_ID_TABLE: of::IdTable<()> = IDS;
    type Data = Pin<KBox<Registration<cpufreq::Adapter<CpufreqDt>>>>;

    fn probe(pdev: &platform::Device<platform::Core>, _info: &()) -> Result<Self::Data> {
        let reg = KBox::pin_init(
            Registration::new(c_str!("rcpufreq-dt"), &THIS_MODULE),
            GFP_KERNEL,
        )?;
        dev_info!(pdev, "rcpufreq-dt: registered\n");
        Ok(reg)
    }

    fn remove(pdev: &platform::Device<platform::Core>, _reg: &Self::Data) {
        dev_info!(pdev, "rcpufreq-dt: unregistering\n");
    }
}

kernel::module_platform_driver! {
    type: RcpufreqDt,
    name: "rcpufreq_dt",
    author: "pci-rig",
    description: "Generic device-tree cpufreq driver, in Rust",
    license: "GPL",
}
