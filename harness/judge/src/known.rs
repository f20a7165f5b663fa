//! Reports Linux itself makes on paths our scenarios must take, which no
//! code of ours can avoid. Each is judged apart: allowed only on the
//! machine that takes that path, only in its exact shape (every needle
//! within the report's excerpt), and named in the verdict; any other
//! report still fails the boot.

use crate::console::Splat;
use vocab::scenario::{Machine, Scenario, Slot};

pub struct KnownFinding {
    pub name: &'static str,
    pub splat: Splat,
    /// All of them must be in the report's excerpt, in any order.
    pub needles: &'static [&'static str],
    /// None of them may be.
    pub absent: &'static [&'static str],
    /// The hotplug slot whose removal path makes the report: our device's or a stock one's.
    pub slot: Slot,
}

/// pciehp's unplug path holds its controller's `reset_lock` (pciehp_ist)
/// and `pci_rescan_remove_lock` (pciehp_unconfigure_device) in an order
/// lockdep finds inverted elsewhere in pciehp: it reports the two-lock
/// cycle on the first hot-unplug of a debug kernel, from whichever side it
/// saw first (x86_64: acquiring `reset_lock` while holding the rescan lock;
/// arm64 and riscv64: the other way round, where the acquiring frame is
/// `pci_lock_rescan_remove` or, inlined, `pciehp_unconfigure_device`), in
/// pciehp's interrupt thread, and then switches itself off for the
/// rest of the boot. Linux 7.3 makes the same report (x86_64's debug
/// kernel, `mainline-unplug`: upstream's sample on a pci-testdev pciehp
/// unplugs). The ACPI hot-unplug scenarios on x86_64, and unbind,
/// rebind and modules everywhere, keep lockdep on over our code.
pub const KNOWN_FINDINGS: &[KnownFinding] = &[KnownFinding {
    name: "Linux's pciehp lockdep report (the cycle of ctrl->reset_lock and pci_rescan_remove_lock in pciehp's interrupt thread; 6.12 and 7.3)",
    splat: Splat::Lockdep,
    needles: &[
        "WARNING: possible circular locking dependency detected",
        "-pciehp/",
        "is trying to acquire lock:",
        "but task is already holding lock:",
        "(&ctrl->reset_lock)",
        "(pci_rescan_remove_lock)",
    ],
    // A longer cycle through these two locks is another report.
    absent: &["-> #2"],
    slot: Slot::Pciehp,
}];

/// The known finding that `kind`'s report (its `excerpt`) is, in `s`.
pub fn known(s: &Scenario, kind: Splat, excerpt: &str) -> Option<&'static KnownFinding> {
    KNOWN_FINDINGS.iter().find(|k| {
        let slot = match s.machine {
            Machine::Hotplug(slot) | Machine::StockHotplug(slot) | Machine::Module(Some(slot)) => {
                Some(slot)
            }
            _ => None,
        };
        k.splat == kind
            && slot == Some(k.slot)
            && k.needles.iter().all(|n| excerpt.contains(n))
            && !k.absent.iter().any(|n| excerpt.contains(n))
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::console::{classify, excerpt};
    use vocab::scenario::{HOTUNPLUG, HOTUNPLUG_ACPI, MAINLINE_UNPLUG, UNBIND};

    /// The start of the report as x86_64's irq-unbind printed it.
    pub(crate) const PCIEHP_REPORT: &[&str] = &[
        "<4>[   26.376986] ======================================================",
        "<4>[   26.377243] WARNING: possible circular locking dependency detected",
        "<4>[   26.377716] 6.12.118 #2 Tainted: G           O      ",
        "<4>[   26.377942] ------------------------------------------------------",
        "<4>[   26.378067] irq/24-pciehp/34 is trying to acquire lock:",
        "<4>[   26.381624] ffff8880005a9f00 (&ctrl->reset_lock){.+.+}-{3:3}, at: pciehp_unconfigure_device+0x7f/0xda",
        "<4>[   26.385169] ",
        "<4>[   26.385169] but task is already holding lock:",
        "<4>[   26.385363] ffffffff81af2548 (pci_rescan_remove_lock){+.+.}-{3:3}, at: pciehp_unconfigure_device+0x3e/0xda",
    ];

    /// The same cycle seen from the other side, as riscv64's surprise printed it.
    const PCIEHP_REPORT_REVERSED: &[&str] = &[
        "<4>[   82.551165] ======================================================",
        "<4>[   82.552705] WARNING: possible circular locking dependency detected",
        "<4>[   82.557418] 6.12.118 #2 Tainted: G           O      ",
        "<4>[   82.560611] ------------------------------------------------------",
        "<4>[   82.560919] irq/12-pciehp/38 is trying to acquire lock:",
        "<4>[   82.561260] ffffffff80b1bc28 (pci_rescan_remove_lock){+.+.}-{3:3}, at: pciehp_unconfigure_device+0xb2/0x1fe",
        "<4>[   82.574151] ",
        "<4>[   82.574151] but task is already holding lock:",
        "<4>[   82.574513] ff600000039d7300 (&ctrl->reset_lock){.+.+}-{3:3}, at: pciehp_ist+0x11e/0x268",
    ];

    /// And as arm64's surprise printed it (the lock taken in a frame of its own).
    const PCIEHP_REPORT_ARM64: &[&str] = &[
        "<4>[   22.630163] ======================================================",
        "<4>[   22.633605] WARNING: possible circular locking dependency detected",
        "<4>[   22.634774] 6.12.118 #2 Tainted: G           O      ",
        "<4>[   22.635304] ------------------------------------------------------",
        "<4>[   22.638894] irq/15-pciehp/37 is trying to acquire lock:",
        "<4>[   22.640229] ffff800080bf2108 (pci_rescan_remove_lock){+.+.}-{3:3}, at: pci_lock_rescan_remove+0x18/0x20",
        "<4>[   22.653680] ",
        "<4>[   22.653680] but task is already holding lock:",
        "<4>[   22.656009] ffff0000052ab300 (&ctrl->reset_lock){.+.+}-{3:3}, at: pciehp_ist+0x12c/0x28c",
    ];

    fn report(lines: &[&str]) -> (Splat, String) {
        let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let at = lines.iter().position(|l| classify(l).is_some()).unwrap();
        (classify(&lines[at]).unwrap(), excerpt(&lines, at))
    }

    #[test]
    fn the_pciehp_report_is_known_only_in_its_shape_and_on_its_machine() {
        for shape in [PCIEHP_REPORT, PCIEHP_REPORT_REVERSED, PCIEHP_REPORT_ARM64] {
            let (kind, ex) = report(shape);
            assert!(known(&HOTUNPLUG, kind, &ex).is_some());
        }
        let (kind, ex) = report(PCIEHP_REPORT);
        // A longer cycle through the same two locks is another report.
        let longer = format!("{ex}\n-> #2 (&dev->mutex){{+.+.}}-{{3:3}}:");
        assert!(known(&HOTUNPLUG, kind, &longer).is_none());
        // Also where pciehp unplugs a stock device (upstream's sample on pci-testdev).
        assert!(known(&MAINLINE_UNPLUG, kind, &ex).is_some());
        // Not where pciehp does not unplug.
        assert!(known(&HOTUNPLUG_ACPI, kind, &ex).is_none());
        assert!(known(&UNBIND, kind, &ex).is_none());
        // Another lock pair, or another task, is another report.
        for (from, to) in [
            ("(&ctrl->reset_lock)", "(&dev->mutex)"),
            ("(pci_rescan_remove_lock)", "(&pci_rig_lock)"),
            ("irq/24-pciehp/34", "kworker/0:1/12"),
        ] {
            let changed: Vec<String> = PCIEHP_REPORT.iter().map(|l| l.replace(from, to)).collect();
            let changed: Vec<&str> = changed.iter().map(String::as_str).collect();
            let (kind, ex) = report(&changed);
            assert!(known(&HOTUNPLUG, kind, &ex).is_none(), "{to}");
        }
        // Another kind of report with the same words is not it either.
        let (_, ex) = report(PCIEHP_REPORT);
        assert!(known(&HOTUNPLUG, Splat::Bug, &ex).is_none());
    }
}
