//! The gates every boot passes before its scenario's own rules, and the last one after them:
//! no splat (but the ones Linux itself makes on our paths, named apart), a console with no
//! holes, every host action done, every unplug asked for seen by QEMU, no dead device server,
//! no timeout, a clean QEMU exit, kernel lines that can be told from user space's; then the
//! runner's KTAP (every check passed, as many as planned), the kernel lines the scenario
//! needs, the scenario's end; and last, no line forged in our modules' formats.

use crate::console::{self, Origin};
use crate::device_log::{self as device, Stopped};
use crate::evidence::Console;
use crate::judgement::Failed;
use crate::ktap::{self, Line};
use crate::requests::{self, GuestRequest, HostAction, DONE};
use crate::{driver, known, sweep};
use vocab::scenario::{Check, Scenario};
use vocab::verdict::Cause;

/// The gates of the boot itself; the names of the known reports Linux made on the way.
pub(crate) fn boot(
    s: &Scenario,
    c: &Console,
    device: &[Stopped],
) -> Result<Vec<&'static str>, Failed> {
    // Every report fails the boot, but one Linux itself makes on this
    // scenario's path (`known`), which is named in the verdict instead.
    let mut known_findings: Vec<&'static str> = Vec::new();
    for (kind, line, excerpt) in console::splats(&c.lines) {
        match known::known(s, kind, &excerpt) {
            Some(k) => known_findings.push(k.name),
            None => {
                return Err(Failed::new(
                    Cause::Splat(kind),
                    format!("{}: {line}\n{excerpt}", kind.name()),
                ))
            }
        }
    }
    // Every rule below reads the console as the whole story: one with holes proves nothing.
    let dropped = console::dropped_messages(&c.lines);
    if dropped > 0 {
        return Err(Failed::new(
            Cause::Checks,
            format!(
                "the kernel dropped {dropped} console messages (`printk messages dropped`): \
                 the console is not the whole story, so no verdict can rest on it; the guest \
                 printed faster than its serial port drains"
            ),
        ));
    }
    if !c.host_failures.is_empty() {
        return Err(Failed::new(
            Cause::Host,
            format!(
                "the host failed the guest's requests:\n{}",
                c.host_failures.join("\n")
            ),
        ));
    }
    // The sweep's unplug points: the host unplugs when their fault strikes.
    let struck_unplugs = match s.check {
        Check::Sweep(_) => sweep::points(&c.lines)
            .unwrap_or_default()
            .iter()
            .filter(|p| p.kind == qemu_device::model::FaultKind::Unplug)
            .count(),
        _ => 0,
    };
    let asked = requests::in_console(&c.lines)
        .filter(|r| *r == Ok(GuestRequest::Host(HostAction::Unplug)))
        .count()
        + struck_unplugs;
    let deleted = c.events.iter().filter(|e| device::deleted(e)).count();
    if deleted != asked && !c.timed_out {
        return Err(Failed::new(
            Cause::Host,
            format!(
                "the guest asked for {asked} unplugs of our device, QEMU reported DEVICE_DELETED {deleted} times"
            ),
        ));
    }
    // A server ends by itself, cleanly, when QEMU hangs up (the guest powered
    // off, or its device was unplugged), which may come before the harness
    // stops it; only a failed exit is a death.
    if let Some(status) = device
        .iter()
        .filter_map(|d| d.died)
        .find(|st| !st.success())
    {
        return Err(Failed::new(
            Cause::Device,
            format!("the device server died during the boot ({status}); see device-stderr.log"),
        ));
    }
    if c.timed_out {
        let last = c.lines.len().saturating_sub(8);
        return Err(Failed::new(
            Cause::Timeout,
            format!(
                "timeout after {} s without powering off (last line: {})\n{}",
                s.timeout.as_secs(),
                c.lines
                    .last()
                    .map_or("none", |l| console::strip_timestamp(l)),
                c.lines[last..].join("\n")
            ),
        ));
    }
    match c.exit {
        Some(status) if status.success() => {}
        Some(status) => {
            return Err(Failed::new(
                Cause::Host,
                format!("QEMU exited with a failure ({status}); see qemu-stderr.log"),
            ))
        }
        None => {
            return Err(Failed::new(
                Cause::Host,
                "QEMU's exit status is unknown".into(),
            ))
        }
    }
    if c.syslog && !c.lines.iter().any(|l| console::origin(l) == Origin::Kernel) {
        return Err(Failed::new(
            Cause::Checks,
            "the kernel was asked to mark its lines (console_msg_format=syslog), but no console line carries its <N> prefix: kernel lines cannot be told from user space's".into(),
        ));
    }
    Ok(known_findings)
}

/// What the runner said: its checks that passed, and how many it planned.
pub(crate) struct Runner {
    pub passed: usize,
    pub planned: Option<usize>,
}

/// The runner's KTAP, the kernel lines the scenario needs, and its end (`text`: the console
/// without printk stamps).
pub(crate) fn runner(s: &Scenario, c: &Console, text: &[&str]) -> Result<Runner, Failed> {
    let mut plan = None;
    let mut results = Vec::new();
    for l in text {
        match ktap::parse_line(l) {
            Some(Line::Plan { depth: 0, count }) => plan = Some(count),
            Some(Line::Result(r)) if r.depth == 0 => results.push(r),
            _ => {}
        }
    }
    // Every check of the runner must pass: a skipped one proved nothing.
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.ok || r.skip)
        .map(|r| {
            let verdict = if r.ok { "ok" } else { "not ok" };
            format!("{verdict} {} {} # {}", r.number, r.name, r.directive)
        })
        .collect();
    if !failed.is_empty() {
        return Err(Failed::new(
            Cause::Checks,
            format!("guest checks failed or skipped:\n{}", failed.join("\n")),
        ));
    }
    if let Some(n) = plan {
        if results.len() != n {
            return Err(Failed::new(
                Cause::Checks,
                format!("guest planned {n} checks but reported {}", results.len()),
            ));
        }
    }
    // Only the kernel's own lines count: user space can write any text.
    let kernel_text: Vec<&str> = c
        .lines
        .iter()
        .filter(|l| !c.syslog || console::origin(l) == Origin::Kernel)
        .map(|l| console::strip_timestamp(l))
        .collect();
    for want in s.kernel_lines {
        if !kernel_text.iter().any(|l| l.contains(want)) {
            return Err(Failed::new(
                Cause::Checks,
                format!("the kernel never printed `{want}`"),
            ));
        }
    }
    if !text.contains(&DONE) {
        return Err(Failed::new(
            Cause::Unfinished,
            "the guest stopped before its scenario finished".into(),
        ));
    }
    Ok(Runner {
        passed: results.len(),
        planned: plan,
    })
}

/// The last gate, so that a lie the device log or the oracle also catches is judged by them:
/// this catches what they cannot, e.g. a forged `event`.
pub(crate) fn nothing_forged(c: &Console) -> Result<(), Failed> {
    if let Some(forged) = forged_module_line(c) {
        return Err(Failed::new(
            Cause::Checks,
            format!("a line in the format of our kernel modules that the kernel did not print (written by user space: {:?}): `{forged}`", console::origin(forged)),
        ));
    }
    Ok(())
}

/// The first line in one of our kernel modules' formats (the driver's
/// `pci_rig <bdf>: …`, `pcirig_platform …`, `rcpufreq-dt: …`) that does not
/// carry the kernel's syslog prefix, when the console was asked for them.
fn forged_module_line(c: &Console) -> Option<&str> {
    if !c.syslog {
        return None;
    }
    c.lines
        .iter()
        .filter(|l| console::origin(l) != Origin::Kernel)
        .find(|l| {
            let text = console::strip_timestamp(l);
            driver::driver_text(l).is_some()
                || text.starts_with("pcirig_platform ")
                || text.starts_with("rcpufreq-dt: ")
        })
        .map(String::as_str)
}
