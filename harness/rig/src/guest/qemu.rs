//! Booting one guest under QEMU: the command line, the serial console read
//! line by line with a deadline, each line's arrival timed for the boot's
//! phases, a QMP connection, and the per-boot folder that keeps the serial
//! log, QEMU's stderr, its command line and the QMP transcript.

use crate::arch::Arch;
use crate::guest::console::Untangle;
use crate::guest::qmp::Qmp;
use crate::host::provision::Qemu;
use crate::judge::phases::Recorder;
use anyhow::{bail, Context, Result};
pub use judge::Console;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub struct Guest<'a> {
    pub arch: Arch,
    pub qemu: &'a Qemu,
    pub kernel: &'a Path,
    /// The kernel's `CONFIG_HZ`, for the arch's kernel parameters.
    pub hz: Option<u32>,
    pub initrd: &'a Path,
    /// Appended to the kernel command line, e.g. `pcirig.scenario=boot`.
    pub cmdline: String,
    /// The per-boot folder.
    pub dir: &'a Path,
    /// More QEMU arguments, e.g. the device under test.
    pub extra_args: Vec<String>,
}

/// What the console's reader hands the boot's loop, each with the time it
/// was read.
enum FromConsole {
    /// The console's first byte, before any whole line.
    FirstByte(Instant),
    /// The whole lines one read brought.
    Lines(Instant, Vec<String>),
}

/// How long the console's reader waits after each read. QEMU writes the
/// console a byte at a time; without the wait a busy console woke the reader
/// and the boot's loop about once per byte. It delays a line by at most this.
const GATHER: Duration = Duration::from_millis(2);

/// Reads `from` to its end, handing each read's whole lines to `to` (and
/// the first byte's arrival before them); the last line may lack its `\n`.
fn read_console(mut from: impl Read, to: mpsc::Sender<FromConsole>) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut partial: Vec<u8> = Vec::new();
    let mut first = true;
    let text = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .trim_end_matches('\r')
            .to_string()
    };
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let at = Instant::now();
        if std::mem::take(&mut first) && to.send(FromConsole::FirstByte(at)).is_err() {
            return;
        }
        partial.extend_from_slice(&buf[..n]);
        if let Some(end) = partial.iter().rposition(|&b| b == b'\n') {
            let lines = partial[..end].split(|&b| b == b'\n').map(text).collect();
            partial.drain(..=end);
            if to.send(FromConsole::Lines(at, lines)).is_err() {
                return;
            }
        }
        std::thread::sleep(GATHER);
    }
    if !partial.is_empty() {
        let _ = to.send(FromConsole::Lines(Instant::now(), vec![text(&partial)]));
    }
}

/// A boot's folder, private to the user (sockets live there).
pub fn boot_dir(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(dir.to_path_buf())
}

/// Where a boot's sockets live: its own folder, unless that path is too long
/// for a Unix socket (107 bytes); then a private folder under /tmp, named in
/// `sockets.txt`.
pub fn socket_dir(dir: &Path) -> Result<PathBuf> {
    if dir.join("control.sock").as_os_str().len() < 100 {
        return Ok(dir.to_path_buf());
    }
    // Named after the whole path: the same scenario boots on other arches at
    // the same time, and every caller for this boot must find the same folder.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(dir, &mut h);
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    let d = std::env::temp_dir().join(format!(
        "pci-rig-{:016x}-{name}",
        std::hash::Hasher::finish(&h)
    ));
    std::fs::create_dir_all(&d)?;
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700))?;
    std::fs::write(
        dir.join("sockets.txt"),
        format!("sockets live in {}\n", d.display()),
    )?;
    Ok(d)
}

impl Guest<'_> {
    fn command(&self, serial: &str, qmp: Option<&Path>) -> Command {
        let mut c = self.qemu.command(self.arch);
        // x86_64: qboot, a firmware that only loads the kernel, instead of
        // SeaBIOS (0.1 s of every boot, measured), where QEMU ships it.
        if let (Arch::X86_64, Some(qboot)) = (self.arch, self.qemu.firmware("qboot.rom")) {
            c.arg("-bios").arg(qboot);
        }
        c.args(self.arch.machine_args())
            .args([
                "-nodefaults",
                "-display",
                "none",
                "-no-reboot",
                "-serial",
                serial,
            ])
            .args(&self.extra_args)
            .arg("-kernel")
            .arg(self.kernel)
            .arg("-initrd")
            .arg(self.initrd)
            .arg("-append")
            // A log ring of 2 MiB (the 6.12 configs keep tinyconfig's 128 KiB): the guest's
            // checks count lines in it while a receive stream floods it.
            .arg(format!(
                "console={} panic=-1 console_msg_format=syslog log_buf_len=2M {} {}",
                self.arch.console(),
                self.arch
                    .kernel_args(self.hz, crate::host::tsc::host_tsc_khz()),
                self.cmdline
            ));
        if let Some(q) = qmp {
            c.arg("-qmp")
                .arg(format!("unix:{},server=on,wait=off", q.display()));
        }
        c
    }

    /// Boots on the terminal: the serial console and QEMU's monitor share
    /// stdio (Ctrl-A X quits, Ctrl-A C switches to the monitor).
    pub fn interactive(&self) -> Result<ExitStatus> {
        let mut c = self.command("mon:stdio", None);
        std::fs::write(
            self.dir.join("qemu-cmdline.txt"),
            crate::host::process::show(&c),
        )?;
        c.status().context("starting QEMU")
    }

    /// Boots headless and reads the console until QEMU exits or `timeout`
    /// passes (then QEMU is killed). `on_line` sees every console line as it
    /// arrives, with the QMP connection for host-side actions and the
    /// console's input (what is written there, the guest reads from its
    /// console).
    pub fn run(
        &self,
        timeout: Duration,
        mut on_line: impl FnMut(&str, &mut Qmp, &mut ChildStdin) -> Result<()>,
    ) -> Result<Console> {
        let sock = socket_dir(self.dir)?.join("qmp.sock");
        let mut cmd = self.command("stdio", Some(&sock));
        std::fs::write(
            self.dir.join("qemu-cmdline.txt"),
            crate::host::process::show(&cmd) + "\n",
        )?;
        let stderr = std::fs::File::create(self.dir.join("qemu-stderr.log"))?;
        let started = Instant::now();
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .context("starting QEMU")?;
        let stdout = child.stdout.take().expect("piped");
        let mut console_in = child.stdin.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || read_console(stdout, tx));
        let mut qmp = match Qmp::connect(&sock, &self.dir.join("qmp.log"), Duration::from_secs(10))
        {
            Ok(q) => q,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                let err =
                    std::fs::read_to_string(self.dir.join("qemu-stderr.log")).unwrap_or_default();
                bail!("{e:#}; QEMU said: {}", err.trim());
            }
        };
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600))?;

        // serial.log keeps what came; the judge and `on_line` see the lines
        // the guest meant (see `Untangle`).
        let mut serial =
            std::io::BufWriter::new(std::fs::File::create(self.dir.join("serial.log"))?);
        let mut untangle = Untangle::default();
        let mut lines = Vec::new();
        let mut phases = Recorder::default();
        let ms = |at: Instant| at.duration_since(started).as_secs_f64() * 1000.0;
        let mut last_at = started;
        let deadline = started + timeout;
        let mut timed_out = false;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(FromConsole::FirstByte(at)) => phases.first_byte(ms(at)),
                Ok(FromConsole::Lines(at, raws)) => {
                    last_at = at;
                    for raw in &raws {
                        writeln!(serial, "{raw}")?;
                    }
                    serial.flush()?;
                    for raw in raws {
                        for line in untangle.push(&raw) {
                            phases.line(ms(at), &line);
                            on_line(&line, &mut qmp, &mut console_in)?;
                            lines.push(line);
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    timed_out = true;
                    let _ = child.kill();
                    break;
                }
            }
        }
        if let Some(line) = untangle.finish() {
            phases.line(ms(last_at), &line);
            lines.push(line);
        }
        drop(console_in);
        let (exit, cpu) = wait_with_cpu(&mut child)?;
        let exited = Instant::now();
        phases.cpu(cpu.as_secs_f64() * 1000.0);
        qmp.drain();
        let _ = reader.join();
        let _ = std::fs::remove_file(&sock);
        Ok(Console {
            arch: self.arch,
            syslog: true,
            lines,
            timed_out,
            exit: Some(exit),
            elapsed: started.elapsed(),
            events: std::mem::take(&mut qmp.events),
            host_failures: Vec::new(),
            injected_ns: Vec::new(),
            marks: Vec::new(),
            oracle: None,
            phases: phases.finish(ms(exited)),
        })
    }
}

/// Waits for `child` to exit: its status, and the CPU time (user and
/// system, all its threads) it used, which the kernel keeps for its parent.
fn wait_with_cpu(child: &mut Child) -> Result<(ExitStatus, Duration)> {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is valid (plain integers).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own unreaped child (`Child` has not waited
        // for it), and `status` and `usage` are valid for writes.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("waiting for QEMU");
        }
    }
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Ok((
        ExitStatus::from_raw(status),
        time(usage.ru_utime) + time(usage.ru_stime),
    ))
}

#[cfg(test)]
mod tests {
    use super::{read_console, socket_dir, wait_with_cpu, FromConsole};
    use std::os::unix::process::ExitStatusExt;
    use std::path::PathBuf;
    use std::process::Command;
    use std::time::Duration;

    /// Hands out its chunks one read at a time, as a pipe would.
    struct Chunks(Vec<&'static [u8]>);

    impl std::io::Read for Chunks {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            let c = self.0.remove(0);
            buf[..c.len()].copy_from_slice(c);
            Ok(c.len())
        }
    }

    #[test]
    fn the_console_arrives_as_whole_lines_after_its_first_byte() {
        let (tx, rx) = std::sync::mpsc::channel();
        let chunks = Chunks(vec![
            b"S",
            b"eaBIOS\r\nLin",
            b"ux\nfirst\nsecond\n",
            b"no end",
        ]);
        read_console(chunks, tx);
        let got: Vec<FromConsole> = rx.iter().collect();
        assert!(matches!(got[0], FromConsole::FirstByte(_)));
        let lines: Vec<Vec<String>> = got[1..]
            .iter()
            .map(|m| match m {
                FromConsole::Lines(_, l) => l.clone(),
                FromConsole::FirstByte(_) => panic!("a second first byte"),
            })
            .collect();
        // A read without a line's end hands nothing; `\r` goes; the last
        // line needs no `\n`.
        assert_eq!(
            lines,
            [
                vec!["SeaBIOS"],
                vec!["Linux", "first", "second"],
                vec!["no end"]
            ]
        );
    }

    #[test]
    fn a_childs_cpu_time_is_taken_with_its_exit() {
        let busy = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exit 3";
        let mut child = Command::new("sh").args(["-c", busy]).spawn().unwrap();
        let (status, cpu) = wait_with_cpu(&mut child).unwrap();
        assert_eq!(status.code(), Some(3));
        assert!(cpu > Duration::from_millis(20), "a busy shell used {cpu:?}");
        let mut child = Command::new("sleep").arg("0.3").spawn().unwrap();
        let (status, cpu) = wait_with_cpu(&mut child).unwrap();
        assert!(status.success());
        assert!(cpu < Duration::from_millis(100), "a sleep used {cpu:?}");
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        child.kill().unwrap();
        let (status, _) = wait_with_cpu(&mut child).unwrap();
        assert_eq!(status.signal(), Some(9), "killed, as at a timeout");
    }

    #[test]
    fn long_boot_folders_get_one_private_socket_folder_each() {
        let base = std::env::temp_dir().join(format!("pci-rig-sockets-{}", std::process::id()));
        let long = "x".repeat(60);
        let arm = base.join(format!("{long}/arm64-selftest/selftest-warning"));
        let riscv = base.join(format!("{long}/riscv64-selftest/selftest-warning"));
        let short = base.join("b");
        for d in [&arm, &riscv, &short] {
            std::fs::create_dir_all(d).unwrap();
        }
        let a: PathBuf = socket_dir(&arm).unwrap();
        assert_ne!(a, arm, "too long for a socket: moved");
        assert_eq!(
            socket_dir(&arm).unwrap(),
            a,
            "the same boot finds the same folder"
        );
        let r = socket_dir(&riscv).unwrap();
        assert_ne!(r, a, "the same scenario on another arch gets its own");
        assert_eq!(socket_dir(&short).unwrap(), short);
        assert!(std::fs::read_to_string(arm.join("sockets.txt"))
            .unwrap()
            .contains(&a.display().to_string()));
        for d in [&a, &r, &base] {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
