//! `pci-rig-device`: serves one QEMU `vfio-user-pci` connection with pci-rig's device, plus a
//! control socket for the host. See REGISTERS.md.

use qemu_device::control;
use qemu_device::model::{Knobs, Model};
use qemu_device::transport::{self, Device};
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

const USAGE: &str = "\
usage: pci-rig-device --socket PATH --control PATH [--access-log PATH] [--dma-log PATH] [--dma-delay-us N]

  --socket PATH      vfio-user socket for QEMU's -device vfio-user-pci (created, mode 0600)
  --control PATH     JSON-lines control socket (created, mode 0600)
  --access-log PATH  on exit or SIGTERM/SIGINT/SIGHUP, write the access log here (JSON lines)
  --dma-log PATH     likewise the DMA log: QEMU's maps and unmaps, every DMA (JSON lines)
  --dma-delay-us N   run each DMA opcode N µs after its doorbell (the dma_delay_us knob, also
                     what clear_knobs goes back to; default 0: at the doorbell)

Serves one QEMU connection and exits when QEMU disconnects.
Set PCI_RIG_DEVICE_LOG=debug|info|warn for diagnostics on stderr (default warn).";

struct Args {
    socket: PathBuf,
    control: PathBuf,
    access_log: Option<PathBuf>,
    dma_log: Option<PathBuf>,
    dma_delay_us: u64,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let (mut socket, mut control, mut access_log, mut dma_log) = (None, None, None, None);
    let mut dma_delay_us: Option<u64> = None;
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg, None),
        };
        if name == "--dma-delay-us" {
            let v = inline.or_else(|| it.next()).unwrap_or_default();
            let n = v.parse().map_err(|_| {
                format!("`--dma-delay-us` needs a number of microseconds, not `{v}`")
            })?;
            if dma_delay_us.replace(n).is_some() {
                return Err("`--dma-delay-us` given twice".into());
            }
            continue;
        }
        let slot = match name.as_str() {
            "-h" | "--help" => return Ok(None),
            "--socket" => &mut socket,
            "--control" => &mut control,
            "--access-log" => &mut access_log,
            "--dma-log" => &mut dma_log,
            _ => return Err(format!("unknown argument `{name}`")),
        };
        let value = match inline.or_else(|| it.next()) {
            Some(v) if !v.is_empty() => v,
            _ => return Err(format!("`{name}` needs a path")),
        };
        if slot.replace(PathBuf::from(value)).is_some() {
            return Err(format!("`{name}` given twice"));
        }
    }
    Ok(Some(Args {
        socket: socket.ok_or("missing `--socket PATH`")?,
        control: control.ok_or("missing `--control PATH`")?,
        access_log,
        dma_log,
        dma_delay_us: dma_delay_us.unwrap_or(0),
    }))
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("pci-rig-device: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match serve(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pci-rig-device: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: &Args) -> Result<(), String> {
    StderrLog::install();
    if args.socket == args.control {
        return Err("--socket and --control must differ".into());
    }
    for p in [&args.socket, &args.control] {
        if p.symlink_metadata().is_ok() {
            return Err(format!("{}: already exists", p.display()));
        }
    }
    // Signals are taken by one thread with sigwait; block them before any thread starts
    // so every thread inherits the mask.
    let signals = block_signals();

    // Bind both sockets 0600 from the start: no window where others could connect.
    // SAFETY: umask only swaps the process's file mode mask.
    let old_mask = unsafe { libc::umask(0o177) };
    let bound = bind_both(args);
    // SAFETY: as above.
    unsafe { libc::umask(old_mask) };
    let (server, control) = bound?;

    let mut model = Model::new();
    model.set_default_knobs(Knobs {
        dma_delay_us: args.dma_delay_us,
        ..Knobs::default()
    })?;
    let device = Arc::new(Mutex::new(Device::new(model)));
    {
        let device = device.clone();
        std::thread::spawn(move || {
            if let Err(e) = control::serve(control, device) {
                log::error!("control socket: {e}");
            }
        });
    }
    {
        let device = device.clone();
        std::thread::spawn(move || transport::tick_soft_irqs(&device));
    }
    {
        let device = device.clone();
        std::thread::spawn(move || transport::tick_dma(&device));
    }
    {
        let (device, paths) = (device.clone(), PathsToClean::from(args));
        std::thread::spawn(move || {
            let sig = wait_signal(&signals);
            eprintln!("pci-rig-device: signal {sig}, stopping");
            let code = match write_log(&device, &paths.logs) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("pci-rig-device: {e}");
                    1
                }
            };
            paths.remove();
            std::process::exit(code);
        });
    }
    eprintln!(
        "pci-rig-device: serving {} (control {})",
        args.socket.display(),
        args.control.display()
    );
    let served = transport::run(&server, device.clone());
    let written = write_log(&device, &Logs::from(args));
    drop(server);
    cleanup(args);
    served.map_err(|e| format!("vfio-user: {e}"))?;
    written?;
    let d = control::lock(&device);
    let c = d.model.counters();
    eprintln!(
        "pci-rig-device: client disconnected; {} BAR reads, {} BAR writes, {} interrupts",
        c.bar0_reads + c.bar2_reads,
        c.bar0_writes + c.bar2_writes,
        c.irqs_raised
    );
    Ok(())
}

fn bind_both(args: &Args) -> Result<(vfio_user::Server, UnixListener), String> {
    let server = transport::bind(&args.socket)
        .map_err(|e| format!("{}: cannot listen: {e}", args.socket.display()))?;
    // From here on the paths are ours: dropping `server` removes its socket, and a failure
    // removes the control socket.
    let control = UnixListener::bind(&args.control)
        .map_err(|e| format!("{}: cannot listen: {e}", args.control.display()))?;
    for p in [&args.socket, &args.control] {
        if let Err(e) = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)) {
            let _ = std::fs::remove_file(&args.control);
            return Err(format!("{}: {e}", p.display()));
        }
    }
    Ok((server, control))
}

/// Where the logs go on exit.
#[derive(Clone)]
struct Logs {
    access: Option<PathBuf>,
    dma: Option<PathBuf>,
}

impl Logs {
    fn from(a: &Args) -> Self {
        Self {
            access: a.access_log.clone(),
            dma: a.dma_log.clone(),
        }
    }
}

fn write_log(device: &Mutex<Device>, logs: &Logs) -> Result<(), String> {
    // A signal and QEMU hanging up can arrive together: the first thread
    // writes the log, the other finds it written (rewriting it could be cut
    // short by the first one ending the process).
    static WRITTEN: Mutex<bool> = Mutex::new(false);
    let mut written = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    if *written {
        return Ok(());
    }
    *written = true;
    let d = control::lock(device);
    if let Some(path) = &logs.access {
        json_lines(path, "access log", d.model.log().since(0))?;
    }
    if let Some(path) = &logs.dma {
        json_lines(path, "DMA log", d.model.dma().log())?;
    }
    Ok(())
}

fn json_lines<T: serde::Serialize>(
    path: &Path,
    what: &str,
    items: impl IntoIterator<Item = T>,
) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: cannot write the {what}: {e}", path.display());
    let mut out = BufWriter::new(std::fs::File::create(path).map_err(err)?);
    for a in items {
        serde_json::to_writer(&mut out, &a).map_err(|e| err(e.into()))?;
        out.write_all(b"\n").map_err(err)?;
    }
    out.flush().map_err(err)
}

struct PathsToClean {
    sockets: [PathBuf; 2],
    logs: Logs,
}

impl PathsToClean {
    fn from(a: &Args) -> Self {
        Self {
            sockets: [a.socket.clone(), a.control.clone()],
            logs: Logs::from(a),
        }
    }

    fn remove(&self) {
        for s in &self.sockets {
            let _ = std::fs::remove_file(s);
        }
    }
}

fn cleanup(args: &Args) {
    PathsToClean::from(args).remove();
}

fn block_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; the calls only fill it and set this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_signal(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: `set` is an initialised sigset_t and `sig` a valid out-pointer.
    while unsafe { libc::sigwait(set, &mut sig) } != 0 {}
    sig
}

/// Just enough of a logger for the vfio_user crate's messages and ours.
struct StderrLog(log::LevelFilter);

impl StderrLog {
    fn install() {
        let level = std::env::var("PCI_RIG_DEVICE_LOG")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(log::LevelFilter::Warn);
        let logger: &'static StderrLog = Box::leak(Box::new(StderrLog(level)));
        if log::set_logger(logger).is_ok() {
            log::set_max_level(level);
        }
    }
}

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= self.0
    }

    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            eprintln!("pci-rig-device: {}: {}", r.level(), r.args());
        }
    }

    fn flush(&self) {}
}

#[cfg(test)]
mod tests {
    use super::parse_args;

    fn parse(s: &str) -> Result<Option<super::Args>, String> {
        parse_args(s.split_whitespace().map(String::from))
    }

    #[test]
    fn arguments() {
        let a = parse("--socket /a --control=/b --access-log /c --dma-log /d")
            .unwrap()
            .unwrap();
        assert_eq!(a.dma_log.unwrap().to_str(), Some("/d"));
        assert_eq!(a.socket.to_str(), Some("/a"));
        assert_eq!(a.control.to_str(), Some("/b"));
        assert_eq!(a.access_log.unwrap().to_str(), Some("/c"));
        assert_eq!(a.dma_delay_us, 0);
        let a = parse("--socket /a --control /b --dma-delay-us 750")
            .unwrap()
            .unwrap();
        assert_eq!(a.dma_delay_us, 750);
        let bad = parse("--socket /a --control /b --dma-delay-us soon").err();
        assert!(bad.unwrap().contains("needs a number of microseconds"));
        assert!(parse("--help").unwrap().is_none());
        for (bad, why) in [
            ("", "missing `--socket"),
            ("--socket /a", "missing `--control"),
            ("--socket", "needs a path"),
            ("--socket= --control /b", "needs a path"),
            ("--socket /a --socket /b", "twice"),
            ("--bogus", "unknown argument"),
            ("/a", "unknown argument"),
        ] {
            let e = parse(bad).err().unwrap();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
