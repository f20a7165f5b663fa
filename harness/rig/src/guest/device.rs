//! Our emulated PCI device, seen from the harness: building the
//! `pci-rig-device` server, starting one per boot next to QEMU, talking to
//! its control socket, and reading its access log back after the boot.
//! The register map is qemu-device/REGISTERS.md.

use crate::host::process::run_logged;
use crate::Paths;
use anyhow::{bail, Context, Result};
use qemu_device::control::{Outcome, Request};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use judge::device_log::*;

/// Builds the server (release: it sits on every trapped guest access).
pub fn build_server(paths: &Paths) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    std::fs::create_dir_all(paths.results())?;
    run_logged(
        Command::new(cargo)
            .args([
                "build",
                "--release",
                "--quiet",
                "-p",
                "qemu-device",
                "--bin",
                "pci-rig-device",
            ])
            .current_dir(&paths.root),
        &paths.results().join("device-build.log"),
    )
    .context("building pci-rig-device")?;
    Ok(paths.cargo_release().join("pci-rig-device"))
}

/// A running device server. Dropping it kills the server.
pub struct DeviceServer {
    child: Child,
    pub socket: PathBuf,
    pub control: PathBuf,
    log: PathBuf,
    dma_log: PathBuf,
    /// The folder of its logs.
    pub dir: PathBuf,
    /// QEMU waits for the server's answer to each BAR write too (`x-no-posted-writes`): a
    /// server that dies at a posted write makes QEMU 11.1 abort (docs/sweep.md, "The removal-point
    /// sweep"), one that dies at a waited-for write times out as at a read.
    pub unposted_writes: bool,
    /// How long after its doorbell the device runs each DMA (its `--dma-delay-us`).
    pub dma_delay_us: u64,
}

impl DeviceServer {
    /// Starts the server with its sockets in `sockets` and its log files in
    /// `dir`, each DMA run `dma_delay_us` after its doorbell (0: at it), and
    /// waits until it answers on the control socket.
    pub fn start(bin: &Path, dir: &Path, sockets: &Path, dma_delay_us: u64) -> Result<Self> {
        let socket = sockets.join("device.sock");
        let control = sockets.join("control.sock");
        let log = dir.join("device-access.jsonl");
        let dma_log = dir.join("device-dma.jsonl");
        let child = Command::new(bin)
            .arg("--socket")
            .arg(&socket)
            .arg("--control")
            .arg(&control)
            .arg("--access-log")
            .arg(&log)
            .arg("--dma-log")
            .arg(&dma_log)
            .arg(format!("--dma-delay-us={dma_delay_us}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("device-stderr.log"))?)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut server = DeviceServer {
            child,
            socket,
            control,
            log,
            dma_log,
            dir: dir.to_path_buf(),
            unposted_writes: false,
            dma_delay_us,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        // QEMU needs the vfio-user socket, the harness the control socket.
        while !server.socket.exists() || server.request(&Request::Ping {}).is_err() {
            if let Some(status) = server.child.try_wait()? {
                bail!(
                    "the device server exited at start ({status}); see {}",
                    dir.join("device-stderr.log").display()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "the device server did not answer on {} within 10 s",
                    server.control.display()
                );
            }
            // It binds in a few ms; every boot waits for it.
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(server)
    }

    /// QEMU's `-device` argument attaching this server behind root port `rp0`.
    pub fn qemu_device(&self) -> String {
        self.device_add().to_string()
    }

    /// The same as QMP `device_add` arguments (hot-plugging it).
    pub fn device_add(&self) -> Value {
        let mut d = json!({
            "driver": "vfio-user-pci",
            "id": QEMU_ID,
            "bus": "rp0",
            "socket": {"path": self.socket, "type": "unix"},
        });
        if self.unposted_writes {
            d["x-no-posted-writes"] = json!(true);
        }
        d
    }

    /// One control request (a [`Request`], or any JSON for requests that
    /// must be refused); an error reply becomes an error.
    pub fn request(&self, req: &impl Serialize) -> Result<Value> {
        let req = serde_json::to_string(req)?;
        let mut s = UnixStream::connect(&self.control)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        writeln!(s, "{req}")?;
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line)?;
        let reply: Value =
            serde_json::from_str(&line).with_context(|| format!("device reply {line:?}"))?;
        let outcome = Outcome::deserialize(&reply)
            .with_context(|| format!("device reply {line:?} has no ok/error"))?;
        if !outcome.ok {
            bail!("device refused {req}: {}", reply["error"]);
        }
        Ok(reply)
    }

    /// `Some(status)` once the server has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Stops the server (SIGTERM, which makes it write its access log) and
    /// returns how it ended and the log. `died` tells whether it had already
    /// exited on its own before this call.
    pub fn stop(mut self) -> Result<Stopped> {
        let died = self.exited();
        if died.is_none() {
            // SAFETY: kill(2) on our own child's pid has no memory effects.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.exited().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let status = self.child.wait()?;
        let log = json_lines(&self.log, "access log")?;
        let dma = json_lines(&self.dma_log, "DMA log")?;
        Ok(Stopped {
            died,
            status,
            log,
            dma,
        })
    }
}

/// A log the server wrote, one JSON value per line (none if it wrote nothing).
fn json_lines<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(serde_json::from_str)
        .collect::<Result<Vec<T>, _>>()
        .with_context(|| format!("reading the {what} {}", path.display()))
}

impl Drop for DeviceServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
