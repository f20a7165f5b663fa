//! What the host does for a running guest when it asks (`pcirig: host …`, `pcirig: device …`):
//! device requests, hot-unplug and replug, AER injection, arming the MMIO oracle.

use crate::guest::device::{self, DeviceServer};
use crate::guest::qemu;
use crate::guest::qmp::Qmp;
use crate::guest::HostAction;
use anyhow::{bail, Context, Result};
use qemu_device::control::Request;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Sends a guest's control request (`json`) to the device server attached
/// now; `must_refuse`: the device must answer it with an error. Returns
/// what to log and, if the host failed the guest, why.
pub(super) fn device_request(
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
pub(super) const AER_AT_STRIKE: HostAction = HostAction::Aer {
    id: "rp0",
    error: "POISON_TLP",
};

/// The struck access's number, once the device's armed fault has struck.
pub(super) fn struck(server: Option<&DeviceServer>) -> Option<u64> {
    let reply = server?.request(&Request::Fault {}).ok()?;
    reply["fault"]["struck"]["seq"].as_u64()
}

/// Arms the MMIO oracle (`oracle::arm`) and tells the guest on its
/// console; returns the attached device's next access number at that
/// moment, so the judge can tell an access from before arming.
pub(super) fn arm_oracle(
    loaded: bool,
    dir: &Path,
    device: Option<&DeviceServer>,
    console_in: &mut impl Write,
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
pub(super) fn host_action(
    action: HostAction,
    qmp: &mut Qmp,
    bin: Option<&Path>,
    dir: &Path,
    servers: &mut Vec<DeviceServer>,
    unplugs: &mut usize,
) -> Result<String> {
    match (action, bin) {
        (HostAction::ArmOracle, _) => bail!("arming the MMIO oracle is not a machine action"),
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
