//! Reading the guest's serial console: stripping printk timestamps and
//! recognising the kernel's distress signals.

pub use vocab::verdict::Splat;

/// Who wrote a console line, by its syslog prefix: with
/// `console_msg_format=syslog` the kernel starts each record it prints with
/// `<N>`, N being facility × 8 + level. The kernel's own messages have
/// facility 0; a record user space wrote through /dev/kmsg never does (the
/// kernel gives it LOG_USER unless it names another non-zero facility), and
/// a line user space wrote to the serial port directly has no prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `<N>` with facility 0: printed by the kernel.
    Kernel,
    /// `<N>` with a facility of user space's: written to /dev/kmsg.
    UserLog,
    /// No prefix: written to the console by user space (or the console
    /// was not asked for prefixes).
    Unmarked,
}

/// A line's syslog prefix (`<6>`) and the rest.
fn split_prefix(line: &str) -> (Option<u32>, &str) {
    let prefixed = line.strip_prefix('<').and_then(|rest| {
        let (n, text) = rest.split_once('>')?;
        let digits = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
        Some((n.parse().ok().filter(|_| digits)?, text))
    });
    match prefixed {
        Some((n, text)) => (Some(n), text),
        None => (None, line),
    }
}

/// Who wrote `line` ([`Origin`]).
pub fn origin(line: &str) -> Origin {
    match split_prefix(line).0 {
        Some(n) if n >> 3 == 0 => Origin::Kernel,
        Some(_) => Origin::UserLog,
        None => Origin::Unmarked,
    }
}

/// A line's printk stamp (`[    1.234567]`, seconds since boot) and the
/// text after it; a syslog prefix before the stamp is skipped.
fn split_stamp(line: &str) -> Option<(f64, &str)> {
    let (stamp, text) = split_prefix(line).1.strip_prefix('[')?.split_once(']')?;
    let (secs, frac) = stamp.trim_start().split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(secs) || !digits(frac) {
        return None;
    }
    Some((stamp.trim_start().parse().ok()?, text))
}

/// The text of a console line without its `<6>[    1.234567] ` syslog
/// prefix and printk stamp.
pub fn strip_timestamp(line: &str) -> &str {
    let trimmed = line.trim_end_matches(['\r', '\n']);
    match split_stamp(trimmed) {
        Some((_, text)) => text.strip_prefix(' ').unwrap_or(text),
        None => trimmed,
    }
}

/// The printk stamp of a console line, in seconds since the guest booted.
pub fn timestamp(line: &str) -> Option<f64> {
    split_stamp(line).map(|(secs, _)| secs)
}

/// Where a printk record starts inside `line`, past its first byte: at
/// its stamp, or at the syslog prefix just before it.
fn record_inside(line: &str) -> Option<usize> {
    let stamp = line
        .match_indices('[')
        .map(|(at, _)| at)
        .find(|&at| at > 0 && timestamp(&line[at..]).is_some())?;
    let before = &line[..stamp];
    let prefix = before.rfind('<').filter(|&lt| {
        let n = &before[lt + 1..];
        n.strip_suffix('>')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    Some(prefix.unwrap_or(stamp))
}

/// Puts back together the user-space lines that kernel messages cut.
///
/// The kernel prints each record whole, but it may print one between two
/// pieces of a user-space write to the same serial port: `ok 5 unb`, then
/// `[    1.9] pci_rig …` and its newline, then `ound` arrive as the lines
/// `ok 5 unb[    1.9] pci_rig …` and `ound`. Fed those, this gives back
/// `[    1.9] pci_rig …` and `ok 5 unbound`.
#[derive(Default)]
pub struct Untangle {
    /// The start of a user-space line, waiting for its end.
    pending: String,
}

impl Untangle {
    /// The whole lines that one more console line completes, in order.
    pub fn push(&mut self, line: &str) -> Vec<String> {
        if timestamp(line).is_some() {
            return vec![line.to_string()];
        }
        match record_inside(line) {
            Some(at) => {
                self.pending.push_str(&line[..at]);
                vec![line[at..].to_string()]
            }
            None => vec![std::mem::take(&mut self.pending) + line],
        }
    }

    /// What is left once the console closed: a line that never ended.
    pub fn finish(self) -> Option<String> {
        Some(self.pending).filter(|p| !p.is_empty())
    }
}

/// Kernel messages the console never printed: printk's `** N printk messages dropped **`, which
/// comes where the console catches up again, possibly in the middle of another writer's line.
/// On the mainline line the serial consoles print from a thread of their own (nbcon), so a
/// kernel that prints faster than the port drains has records overwritten unseen.
pub fn dropped_messages(lines: &[String]) -> usize {
    lines.iter().map(|l| dropped_in(l)).sum()
}

fn dropped_in(line: &str) -> usize {
    let mut rest = line;
    let mut n = 0;
    while let Some(at) = rest.find("** ") {
        rest = &rest[at + 3..];
        if let Some((count, _)) = rest.split_once(" printk messages dropped **") {
            n += count.parse::<usize>().unwrap_or(0);
        }
    }
    n
}

/// Recognises the first line of a kernel splat. Order matters: the more
/// specific patterns come before the generic "BUG:" and "WARNING:".
pub fn classify(line: &str) -> Option<Splat> {
    let l = strip_timestamp(line);
    const RULES: &[(&str, Splat)] = &[
        ("Kernel panic - not syncing", Splat::Panic),
        ("BUG: KASAN", Splat::Sanitizer),
        ("BUG: KFENCE", Splat::Sanitizer),
        ("UBSAN:", Splat::Sanitizer),
        ("possible circular locking dependency", Splat::Lockdep),
        ("possible recursive locking detected", Splat::Lockdep),
        ("suspicious RCU usage", Splat::Lockdep),
        ("detected stalls on CPUs", Splat::RcuStall),
        ("unreferenced object 0x", Splat::Leak),
        ("suspected memory leaks", Splat::Leak),
        ("self-detected stall on CPU", Splat::RcuStall),
        ("Oops:", Splat::Oops),
        ("Internal error: Oops", Splat::Oops),
        ("Unable to handle kernel", Splat::Oops),
        ("kernel BUG at", Splat::Bug),
        ("BUG:", Splat::Bug),
        ("WARNING:", Splat::Warning),
    ];
    RULES
        .iter()
        .find(|(pattern, _)| l.contains(pattern))
        .map(|&(_, kind)| kind)
}

/// Every splat in a console log, in order: its kind, its line (without the
/// timestamp) and an excerpt around it.
pub fn splats(lines: &[String]) -> impl Iterator<Item = (Splat, &str, String)> {
    lines.iter().enumerate().filter_map(|(at, l)| {
        let kind = classify(l)?;
        Some((kind, strip_timestamp(l), excerpt(lines, at)))
    })
}

/// The first splat in a console log ([`splats`]).
pub fn first_splat(lines: &[String]) -> Option<(Splat, &str, String)> {
    splats(lines).next()
}

/// A few lines before `at` and the trace after it.
pub fn excerpt(lines: &[String], at: usize) -> String {
    let from = at.saturating_sub(2);
    let to = (at + 25).min(lines.len());
    lines[from..to].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_printk_timestamps_only() {
        assert_eq!(strip_timestamp("[    1.234567] hello\r\n"), "hello");
        assert_eq!(strip_timestamp("[ok] not a stamp"), "[ok] not a stamp");
        assert_eq!(strip_timestamp("plain"), "plain");
        assert_eq!(timestamp("[    1.234567] hello"), Some(1.234567));
        assert_eq!(timestamp("[ok] not a stamp"), None);
        assert_eq!(timestamp("[1] nor this"), None);
        assert_eq!(timestamp("plain"), None);
    }

    #[test]
    fn syslog_prefixes_tell_the_kernel_from_user_space() {
        assert_eq!(
            origin("<6>[    1.5] pci_rig 0000:01:00.0: event probe_done"),
            Origin::Kernel
        );
        assert_eq!(origin("<0>[    1.5] Kernel panic"), Origin::Kernel);
        // Written to /dev/kmsg: LOG_USER (1) × 8 + level, or another facility.
        assert_eq!(
            origin("<14>[    1.5] pci_rig 0000:01:00.0: event probe_done"),
            Origin::UserLog
        );
        assert_eq!(origin("<190>[    1.5] x"), Origin::UserLog);
        assert_eq!(origin("[    1.5] no prefix"), Origin::Unmarked);
        assert_eq!(origin("ok 1 bound"), Origin::Unmarked);
        assert_eq!(origin("<a>[    1.5] not a prefix"), Origin::Unmarked);
        assert_eq!(origin("<>[    1.5] nor this"), Origin::Unmarked);
        assert_eq!(strip_timestamp("<6>[    1.234567] hello"), "hello");
        assert_eq!(timestamp("<12>[    1.234567] hello"), Some(1.234567));
        let mut u = Untangle::default();
        assert_eq!(
            u.push("ok 3 bo<6>[    2.4] pci_rig 0000:01:00.0: event remove_begin"),
            ["<6>[    2.4] pci_rig 0000:01:00.0: event remove_begin"]
        );
        assert_eq!(u.push("und"), ["ok 3 bound"]);
        assert_eq!(u.push("a <b> [1.x] <7> c"), ["a <b> [1.x] <7> c"]);
    }

    #[test]
    fn untangles_user_lines_cut_by_kernel_records() {
        // As seen on riscv64 and x86_64 serial logs of `rebind`.
        let console = [
            "ok 4 unbind",
            "ok [    1.945344] pci_rig 0000:01:00.0: # mmio r bar0 0x8 4 0x12345678",
            "[    1.945400] pci_rig 0000:01:00.0: event probe_done",
            "5 unbound",
            "ok 3 bound[    2.433945] pci_rig 0000:01:00.0: event remove_begin",
            "",
            "pcirig: done",
            "[    2.5] reboot: Power down",
            "no end",
        ];
        let mut u = Untangle::default();
        let lines: Vec<String> = console.iter().flat_map(|l| u.push(l)).collect();
        assert_eq!(
            lines,
            [
                "ok 4 unbind",
                "[    1.945344] pci_rig 0000:01:00.0: # mmio r bar0 0x8 4 0x12345678",
                "[    1.945400] pci_rig 0000:01:00.0: event probe_done",
                "ok 5 unbound",
                "[    2.433945] pci_rig 0000:01:00.0: event remove_begin",
                "ok 3 bound",
                "pcirig: done",
                "[    2.5] reboot: Power down",
                "no end",
            ]
        );
        assert_eq!(u.finish(), None);
        let mut cut = Untangle::default();
        assert_eq!(
            cut.push("pcirig: hang[    9.0] rcu: x"),
            ["[    9.0] rcu: x"]
        );
        assert_eq!(cut.finish().as_deref(), Some("pcirig: hang"));
        let mut plain = Untangle::default();
        assert_eq!(
            plain.push("a [b] [1.x] v[0] [1] c"),
            ["a [b] [1.x] v[0] [1] c"],
            "not stamps"
        );
    }

    #[test]
    fn recognises_each_kind_of_splat() {
        let cases = [
            ("[    2.1] Oops: general protection fault, probably for non-canonical address", Splat::Oops),
            ("[    2.1] Internal error: Oops: 0000000096000004 [#1] SMP", Splat::Oops),
            ("[    2.1] Unable to handle kernel paging request at virtual address 0", Splat::Oops),
            ("[    2.1] kernel BUG at mm/slub.c:123!", Splat::Bug),
            ("[    2.1] BUG: unable to handle page fault for address: ffff", Splat::Bug),
            ("[    2.1] BUG: KASAN: use-after-free in foo+0x1/0x2", Splat::Sanitizer),
            ("unreferenced object 0xffff8880012a3c00 (size 64):", Splat::Leak),
            ("[    9.9] kmemleak: 1 new suspected memory leaks (see /sys/kernel/debug/kmemleak)", Splat::Leak),
            ("[    2.1] UBSAN: shift-out-of-bounds in lib/x.c:1:2", Splat::Sanitizer),
            ("[    2.1] WARNING: CPU: 0 PID: 1 at drivers/misc/lkdtm/bugs.c:1 lkdtm_WARNING+0x1/0x2", Splat::Warning),
            ("[    2.1] WARNING: possible circular locking dependency detected", Splat::Lockdep),
            ("[    2.1] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100", Splat::Panic),
            ("[   30.0] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:", Splat::RcuStall),
        ];
        for (line, kind) in cases {
            assert_eq!(classify(line), Some(kind), "{line}");
        }
    }

    #[test]
    fn ordinary_lines_are_not_splats() {
        for line in [
            "[    0.5] rust_minimal: Rust minimal sample (init)",
            "[    0.5] pci 0000:00:01.0: [1b36:000c] type 01 class 0x060400 PCIe Root Port",
            "ok 1 insmod rust_minimal",
            "Run /init as init process",
            "[    0.1] ACPI: bus type PCI registered",
        ] {
            assert_eq!(classify(line), None, "{line}");
        }
    }

    #[test]
    fn excerpt_starts_just_before_the_splat() {
        let lines: Vec<String> = ["a", "b", "c", "[ 1.0] WARNING: CPU: 0 PID: 1 at x", "trace"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (kind, line, ex) = first_splat(&lines).unwrap();
        assert_eq!(kind, Splat::Warning);
        assert_eq!(line, "WARNING: CPU: 0 PID: 1 at x");
        assert_eq!(ex, "b\nc\n[ 1.0] WARNING: CPU: 0 PID: 1 at x\ntrace");
        assert!(first_splat(&lines[..3]).is_none());
    }
    #[test]
    fn dropped_messages_are_counted_wherever_the_console_put_them() {
        let lines: Vec<String> = [
            "<6>[    4.71] pci_rig 0000:01:00.0: # mmio r bar0 0x14 4 0x2",
            "** 8 printk messages dropped **",
            "pcirig: device {\"cmd\":\"set_knobs\"}** 16 printk messages dropped **",
            "** not a count printk messages dropped **",
            "<6>[    4.72] ** 3 ** 2 printk messages dropped **",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(dropped_messages(&lines), 26);
        assert_eq!(dropped_messages(&lines[..1]), 0);
    }
}
