use super::*;
use crate::driver;

const BAR0: u64 = 0xfe61_0000;
const BAR2: u64 = 0xfe60_0000;
const MAGIC: u64 = 0x7072_6967;

fn at(secs: f64, text: &str) -> String {
    format!("[{secs:12.6}] pci_rig 0000:01:00.0: {text}")
}

/// An unbind with the worker busy (two MAGIC reads, remove() writes RESET),
/// the kernel's BAR lines first.
fn unbind_console() -> Vec<String> {
    let mut lines = vec![
        format!(
            "[    0.500000] pci 0000:01:00.0: BAR 0 [mem {BAR0:#010x}-{:#010x}]",
            BAR0 + 0xfff
        ),
        format!(
            "[    0.500000] pci 0000:01:00.0: BAR 2 [mem {BAR2:#010x}-{:#010x}]",
            BAR2 + 0xffff
        ),
        at(1.0, "event probe_begin"),
        at(1.0, "# mmio r bar0 0x0 4 0x70726967"),
    ];
    lines.extend(
        driver::STEPS
            .iter()
            .map(|s| at(1.0, &format!("step {s} ok x=1"))),
    );
    lines.extend([
        at(1.0, "event probe_done"),
        at(2.0, "event remove_begin"),
        at(2.0, "# mmio w bar0 0x50 4 0x1"),
        at(2.001, "event remove_done"),
        at(2.002, "event worker_gave_up reason=Refused accesses=2"),
        at(2.003, "event worker_stopped reason=Refused accesses=2"),
        at(2.003, "event kept_handle refused"),
    ]);
    lines
}

fn seen(seq: u64, addr: u64, value: u64, kind: &str) -> Seen {
    Seen {
        seq,
        ns: seq,
        vcpu: 0,
        pc: 0xffff_ffff_8100_0000,
        vaddr: 0xffff_c900_0000_0000 + (addr & 0xfff),
        addr,
        size: 4,
        kind: kind.parse().unwrap(),
        value,
        io: true,
    }
}

/// What the plugin saw once armed (record 1): the probe's MAGIC read, a
/// worker read, the RESET write, another worker read; and an access to
/// another device's BAR. The host armed it at the console's first line,
/// when the device had logged nothing but config space.
fn oracle_log() -> Log {
    Log {
        seen: vec![
            seen(2, BAR0, MAGIC, "read"),
            seen(3, 0xfe80_0000, 7, "read"),
            seen(4, BAR0, MAGIC, "read"),
            seen(5, BAR0 + 0x50, 1, "write"),
            seen(6, BAR0, MAGIC, "read"),
        ],
        started: true,
        complete: true,
        armed: Some(1),
        host: Some(HostArmed {
            line: 0,
            device_next_seq: Some(1),
        }),
    }
}

fn device_log() -> Vec<Access> {
    to_device(&oracle_log().seen, &bars(&unbind_console()))
        .into_iter()
        .enumerate()
        .map(|(i, mut a)| {
            a.seq = i as u64 + 1;
            a.class = Class::Ok;
            a
        })
        .collect()
}

fn judged(log: &Log, lines: &[String], device: &[Access]) -> Result<String, String> {
    let history = driver::history(lines)?;
    judge(log, lines, &history, &[device])
}

#[test]
fn learns_every_place_the_kernel_put_our_bars() {
    let lines: Vec<String> = [
        "[    0.597030] pci 0000:01:00.0: BAR 0 [mem 0x00000000-0x00000fff]",
        "[    0.615167] pci 0000:00:01.0: BAR 0 [mem 0x10200000-0x10200fff]: assigned",
        "[    0.615903] pci 0000:01:00.0: BAR 2 [mem 0x10000000-0x1000ffff]: assigned",
        "[    0.616107] pci 0000:01:00.0: BAR 0 [mem 0x10010000-0x10010fff]: assigned",
        "[    9.616107] pci 0000:01:00.0: BAR 0 [mem 0x10010000-0x10010fff]: assigned",
        "[    9.700000] pci 0000:01:00.0: BAR 0 [mem 0x10020000-0x10020fff]: assigned",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let b = bars(&lines);
    let show: Vec<(&str, u64, u64)> = b
        .iter()
        .map(|b| (b.region.name(), b.start, b.end))
        .collect();
    assert_eq!(
        show,
        [
            ("bar2", 0x1000_0000, 0x1001_0000),
            ("bar0", 0x1001_0000, 0x1001_1000),
            ("bar0", 0x1002_0000, 0x1002_1000),
        ]
    );
}

#[test]
fn passes_when_the_plugin_and_the_device_agree_with_the_driver() {
    let ok = judged(&oracle_log(), &unbind_console(), &device_log()).unwrap();
    assert!(
        ok.contains("the MMIO oracle saw 4 accesses to our BARs"),
        "{ok}"
    );
    assert!(ok.contains("each of the device's 4 BAR accesses"), "{ok}");
}

#[test]
fn fails_on_an_access_after_the_binding_ended_that_only_the_plugin_saw() {
    // The device was gone: its log stops, the plugin's does not.
    let mut log = oracle_log();
    log.seen.push(seen(7, BAR0, 0xffff_ffff, "read"));
    log.seen.push(seen(8, 0xfe80_0000, 0, "read"));
    let e = judged(&log, &unbind_console(), &device_log()).unwrap_err();
    assert!(e.starts_with("MMIO oracle (inside QEMU):"), "{e}");
    assert!(
        e.contains("1 access nothing the guest reported accounts for"),
        "{e}"
    );
}

#[test]
fn fails_on_a_device_access_no_vcpu_made() {
    let mut device = device_log();
    let mut extra = device[0].clone();
    extra.seq = 9;
    extra.offset = 0x8;
    device.push(extra);
    let e = judged(&oracle_log(), &unbind_console(), &device).unwrap_err();
    assert!(e.contains("the device logged #9 read bar0 0x8"), "{e}");
    assert!(e.contains("which no vCPU made"), "{e}");
}

#[test]
fn fails_on_a_value_the_plugin_saw_differently() {
    let mut log = oracle_log();
    log.seen[3].value = 2;
    let e = judged(&log, &unbind_console(), &device_log()).unwrap_err();
    assert!(e.contains("MMIO oracle (inside QEMU)"), "{e}");
}

#[test]
fn fails_on_a_log_cut_short_or_never_started_or_no_bars() {
    let mut log = oracle_log();
    log.complete = false;
    let e = judged(&log, &unbind_console(), &device_log()).unwrap_err();
    assert!(e.contains("cut short"), "{e}");
    log.started = false;
    let e = judged(&log, &unbind_console(), &device_log()).unwrap_err();
    assert!(e.contains("never started"), "{e}");
    let lines = unbind_console()[2..].to_vec();
    let e = judged(&oracle_log(), &lines, &device_log()).unwrap_err();
    assert!(
        e.contains("never printed where it put our device's BARs"),
        "{e}"
    );
}

#[test]
fn parses_the_plugins_log_and_refuses_a_broken_one() {
    let text = concat!(
        r#"{"plugin":"mmio-oracle","api":7,"target":"x86_64","qemu_api":[7,7],"watch":[[4096,16]]}"#,
        "\n",
        r#"{"armed":{"seq":1,"flushed":true}}"#,
        "\n",
        r#"{"seq":2,"vcpu":1,"pc":10,"vaddr":20,"addr":4100,"size":4,"kind":"write","value":5,"io":true}"#,
        "\n",
        r#"{"end":{"records":2}}"#,
        "\n"
    );
    let log = Log::parse(text).unwrap();
    assert!(log.started && log.complete);
    assert_eq!(log.armed, Some(1));
    assert!(armed_in(text));
    assert_eq!(log.seen.len(), 1);
    assert_eq!((log.seen[0].addr, log.seen[0].vcpu), (4100, 1));
    let e = Log::parse(&text.replace(r#""records":2"#, r#""records":1"#)).unwrap_err();
    assert!(e.contains("says it wrote 1 records, it holds 2"), "{e}");
    let e = Log::parse(&text.replace(r#""seq":2"#, r#""seq":3"#)).unwrap_err();
    assert!(e.contains("seq 3 out of order"), "{e}");
    let e = Log::parse(&text.replace(r#""seq":1,"flushed""#, r#""seq":2,"flushed""#)).unwrap_err();
    assert!(e.contains("armed record"), "{e}");
    let cut = text.lines().take(3).collect::<Vec<_>>().join("\n");
    assert!(!Log::parse(&cut).unwrap().complete);
    let unarmed: String = text.lines().filter(|l| !l.contains("armed")).collect();
    assert!(!armed_in(&unarmed));
}

/// Judging `log` with the unbind console and device log fails saying `says`.
fn fails_saying(log: &Log, says: &str) {
    let e = judged(log, &unbind_console(), &device_log()).unwrap_err();
    assert!(e.contains(says), "wanted `{says}`: {e}");
}

#[test]
fn fails_when_the_oracle_was_never_armed() {
    let mut log = oracle_log();
    log.armed = None;
    fails_saying(&log, "the MMIO oracle was never armed");
    let mut log = oracle_log();
    log.host = None;
    fails_saying(&log, "the host never saw it so");
}

#[test]
fn fails_on_an_access_the_plugin_logged_before_arming() {
    let mut log = oracle_log();
    log.armed = Some(3);
    fails_saying(&log, "logged access #2 before it was armed (#3)");
}

#[test]
fn fails_on_a_device_access_before_arming() {
    // The host armed the oracle when the device's next access was #3: its
    // first two BAR accesses happened unwatched.
    let mut log = oracle_log();
    log.host.as_mut().unwrap().device_next_seq = Some(3);
    fails_saying(
        &log,
        "the device logged 2 BAR accesses before the MMIO oracle was armed (first: #1 read bar0 0x0 size 4)",
    );
    // Config-space accesses before arming (enumeration) are no BAR's.
    let mut device = device_log();
    for a in &mut device {
        a.seq += 10;
    }
    let mut config = device[0].clone();
    config.seq = 1;
    config.region = Region::Config;
    device.insert(0, config);
    log.host.as_mut().unwrap().device_next_seq = Some(11);
    judged(&log, &unbind_console(), &device).unwrap();
}

#[test]
fn fails_on_an_unplug_before_arming() {
    let mut lines = unbind_console();
    lines.insert(2, "[    0.900000] pcirig: host unplug".into());
    let mut log = oracle_log();
    log.host.as_mut().unwrap().line = 5;
    let e = judged(&log, &lines, &device_log()).unwrap_err();
    assert!(
        e.contains("the host unplugged the device (console line 3) before the MMIO oracle was armed (line 6)"),
        "{e}"
    );
    log.host.as_mut().unwrap().line = 1;
    judged(&log, &lines, &device_log()).unwrap();
}

#[test]
fn an_unplug_is_the_one_the_host_acted_on_whatever_its_spacing() {
    // The host's request parser trims the action: this line unplugs.
    let mut lines = unbind_console();
    lines.insert(2, "[    0.900000] pcirig: host  unplug ".into());
    let mut log = oracle_log();
    log.host.as_mut().unwrap().line = 5;
    let e = judged(&log, &lines, &device_log()).unwrap_err();
    assert!(
        e.contains("the host unplugged the device (console line 3)"),
        "{e}"
    );
}

/// The platform demo node at 0xa003e00: two bindings, each probe reading
/// MagicValue, Version, DeviceID and VendorID, each remove MagicValue.
const NODE: u64 = 0xa003e00;
const VIRT: u64 = 0x7472_6976;

fn platform_reads() -> Vec<(u64, u64)> {
    let binding = [(0, VIRT), (4, 2), (8, 0), (0xc, 0x554d_4551), (0, VIRT)];
    binding.iter().chain(binding.iter()).copied().collect()
}

fn platform_log(reads: &[(u64, u64)]) -> Log {
    let mut seen: Vec<Seen> = reads
        .iter()
        .enumerate()
        .map(|(i, &(o, v))| self::seen(i as u64 + 2, NODE + o, v, "read"))
        .collect();
    // Another transport's register, outside the window: not ours.
    let n = seen.len() as u64;
    seen.push(self::seen(n + 2, NODE + 0x200, 0, "read"));
    Log {
        seen,
        host: Some(HostArmed {
            line: 0,
            device_next_seq: None,
        }),
        ..oracle_log()
    }
}

#[test]
fn a_platform_window_holds_exactly_the_drivers_reads() {
    let window = (NODE, 0x200);
    let lines = ["pcirig: host arm-oracle".to_string()];
    let ok = judge_window(
        &platform_log(&platform_reads()),
        &lines,
        window,
        &platform_reads(),
    );
    assert!(ok.unwrap().contains("exactly the driver's 10 reads"));
    // A read after the last remove (selftest-platform-late).
    let mut late = platform_reads();
    late.push((0, VIRT));
    let e = judge_window(&platform_log(&late), &lines, window, &platform_reads()).unwrap_err();
    assert!(
        e.contains("the node's window at 0xa003e00 saw, as its access 11, a 4-byte read at +0x0 of 0x74726976; the driver's lines account for nothing more"),
        "{e}"
    );
    // The driver says it read a value the window never gave.
    let mut lied = platform_reads();
    lied[1] = (4, 1);
    let e = judge_window(&platform_log(&platform_reads()), &lines, window, &lied).unwrap_err();
    assert!(
        e.contains("as its access 2, a 4-byte read at +0x4 of 0x2"),
        "{e}"
    );
    // A driver that read nothing there (another window mapped).
    let e = judge_window(&platform_log(&[]), &lines, window, &platform_reads()).unwrap_err();
    assert!(
        e.contains("which no vCPU did (the oracle saw 0 reads there)"),
        "{e}"
    );
    // A write is never the driver's.
    let mut log = platform_log(&platform_reads());
    log.seen[9].kind = Kind::Write;
    assert!(judge_window(&log, &lines, window, &platform_reads()).is_err());
    // Never armed.
    let log = Log {
        armed: None,
        ..platform_log(&platform_reads())
    };
    let e = judge_window(&log, &lines, window, &platform_reads()).unwrap_err();
    assert!(e.contains("never armed"), "{e}");
}
