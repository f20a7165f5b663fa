//! What the host does for a running guest when it asks (`pcirig: host …`, `pcirig: device …`)
//! or when a fault it armed strikes: device requests, hot-unplug and replug, AER injection,
//! arming the MMIO oracle; each logged in `host-actions.log`, each failure kept for the judge.

use crate::guest::console;
use crate::guest::device::{self, DeviceServer};
use crate::guest::qemu;
use crate::guest::qmp::Qmp;
use crate::guest::requests::{Mark, DEVICE_DONE, DEVICE_FAILED, MARKED};
use crate::guest::{GuestRequest, HostAction};
use crate::judge::driver;
use crate::judge::oracle::HostArmed;
use anyhow::{bail, Context, Result};
use qemu_device::control::Request;
use qemu_device::model::FaultKind;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use vocab::verdict::Timings;

/// The host's side of a running boot: the device servers attached so far (the first at boot,
/// one more per replug), and what the judge will want to know of what the host did.
pub(super) struct HostSide<'a> {
    dir: &'a Path,
    bin: Option<&'a Path>,
    pub(super) servers: Vec<DeviceServer>,
    /// Whether the MMIO oracle's plugin is loaded (the guest may ask to arm it).
    oracle: bool,
    actions: std::fs::File,
    /// What the host failed to do for the guest, each with its reason.
    pub(super) failures: Vec<String>,
    /// When each AER error was injected (the host's CLOCK_MONOTONIC, the device log's clock).
    pub(super) injected_ns: Vec<u64>,
    /// The moments the guest had written down (`mark NAME`), in order.
    pub(super) marks: Vec<Mark>,
    /// What the host knew when it armed the oracle.
    pub(super) armed: Option<HostArmed>,
    pub(super) timings: Timings,
    unplugs: usize,
    unplugged_at: Option<Instant>,
    line_no: usize,
    /// A fault armed for the host to carry out when it strikes (`aer`, `unplug`).
    watching: Option<FaultKind>,
}

impl<'a> HostSide<'a> {
    pub(super) fn new(
        dir: &'a Path,
        bin: Option<&'a Path>,
        servers: Vec<DeviceServer>,
        oracle: bool,
    ) -> Result<Self> {
        Ok(HostSide {
            dir,
            bin,
            servers,
            oracle,
            actions: std::fs::File::create(dir.join("host-actions.log"))?,
            failures: Vec::new(),
            injected_ns: Vec::new(),
            marks: Vec::new(),
            armed: None,
            timings: Timings::new(),
            unplugs: 0,
            unplugged_at: None,
            line_no: 0,
            watching: None,
        })
    }

    /// One console line of the running guest: a fault that struck, a request, the driver's
    /// `remove_begin` after an unplug.
    pub(super) fn on_line(
        &mut self,
        line: &str,
        qmp: &mut Qmp,
        console_in: &mut dyn Write,
    ) -> Result<()> {
        let text = console::strip_timestamp(line);
        self.line_no += 1;
        if let Some(kind) = self.watching {
            // The driver prints a line per access: the strike is seen within one line.
            if let Some(at) = struck(self.servers.last()) {
                self.watching = None;
                self.on_strike(kind, at, qmp)?;
            }
        }
        match GuestRequest::parse(text) {
            None => {}
            Some(Err(e)) => {
                self.failures.push(format!("`{text}`: {e}"));
                writeln!(self.actions, "{text} -> error: {e}")?;
            }
            Some(Ok(GuestRequest::Device {
                json,
                must_refuse,
                answer,
            })) => self.on_device_request(json, must_refuse, answer, console_in)?,
            Some(Ok(GuestRequest::Host(HostAction::ArmOracle))) => {
                self.on_arm_oracle(text, console_in)?
            }
            Some(Ok(GuestRequest::Host(HostAction::Mark { name }))) => {
                // The time first: the guest did all it did before this line.
                let ns = qemu_device::transport::monotonic_ns();
                self.marks.push(Mark {
                    name: name.to_string(),
                    ns,
                });
                writeln!(console_in, "{MARKED}")?;
                console_in.flush()?;
                writeln!(self.actions, "{text} -> marked at {ns} ns")?;
            }
            Some(Ok(GuestRequest::Host(action))) => self.on_host_action(text, action, qmp)?,
        }
        if driver::is_event(line, "remove_begin") {
            if let Some(at) = self.unplugged_at.take() {
                let ms = at.elapsed().as_secs_f64() * 1000.0;
                self.timings.entry("device_del_to_remove_ms").or_insert(ms);
                writeln!(
                    self.actions,
                    "guest remove() began {ms:.1} ms after device_del"
                )?;
            }
        }
        Ok(())
    }

    /// A fault the host watched for struck at the device's access `at`: carry it out.
    fn on_strike(&mut self, kind: FaultKind, at: u64, qmp: &mut Qmp) -> Result<()> {
        let action = match kind {
            FaultKind::Unplug => {
                self.unplugged_at = Some(Instant::now());
                Ok(HostAction::Unplug)
            }
            FaultKind::Aer => Ok(AER_AT_STRIKE),
            _ => Err(anyhow::anyhow!("the host carries out no {kind} fault")),
        };
        let result = action
            .and_then(|action| self.act(action, qmp))
            .unwrap_or_else(|e| {
                self.failures
                    .push(format!("the {kind} fault that struck #{at}: {e:#}"));
                format!("error: {e:#}")
            });
        writeln!(self.actions, "{kind} fault struck access #{at} -> {result}")?;
        Ok(())
    }

    /// `pcirig: device {json}`: to the device server attached now; answered on the console
    /// when the guest waits for it; a fault the host carries out is watched for.
    fn on_device_request(
        &mut self,
        json: &str,
        must_refuse: bool,
        answer: bool,
        console_in: &mut dyn Write,
    ) -> Result<()> {
        let (logged, failure) = device_request(self.servers.last(), json, must_refuse);
        if let Ok(Request::ArmFault { kind, .. }) = serde_json::from_str(json) {
            let host_acts = matches!(kind, FaultKind::Aer | FaultKind::Unplug);
            self.watching = (failure.is_none() && host_acts).then_some(kind);
        }
        if answer {
            let says = if failure.is_none() {
                DEVICE_DONE
            } else {
                DEVICE_FAILED
            };
            writeln!(console_in, "{says}")?;
            console_in.flush()?;
        }
        self.failures.extend(failure);
        writeln!(self.actions, "{json} -> {logged}")?;
        Ok(())
    }

    /// `pcirig: host arm-oracle`: arm the MMIO oracle, and answer the guest (which waits for
    /// it on its console) once it is armed.
    fn on_arm_oracle(&mut self, text: &str, console_in: &mut dyn Write) -> Result<()> {
        let t = Instant::now();
        let result = arm_oracle(self.oracle, self.dir, self.servers.last(), console_in)
            .map(|device_next_seq| {
                self.armed = Some(HostArmed {
                    line: self.line_no - 1,
                    device_next_seq,
                });
                format!(
                    "armed after {:.0} ms; the device's next access is #{}",
                    t.elapsed().as_secs_f64() * 1000.0,
                    device_next_seq.map_or("-".to_string(), |n| n.to_string())
                )
            })
            .unwrap_or_else(|e| {
                self.failures.push(format!("{text}: {e:#}"));
                format!("error: {e:#}")
            });
        writeln!(self.actions, "{text} -> {result}")?;
        Ok(())
    }

    /// `pcirig: host unplug|replug|aer …`.
    fn on_host_action(&mut self, text: &str, action: HostAction, qmp: &mut Qmp) -> Result<()> {
        if action == HostAction::Unplug {
            self.unplugged_at = Some(Instant::now());
        }
        let result = self.act(action, qmp).unwrap_or_else(|e| {
            self.failures.push(format!("{text}: {e:#}"));
            format!("error: {e:#}")
        });
        writeln!(self.actions, "{text} -> {result}")?;
        Ok(())
    }

    /// Carries out `action`; an AER error's injection time is kept.
    fn act(&mut self, action: HostAction, qmp: &mut Qmp) -> Result<String> {
        let done = host_action(
            action,
            qmp,
            self.bin,
            self.dir,
            &mut self.servers,
            &mut self.unplugs,
        )?;
        if matches!(action, HostAction::Aer { .. }) {
            self.injected_ns
                .push(qemu_device::transport::monotonic_ns());
        }
        Ok(done)
    }
}

/// Sends a guest's control request (`json`) to the device server attached
/// now; `must_refuse`: the device must answer it with an error. Returns
/// what to log and, if the host failed the guest, why.
fn device_request(
    server: Option<&DeviceServer>,
    json: &str,
    must_refuse: bool,
) -> (String, Option<String>) {
    let reply = match (server, serde_json::from_str::<serde_json::Value>(json)) {
        (Some(server), Ok(req)) => server.request(&req).map(|r| r.to_string()),
        (None, _) => Err(anyhow::anyhow!("no device attached")),
        (_, Err(e)) => Err(anyhow::anyhow!("not JSON: {e}")),
    };
    match (reply, must_refuse) {
        (Ok(r), false) => (r, None),
        (Err(e), true) => (format!("refused as it should be: {e:#}"), None),
        (Ok(r), true) => (
            format!("error: accepted: {r}"),
            Some(format!(
                "device request {json}: accepted ({r}), but the device must refuse it"
            )),
        ),
        (Err(e), false) => (
            format!("error: {e:#}"),
            Some(format!("device request {json}: {e:#}")),
        ),
    }
}

/// What the host injects when an `aer` fault strikes: an uncorrectable non-fatal error at the
/// root port our device sits behind (QEMU refuses it at our device, which has no PCI Express
/// capability), as the `aer` scenario's second injection.
const AER_AT_STRIKE: HostAction = HostAction::Aer {
    id: "rp0",
    error: "POISON_TLP",
};

/// The struck access's number, once the device's armed fault has struck.
fn struck(server: Option<&DeviceServer>) -> Option<u64> {
    let reply = server?.request(&Request::Fault {}).ok()?;
    reply["fault"]["struck"]["seq"].as_u64()
}

/// Arms the MMIO oracle (`oracle::arm`) and tells the guest on its
/// console; returns the attached device's next access number at that
/// moment, so the judge can tell an access from before arming.
fn arm_oracle(
    loaded: bool,
    dir: &Path,
    device: Option<&DeviceServer>,
    console_in: &mut dyn Write,
) -> Result<Option<u64>> {
    if !loaded {
        bail!("the MMIO oracle is not loaded in this boot");
    }
    // Each nudge is an empty line: it wakes a vCPU, the guest skips it.
    crate::guest::oracle::arm(dir, Duration::from_secs(30), || {
        console_in.write_all(b"\n")?;
        Ok(console_in.flush()?)
    })?;
    let next = match device {
        Some(d) => {
            let r = d.request(&qemu_device::control::Request::Log {
                since: 0,
                limit: Some(0),
            })?;
            Some(
                r["next_seq"]
                    .as_u64()
                    .with_context(|| format!("the device's log reply has no next_seq: {r}"))?,
            )
        }
        None => None,
    };
    writeln!(console_in, "{}", crate::guest::oracle::ARMED_ACK)?;
    console_in.flush()?;
    Ok(next)
}

/// Carries out one host action the guest asked for. Returns what to log.
fn host_action(
    action: HostAction,
    qmp: &mut Qmp,
    bin: Option<&Path>,
    dir: &Path,
    servers: &mut Vec<DeviceServer>,
    unplugs: &mut usize,
) -> Result<String> {
    match (action, bin) {
        (HostAction::ArmOracle | HostAction::Mark { .. }, _) => {
            bail!("arming the MMIO oracle or marking a moment is not a machine action")
        }
        (HostAction::Unplug, _) => {
            *unplugs += 1;
            qmp.execute("device_del", serde_json::json!({ "id": device::QEMU_ID }))?;
            Ok("device_del sent".to_string())
        }
        (HostAction::Replug, Some(bin)) => {
            // The id is free once QEMU has finished the unplug.
            qmp.wait_events(
                "DEVICE_DELETED",
                device::deleted,
                *unplugs,
                Duration::from_secs(30),
            )?;
            let d = qemu::boot_dir(&dir.join(format!("replug-{}", servers.len())))?;
            let delay = servers.last().map_or(0, |s| s.dma_delay_us);
            let mut server = DeviceServer::start(bin, &d, &qemu::socket_dir(&d)?, delay)?;
            server.unposted_writes = servers.last().is_some_and(|s| s.unposted_writes);
            let added = qmp.execute("device_add", server.device_add());
            servers.push(server);
            added?;
            Ok(format!("device_add with the server in {}", d.display()))
        }
        (HostAction::Replug, None) => bail!("no device server in this scenario"),
        (HostAction::Aer { id, error }, _) => {
            // HMP only; it answers in text, errors starting "Error".
            let cmd = format!("pcie_aer_inject_error {id} {error}");
            let out = qmp.execute(
                "human-monitor-command",
                serde_json::json!({ "command-line": cmd }),
            )?;
            match out.as_str().unwrap_or("").trim() {
                said if said.starts_with("Error") => bail!("{cmd}: {said}"),
                said => Ok(format!("{cmd}: {said}")),
            }
        }
    }
}
