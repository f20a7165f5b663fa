//! Judging the `platform` and `cpufreq` scenarios from the kernel's lines (the device trees
//! they boot with are the rig's, `guest/dt.rs`; what they add is `vocab::devicetree`).

use vocab::devicetree::*;

/// The lines of `text` (console lines without printk stamps) that contain
/// `needle`.
fn with<'a>(text: &'a [&'a str], needle: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    text.iter().copied().filter(move |l| l.contains(needle))
}

/// Judges `platform` from the kernel's lines: the driver probed the demo
/// node twice and was removed twice, in turn, each time reading the magic
/// value through its mapping, and never refused the node.
pub fn judge_platform(text: &[&str]) -> Result<String, String> {
    if let Some(l) = with(text, "event probe_refused").next() {
        return Err(format!("pcirig_platform refused the demo node: `{l}`"));
    }
    let events: Vec<&str> = text
        .iter()
        .copied()
        .filter(|l| l.starts_with("pcirig_platform ") && l.contains(": event "))
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|l| l.split(": event ").nth(1)?.split(' ').next())
        .collect();
    if kinds != ["probe", "remove", "probe", "remove"] {
        return Err(format!(
            "pcirig_platform's events were {kinds:?}, not probe, remove (unbind), probe (bind), remove (rmmod)"
        ));
    }
    let magic = format!("magic={DEMO_MAGIC}");
    if let Some(l) = events.iter().find(|l| !l.contains(&magic)) {
        return Err(format!(
            "pcirig_platform did not read the demo node's magic {DEMO_MAGIC} through its mapping: `{l}`"
        ));
    }
    let at = window(text)?;
    if let Some(l) = events
        .iter()
        .filter(|l| l.contains(": event probe "))
        .find(|l| !l.contains(&format!(" at={at:#x}")))
    {
        return Err(format!(
            "pcirig_platform says it mapped another address than the node's window at {at:#x}: `{l}`"
        ));
    }
    Ok(format!(
        ", pcirig_platform: probe/remove twice, magic read through Devres<IoMem> each time, at the node's window {at:#x} (its name and /proc/iomem say so)"
    ))
}

/// What pcirig_platform's events say it read through its mapping, in
/// order, as (offset, value): probe reads MagicValue, Version, DeviceID and
/// VendorID (0x0, 0x4, 0x8, 0xc) and prints them; remove reads MagicValue.
pub fn platform_reads(text: &[&str]) -> Result<Vec<(u64, u64)>, String> {
    let mut reads = Vec::new();
    for l in text.iter().filter(|l| l.starts_with("pcirig_platform ")) {
        let Some(event) = l.split(": event ").nth(1) else {
            continue;
        };
        let field = |name: &str| -> Result<u64, String> {
            let v = event
                .split(' ')
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                .ok_or_else(|| format!("no {name}= in `{l}`"))?;
            match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            }
            .map_err(|_| format!("{name}={v} is not a number in `{l}`"))
        };
        match event.split(' ').next() {
            Some("probe") => {
                for (offset, name) in [
                    (0, "magic"),
                    (4, "version"),
                    (8, "device_id"),
                    (0xc, "vendor"),
                ] {
                    reads.push((offset, field(name)?));
                }
            }
            Some("remove") => reads.push((0, field("magic")?)),
            _ => {}
        }
    }
    Ok(reads)
}

/// The demo node's window, as the kernel tells it (not the driver): the
/// guest prints the node's device name, whose unit address is its `reg`,
/// and the driver's /proc/iomem line (`pcirig: platform node NAME iomem
/// START-END : pcirig_platform`), whose start must be the same.
pub fn window(text: &[&str]) -> Result<u64, String> {
    let line = text
        .iter()
        .find_map(|l| l.strip_prefix("pcirig: platform node "))
        .ok_or("the guest never printed the node's name and /proc/iomem line")?;
    let (node, iomem) = line
        .split_once(" iomem ")
        .ok_or_else(|| format!("no iomem part in `{line}`"))?;
    let hex = |s: &str| u64::from_str_radix(s.trim(), 16).ok();
    let reg = node
        .split_once('.')
        .and_then(|(unit, _)| hex(unit))
        .ok_or_else(|| format!("the node's name `{node}` has no unit address"))?;
    let start = iomem
        .split_once('-')
        .and_then(|(start, _)| hex(start))
        .ok_or_else(|| format!("not a /proc/iomem range: `{iomem}`"))?;
    if start != reg {
        return Err(format!(
            "/proc/iomem has pcirig_platform's region at {start:#x}, not at the node's reg {reg:#x}: `{iomem}`"
        ));
    }
    Ok(reg)
}

/// Judges `cpufreq` from the kernel's lines: the driver's policy covers
/// every CPU with the OPP table's frequencies, each frequency the guest set
/// reached `target_index` and the clock (as the driver read it back and as
/// the clock provider logged the change), and rmmod ended the policy and
/// unregistered the driver.
pub fn judge_cpufreq(text: &[&str]) -> Result<String, String> {
    let list = OPP_KHZ
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let init = format!("opps=[{list}] kHz");
    let Some(init_line) = with(text, "rcpufreq-dt: init policy").next() else {
        return Err(
            "rcpufreq-dt never set a policy up (no `rcpufreq-dt: init policy` line)".into(),
        );
    };
    if !init_line.contains(&init) {
        return Err(format!(
            "rcpufreq-dt's policy does not list the OPP table ({init}): `{init_line}`"
        ));
    }
    if with(text, "rcpufreq-dt: init policy").count() != 1 || !init_line.contains("cpus=2") {
        return Err(format!(
            "rcpufreq-dt should set up one policy for both CPUs (opp-shared): `{init_line}`"
        ));
    }
    for khz in OPP_KHZ {
        let hz = khz * 1000;
        let target = format!("freq={khz} kHz clock={hz} Hz");
        if !with(text, "rcpufreq-dt: target_index").any(|l| l.contains(&target)) {
            return Err(format!(
                "no `rcpufreq-dt: target_index … {target}` line: {khz} kHz never reached the clock through the driver"
            ));
        }
        let provider = format!("-> {hz} Hz");
        if !with(text, "pcirig-virt-clk").any(|l| l.contains(&provider)) {
            return Err(format!(
                "the clock provider never logged a change to {hz} Hz"
            ));
        }
    }
    let exit = with(text, "rcpufreq-dt: exit policy").count();
    let unreg = with(text, "rcpufreq-dt: unregistering").count();
    if exit != 1 || unreg != 1 {
        return Err(format!(
            "rmmod should unregister once and end the policy once; saw {unreg} unregistering and {exit} exit line(s)"
        ));
    }
    Ok(format!(
        ", rcpufreq-dt: one policy over 2 CPUs, {} frequencies each set through target_index and seen on the clock",
        OPP_KHZ.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drivers_reads_come_from_its_event_lines() {
        let text = [
            "pcirig_platform a000000.virtio_mmio: event probe magic=0x74726976 version=2 device_id=0 vendor=0x554d4551 at=0xa000000",
            "pcirig: something else",
            "pcirig_platform a000000.virtio_mmio: event remove magic=0x74726976",
        ];
        assert_eq!(
            platform_reads(&text),
            Ok(vec![
                (0, 0x7472_6976),
                (4, 2),
                (8, 0),
                (0xc, 0x554d_4551),
                (0, 0x7472_6976)
            ])
        );
        let bad = ["pcirig_platform a000000.virtio_mmio: event probe magic=0x74726976 version=two"];
        assert!(platform_reads(&bad)
            .unwrap_err()
            .contains("version=two is not a number"));
    }

    const PLATFORM: &[&str] = &[
        "pcirig_platform a000000.virtio_mmio: event probe magic=0x74726976 version=2 device_id=0 vendor=0x554d4551 at=0xa000000",
        "pcirig_platform a000000.virtio_mmio: event remove magic=0x74726976",
        "pcirig_platform a000000.virtio_mmio: event probe magic=0x74726976 version=2 device_id=0 vendor=0x554d4551 at=0xa000000",
        "pcirig_platform a000000.virtio_mmio: event remove magic=0x74726976",
        "pcirig: platform node a000000.virtio_mmio iomem   0a000000-0a0001ff : pcirig_platform",
    ];

    #[test]
    fn the_window_is_the_nodes_by_the_kernels_account() {
        assert!(judge_platform(PLATFORM)
            .unwrap()
            .contains("window 0xa000000"));
        // The driver maps (or says it maps) another window.
        let elsewhere: Vec<String> = PLATFORM
            .iter()
            .map(|l| l.replace("at=0xa000000", "at=0xa000200"))
            .collect();
        let elsewhere: Vec<&str> = elsewhere.iter().map(String::as_str).collect();
        let e = judge_platform(&elsewhere).unwrap_err();
        assert!(
            e.contains("another address than the node's window at 0xa000000"),
            "{e}"
        );
        // /proc/iomem holds the region elsewhere than the node's reg.
        let mut moved = PLATFORM.to_vec();
        moved[4] =
            "pcirig: platform node a000000.virtio_mmio iomem   0a000200-0a0003ff : pcirig_platform";
        let e = judge_platform(&moved).unwrap_err();
        assert!(
            e.contains("at 0xa000200, not at the node's reg 0xa000000"),
            "{e}"
        );
        // Nothing printed: no account but the driver's.
        let e = judge_platform(&PLATFORM[..4]).unwrap_err();
        assert!(e.contains("never printed the node's name"), "{e}");
    }

    #[test]
    fn platform_needs_two_bindings_in_turn_each_reading_the_magic() {
        assert!(judge_platform(PLATFORM).is_ok());
        let e = judge_platform(&PLATFORM[..3]).unwrap_err();
        assert!(e.contains("[\"probe\", \"remove\", \"probe\"]"), "{e}");
        let swapped = [
            PLATFORM[0],
            PLATFORM[2],
            PLATFORM[1],
            PLATFORM[3],
            PLATFORM[4],
        ];
        assert!(judge_platform(&swapped).is_err());
        let bad = "pcirig_platform a000000.virtio_mmio: event remove magic=0x0";
        let e =
            judge_platform(&[PLATFORM[0], bad, PLATFORM[2], PLATFORM[3], PLATFORM[4]]).unwrap_err();
        assert!(e.contains("did not read the demo node's magic"), "{e}");
        let refused = "pcirig_platform a000000.virtio_mmio: event probe_refused magic=0x0 expected=0x74726976";
        let e = judge_platform(&[
            refused,
            PLATFORM[0],
            PLATFORM[1],
            PLATFORM[2],
            PLATFORM[3],
            PLATFORM[4],
        ])
        .unwrap_err();
        assert!(e.contains("refused the demo node"), "{e}");
    }

    fn cpufreq_lines() -> Vec<String> {
        let mut v = vec![
            "pcirig-virt-clk pcirig-cpu-clock: pcirig-cpu at 1000000000 Hz, settable within [125000000, 2000000000]".to_string(),
            "rcpufreq_dt pcirig-cpufreq: rcpufreq-dt: registered".into(),
            "cpu cpu0: rcpufreq-dt: init policy cpu0 cpus=2 opps=[250000, 500000, 750000, 1000000] kHz clock=1000000000 Hz".into(),
        ];
        let mut from = 1_000_000_000;
        for (i, khz) in OPP_KHZ.iter().enumerate() {
            let hz = khz * 1000;
            v.push(format!(
                "pcirig-virt-clk pcirig-cpu-clock: rate {from} -> {hz} Hz"
            ));
            v.push(format!("cpu cpu0: rcpufreq-dt: target_index policy cpu0 index={i} freq={khz} kHz clock={hz} Hz"));
            from = hz;
        }
        v.push("rcpufreq_dt pcirig-cpufreq: rcpufreq-dt: unregistering".into());
        v.push("cpu cpu0: rcpufreq-dt: exit policy cpu0".into());
        v
    }

    fn judge_lines(v: &[String]) -> Result<String, String> {
        let t: Vec<&str> = v.iter().map(String::as_str).collect();
        judge_cpufreq(&t)
    }

    #[test]
    fn cpufreq_needs_every_frequency_on_the_clock_and_a_clean_unregister() {
        let good = cpufreq_lines();
        assert!(judge_lines(&good).is_ok(), "{:?}", judge_lines(&good));
        // A frequency that never reached the clock.
        let v: Vec<String> = good
            .iter()
            .map(|l| {
                l.replace(
                    "freq=500000 kHz clock=500000000 Hz",
                    "freq=500000 kHz clock=1000000000 Hz",
                )
            })
            .collect();
        let e = judge_lines(&v).unwrap_err();
        assert!(e.contains("500000 kHz never reached the clock"), "{e}");
        // The provider did not log it.
        let v: Vec<String> = good
            .iter()
            .filter(|l| !l.ends_with("-> 750000000 Hz"))
            .cloned()
            .collect();
        assert!(judge_lines(&v)
            .unwrap_err()
            .contains("never logged a change to 750000000 Hz"));
        // A table other than the DT's.
        let v: Vec<String> = good
            .iter()
            .map(|l| l.replace("opps=[250000, ", "opps=["))
            .collect();
        assert!(judge_lines(&v)
            .unwrap_err()
            .contains("does not list the OPP table"));
        // One policy per CPU instead of a shared one.
        let v: Vec<String> = good.iter().map(|l| l.replace("cpus=2", "cpus=1")).collect();
        assert!(judge_lines(&v)
            .unwrap_err()
            .contains("one policy for both CPUs"));
        // rmmod did not end the policy.
        let v: Vec<String> = good
            .iter()
            .filter(|l| !l.contains("exit policy"))
            .cloned()
            .collect();
        assert!(judge_lines(&v).unwrap_err().contains("0 exit line(s)"));
    }
}
