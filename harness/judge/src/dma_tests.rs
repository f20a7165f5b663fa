use super::*;
use crate::device_log::test_access;
use crate::{accounting, driver};
use std::os::unix::process::ExitStatusExt;

const DEV: &str = "pci_rig 0000:01:00.0: ";

/// One binding: a coherent buffer, a DMA to the device and one back, then remove().
const CLEAN: &[&str] = &[
    "event probe_begin",
    "# dma map 1 coherent 0x1000 0x1000",
    "# dma start to_device 0x1000 0x10 0xabc",
    "# mmio w bar0 0x10 4 0x4",
    "# dma start from_device 0x1040 0x10 -",
    "# mmio w bar0 0x10 4 0x5",
    "# dma received 0x1040 0x10 0xdef",
    "step dma_from_device ok",
    "event probe_done",
    "event remove_begin",
    "# mmio w bar0 0x50 4 0x1",
    "event remove_done",
    "# dma unmap 1",
    "event worker_stopped reason=Refused accesses=0",
];

fn lines(driver: &[&str], user: &[&str]) -> Vec<String> {
    driver
        .iter()
        .map(|l| format!("{DEV}{l}"))
        .chain(user.iter().map(|l| l.to_string()))
        .collect()
}

fn dma(seq: u64, iova: u64, dir: DmaDirection, crc: u32) -> DmaEvent {
    DmaEvent::Dma {
        seq,
        before: seq,
        waited: false,
        time_ns: seq,
        iova,
        len: 0x10,
        dir,
        crc_only: false,
        outcome: DmaOutcome::Ok,
        crc: Some(crc),
    }
}

/// The device's side of `CLEAN`: bus mastering on (config write #1), the two doorbells
/// (#2, #3), RESET (#4).
fn device(command: u64, events: Vec<DmaEvent>, user_doorbell: bool) -> Vec<Stopped> {
    let mut log = vec![
        test_access(1, "config", 4, 2, command, "write"),
        test_access(2, "bar0", 0x10, 4, 4, "write"),
        test_access(3, "bar0", 0x10, 4, 5, "write"),
        test_access(4, "bar0", 0x50, 4, 1, "write"),
    ];
    if user_doorbell {
        log.push(test_access(5, "bar0", 0x10, 4, 5, "write"));
    }
    vec![Stopped {
        died: None,
        status: std::process::ExitStatus::from_raw(0),
        log,
        dma: events,
    }]
}

fn events() -> Vec<DmaEvent> {
    vec![
        dma(2, 0x1000, DmaDirection::ToDevice, 0xabc),
        dma(3, 0x1040, DmaDirection::FromDevice, 0xdef),
    ]
}

fn judged(lines: &[String], device: &[Stopped]) -> Result<DmaFindings, String> {
    let history = driver::history(lines)?;
    let logs: Vec<&[Access]> = device.iter().map(|d| &d.log[..]).collect();
    let n = accounting::account(&history, &logs)?;
    check(&history, &n, device, false)
}

fn edited(f: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let driver: Vec<String> = CLEAN
        .iter()
        .filter_map(|l| f(l).or(Some(l.to_string())).filter(|l| !l.is_empty()))
        .collect();
    let driver: Vec<&str> = driver.iter().map(|s| s.as_str()).collect();
    lines(&driver, &[])
}

#[test]
fn a_clean_binding_passes_and_is_counted() {
    let f = judged(&lines(CLEAN, &[]), &device(0x6, events(), false)).unwrap();
    assert_eq!(
        f,
        DmaFindings {
            mappings: 1,
            moved: 2,
            refused: 0,
            bytes: 0x20,
            witnessed: 0,
            delayed: 0
        }
    );
    assert!(f.summary().contains("2 DMAs (32 bytes)"), "{}", f.summary());
}

/// `CLEAN`'s DMA from the device (doorbell #3) run late, on the device's clock, while
/// remove()'s RESET (#4) waited for it.
fn delayed() -> Vec<DmaEvent> {
    let mut e = events();
    e[1] = DmaEvent::Dma {
        seq: 3,
        before: 4,
        waited: true,
        time_ns: 4,
        iova: 0x1040,
        len: 0x10,
        dir: DmaDirection::FromDevice,
        crc_only: false,
        outcome: DmaOutcome::Ok,
        crc: Some(0xdef),
    };
    e
}

#[test]
fn a_late_dma_must_find_its_mapping_still_live() {
    // Clean: remove() resets (the DMA finishes first), then frees the buffer.
    let f = judged(&lines(CLEAN, &[]), &device(0x6, delayed(), false)).unwrap();
    assert_eq!(f.delayed, 1);
    assert!(
        f.summary()
            .contains("1 of them run on the device's own clock"),
        "{}",
        f.summary()
    );
    // The buffer freed before the reset: the DMA, which the RESET write waited for, ran into it.
    let free_first: Vec<String> = {
        let mut l = lines(CLEAN, &[]);
        let unmap = l.iter().position(|l| l.ends_with("# dma unmap 1")).unwrap();
        let line = l.remove(unmap);
        let reset = l
            .iter()
            .position(|l| l.ends_with("# mmio w bar0 0x50 4 0x1"))
            .unwrap();
        l.insert(reset, line);
        l
    };
    let e = judged(&free_first, &device(0x6, delayed(), false)).unwrap_err();
    assert!(
        e.contains("binding 1: the device's DMA #3 (0x1040+0x10) ran after the driver ended mapping 1: its `# dma unmap 1` came before the driver's access #4, and the DMA ran while that write waited for it"),
        "{e}"
    );
    // Run at its doorbell instead, the same order leaves no trace: what the delay is for.
    assert!(judged(&free_first, &device(0x6, events(), false)).is_ok());
    // A DMA run by the clock before the access after the unmap line is ambiguous: it passes.
    let mut e = delayed();
    if let DmaEvent::Dma { waited, .. } = &mut e[1] {
        *waited = false;
    }
    assert!(judged(&free_first, &device(0x6, e, false)).is_ok());
}

#[test]
fn a_dma_outside_every_live_mapping_fails() {
    let mut e = events();
    e[0] = dma(2, 0x2000, DmaDirection::ToDevice, 0xabc);
    let lie = edited(|l| {
        (l == "# dma start to_device 0x1000 0x10 0xabc")
            .then(|| "# dma start to_device 0x2000 0x10 0xabc".into())
    });
    let err = judged(&lie, &device(0x6, e, false)).unwrap_err();
    assert!(err.contains("fell outside every mapping"), "{err}");
}

#[test]
fn a_dma_after_its_mapping_ended_fails() {
    // The driver unmapped before its second DMA.
    let mut l: Vec<&str> = CLEAN.to_vec();
    l.retain(|l| *l != "# dma unmap 1");
    l.insert(4, "# dma unmap 1");
    let err = judged(&lines(&l, &[]), &device(0x6, events(), false)).unwrap_err();
    assert!(
        err.contains("none: unmapped, freed, or its binding had ended"),
        "{err}"
    );
}

#[test]
fn data_other_than_the_drivers_fails_both_ways() {
    let mut e = events();
    e[0] = dma(2, 0x1000, DmaDirection::ToDevice, 0x123);
    let err = judged(&lines(CLEAN, &[]), &device(0x6, e, false)).unwrap_err();
    assert!(
        err.contains("read bytes of CRC 0x123, the driver put bytes of CRC 0xabc"),
        "{err}"
    );
    let lie = edited(|l| {
        l.starts_with("# dma received")
            .then(|| "# dma received 0x1040 0x10 0x999".into())
    });
    let err = judged(&lie, &device(0x6, events(), false)).unwrap_err();
    assert!(err.contains("received CRC 0x999"), "{err}");
    let silent = edited(|l| l.starts_with("# dma received").then(String::new));
    let err = judged(&silent, &device(0x6, events(), false)).unwrap_err();
    assert!(err.contains("never said what it received"), "{err}");
}

#[test]
fn a_dma_with_bus_mastering_off_fails() {
    let err = judged(&lines(CLEAN, &[]), &device(0x2, events(), false)).unwrap_err();
    assert!(err.contains("bus mastering off"), "{err}");
}

#[test]
fn a_dma_against_its_mappings_direction_fails() {
    let lie = edited(|l| {
        l.starts_with("# dma map")
            .then(|| "# dma map 1 to_device 0x1000 0x1000".into())
    });
    let err = judged(&lie, &device(0x6, events(), false)).unwrap_err();
    assert!(err.contains("against its mapping's direction"), "{err}");
}

#[test]
fn user_space_making_the_device_dma_after_the_binding_ended_fails() {
    let mut e = events();
    e.push(dma(5, 0x1040, DmaDirection::FromDevice, 0xdef));
    let l = lines(CLEAN, &["# mmio w bar0 0x10 4 0x5"]);
    let err = judged(&l, &device(0x6, e, true)).unwrap_err();
    assert!(err.contains("user space: the device's DMA #5"), "{err}");
    assert!(err.contains("binding had ended"), "{err}");
}

#[test]
fn a_dma_nobody_started_or_unannounced_fails() {
    let mut e = events();
    e.push(dma(4, 0x1000, DmaDirection::ToDevice, 0xabc));
    let err = judged(&lines(CLEAN, &[]), &device(0x6, e, false)).unwrap_err();
    assert!(
        err.contains("the device made 3 DMAs, 2 of them started by a reported doorbell"),
        "{err}"
    );
    let unannounced = edited(|l| l.starts_with("# dma start to_device").then(String::new));
    let err = judged(&unannounced, &device(0x6, events(), false)).unwrap_err();
    assert!(err.contains("without a `# dma start` line"), "{err}");
}

#[test]
fn refused_dmas_are_counted_and_malformed_lines_fail() {
    let mut e = events();
    e[0] = DmaEvent::Dma {
        seq: 2,
        before: 2,
        waited: false,
        time_ns: 2,
        iova: 0x1000,
        len: 0x10,
        dir: DmaDirection::ToDevice,
        crc_only: false,
        outcome: DmaOutcome::NoBusMaster,
        crc: None,
    };
    let f = judged(&lines(CLEAN, &[]), &device(0x6, e, false)).unwrap();
    assert_eq!((f.moved, f.refused), (1, 1));
    let broken = edited(|l| {
        l.starts_with("# dma map")
            .then(|| "# dma map 1 sideways 0x1000 0x1000".into())
    });
    let err = judged(&broken, &device(0x6, events(), false)).unwrap_err();
    assert!(err.contains("a malformed DMA line"), "{err}");
    assert_eq!(parse("# mmio r bar0 0x0 4 0x0"), None);
    assert_eq!(
        parse("# dma start crc32 0x10 0x20 0x30"),
        Some(Ok(Line::Start {
            op: Op::Crc32,
            iova: 0x10,
            len: 0x20,
            crc: Some(0x30)
        }))
    );
}

#[test]
fn a_dma_the_iommus_permissions_refused_fails() {
    let mut e = events();
    let DmaEvent::Dma { outcome, crc, .. } = &mut e[0] else {
        panic!("events() starts with a DMA")
    };
    (*outcome, *crc) = (DmaOutcome::Denied, None);
    let err = judged(&lines(CLEAN, &[]), &device(0x6, e, false)).unwrap_err();
    assert!(err.contains("the IOMMU's permissions refused it"), "{err}");
}

#[test]
fn a_dma_that_faults_inside_a_mapping_live_at_its_doorbell_fails() {
    let faulted = |iova: u64| {
        let mut e = events();
        let DmaEvent::Dma {
            outcome,
            crc,
            iova: at,
            ..
        } = &mut e[0]
        else {
            panic!("events() starts with a DMA")
        };
        (*outcome, *crc, *at) = (DmaOutcome::Fault, None, iova);
        e
    };
    // Behind an IOMMU: the range was unmapped between the doorbell and the DMA.
    let err = judged(&lines(CLEAN, &[]), &device(0x6, faulted(0x1000), false)).unwrap_err();
    assert!(
        err.contains("found its range unmapped when it ran")
            && err.contains("gave the buffer back before the device was done"),
        "{err}"
    );
    // A fault outside every mapping is the device refusing a wild address: counted. (The
    // doorbell's announced address is that of the start line, so only the event moves.)
    let wild = edited(|l| {
        l.starts_with("# dma start to_device")
            .then(|| l.replacen("0x1000", "0x80000000", 1))
    });
    let f = judged(&wild, &device(0x6, faulted(0x8000_0000), false)).unwrap();
    assert_eq!(f.refused, 1);
}

fn map(seq: u64, iova: u64, size: u64) -> DmaEvent {
    DmaEvent::Map {
        seq,
        iova,
        size,
        memory: true,
        allowed: Default::default(),
    }
}

fn judged_iommu(lines: &[String], device: &[Stopped]) -> Result<DmaFindings, String> {
    let history = driver::history(lines)?;
    let logs: Vec<&[Access]> = device.iter().map(|d| &d.log[..]).collect();
    let n = accounting::account(&history, &logs)?;
    check(&history, &n, device, true)
}

#[test]
fn behind_an_iommu_the_devices_maps_must_witness_the_drivers() {
    // Mapping 2 lives between the two doorbells: mapped before #3, unmapped before #4.
    let mut l: Vec<&str> = CLEAN.to_vec();
    l.insert(4, "# dma map 2 to_device 0x9000 0x200");
    l.insert(9, "# dma unmap 2");
    let lines = lines(&l, &[]);
    let with = |extra: Vec<DmaEvent>| {
        let mut e = vec![map(1, 0x1000, 0x1000)];
        e.extend(extra);
        e.extend(events());
        // Mapping 1 ends with the binding: QEMU unmaps it then.
        e.push(unmap(99, 0x1000));
        device(0x6, e, false)
    };
    let f = judged_iommu(
        &lines,
        &with(vec![map(3, 0x9000, 0x1000), unmap(4, 0x9000)]),
    )
    .unwrap();
    assert_eq!(f.witnessed, 2);
    assert!(
        f.summary().contains("each of the driver's 2 mappings"),
        "{}",
        f.summary()
    );
    // QEMU never mapped mapping 2: the guest's IOMMU does not agree with the driver.
    let e = judged_iommu(&lines, &with(vec![])).unwrap_err();
    assert!(
        e.contains("reported DMA mapping 2 at 0x9000+0x200, but QEMU had not mapped"),
        "{e}"
    );
    // Mapping 2 was never unmapped: the device could still reach it.
    let e = judged_iommu(&lines, &with(vec![map(3, 0x9000, 0x1000)])).unwrap_err();
    assert!(
        e.contains("mapping 2 (0x9000+0x200) ended after device access #3, but QEMU never unmapped it for the device after that (the device could reach it to the end of its log)"),
        "{e}"
    );
    // An unmap that reaches the device after the driver's next report (made by another
    // context while the free was under way) is still its unmap.
    let late = judged_iommu(
        &lines,
        &with(vec![map(3, 0x9000, 0x1000), unmap(5, 0x9000)]),
    );
    assert_eq!(late.map(|f| f.witnessed), Ok(2));
    // Without an IOMMU nothing is asked of the device's maps.
    assert_eq!(judged(&lines, &with(vec![])).unwrap().witnessed, 0);
    let grouped = |who: &str| {
        vec![
            format!("<6>[    0.4] {who}: Adding to iommu group 3"),
            "<6>[    1.1] pci_rig 0000:01:00.0: event probe_begin".to_string(),
        ]
    };
    assert!(
        behind_iommu(&grouped("pci 0000:01:00.0")),
        "x86_64: at enumeration"
    );
    assert!(
        behind_iommu(&grouped("pci_rig 0000:01:00.0")),
        "arm64: at probe"
    );
    assert!(
        !behind_iommu(&grouped("pcieport 0000:00:01.0")),
        "another device's group"
    );
}

fn unmap(seq: u64, iova: u64) -> DmaEvent {
    DmaEvent::Unmap {
        seq,
        iova,
        size: 0x1000,
        windows: 1,
    }
}
