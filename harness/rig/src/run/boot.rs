//! The rig's boot of one scenario: its device server and QEMU, the guest's requests carried
//! out while it runs, its evidence gathered, sealed and judged.

use super::evidence::seal;
use super::foreign::Device;
use super::host_actions::HostSide;
use super::*;
use crate::arch::Arch;
use crate::guest::console;
use crate::guest::device::{DeviceServer, Stopped};
use crate::guest::qemu;
use crate::guest::qemu::{Console, Guest};
use crate::host::provision::Toolchain;
use crate::judge::{self, Judgement};
use crate::kernel::modcheck;
use crate::kernel::{self};
use crate::scenario::{self, Check, Scenario};
use crate::Paths;
use anyhow::{bail, Context, Result};
use report::{Timings, Verdict};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long after its doorbell a boot's device runs each DMA: from 100 to 999 µs, drawn from
/// the run's seed (the sweep's, printed: `--sweep-seed` replays it), the arch and the
/// scenario, so that a driver cannot rely on a DMA being done at any moment but its interrupt.
/// The benchmarks' boots run each at the doorbell, so that their DMA figures stay the engine's.
pub(super) fn dma_delay_us(plan: &crate::sweep::Plan, arch: Arch, s: &Scenario) -> u64 {
    if matches!(s.check, Check::Bench) {
        return 0;
    }
    let seed = match plan {
        crate::sweep::Plan::Sample(seed) => *seed,
        _ => 0,
    };
    // FNV-1a over the seed, the arch and the name.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed
        .to_le_bytes()
        .iter()
        .chain(arch.name().as_bytes())
        .chain(s.name.as_bytes())
    {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    100 + h % 900
}

/// What a boot needs: tools, a kernel and image, and the device server.
pub(super) struct Rig<'a> {
    pub(super) paths: &'a Paths,
    pub(super) tc: &'a Toolchain,
    pub(super) p: &'a Prepared,
    /// The device server binary, when some scenario attaches it.
    pub(super) device: Option<&'a Path>,
    /// The MMIO oracle plugin (`oracle`), loaded with the device.
    pub(super) oracle: Option<&'a Path>,
    /// The `vcpu-yield` plugin: a vCPU spinning at a wait hint yields its
    /// host CPU (several two-vCPU guests share two cores).
    pub(super) vcpu_yield: Option<&'a Path>,
    /// The `tcg-coverage` plugin, loaded in every boot of a kernel.
    pub(super) coverage: Option<&'a Path>,
    /// The removal-point sweep's plan (the `sweep` scenarios).
    pub(super) sweep: &'a crate::sweep::Plan,
    pub(super) dma_path: DmaPath,
}

/// How the guest's DMA reaches the device: QEMU options and the kernel command line only,
/// every kernel has the drivers for each (`cargo xtask test --iommu`, `--bounce`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DmaPath {
    /// Guest-physical addresses, all of RAM mapped for the device at once: most machines.
    #[default]
    Direct,
    /// Behind a vIOMMU, strict: x86_64's intel-iommu, arm64's virtio-iommu. QEMU maps the
    /// device exactly what the guest maps, when the guest maps it (DMA_MAP/DMA_UNMAP).
    Iommu,
    /// Every streaming mapping bounced through swiotlb (`swiotlb=force`): the device reaches
    /// a copy, so a missing sync changes the bytes the CPU sees (a wrong direction does not:
    /// Linux fills the bounce slot at every map, whatever the direction).
    Bounce,
}

impl DmaPath {
    /// Why `arch` cannot run this path, if it cannot.
    pub fn unsupported(self, arch: Arch) -> Option<&'static str> {
        match self {
            DmaPath::Iommu if !arch.has_viommu() => Some(
                "riscv64 has no vIOMMU the rig can use: 6.12 has no driver for one (VIRTIO_IOMMU \
                 is ARM64 || X86, also on 7.3), and QEMU 11 hangs at startup with a vfio-user \
                 device behind its riscv-iommu (docs/defects.md): use --bounce there",
            ),
            _ => None,
        }
    }

    /// The path `s` boots on `arch`: a scenario that needs the IOMMU's witness gets it where
    /// the arch has one, unless the run asked for another path than the direct one.
    fn for_scenario(self, s: &Scenario, arch: Arch) -> DmaPath {
        match self {
            DmaPath::Direct if s.iommu && arch.has_viommu() => DmaPath::Iommu,
            path => path,
        }
    }

    /// QEMU's devices for it; the IOMMU comes before every other device (QEMU attaches PCI
    /// devices to it as they are created).
    fn qemu_args(self, arch: Arch) -> &'static [&'static str] {
        match (self, arch) {
            // Caching mode: QEMU sees each mapping the guest makes and passes it on to
            // the device server.
            (DmaPath::Iommu, Arch::X86_64) => &["-device", "intel-iommu,caching-mode=on"],
            (DmaPath::Iommu, Arch::Arm64) => &["-device", "virtio-iommu-pci"],
            _ => &[],
        }
    }

    fn cmdline(self, arch: Arch) -> &'static str {
        match (self, arch) {
            (DmaPath::Iommu, Arch::X86_64) => " intel_iommu=on",
            (DmaPath::Bounce, _) => " swiotlb=force",
            _ => "",
        }
    }
}

impl Rig<'_> {
    /// Whether `s` boots with our device server: its machine has it, or it is a foreign
    /// module's whose id table names it.
    fn with_server(&self, s: &Scenario) -> bool {
        s.machine.has_device()
            || matches!(s.machine, scenario::Machine::Module(_))
                && self.foreign_device() == Some(Device::Ours)
    }

    /// The device of the foreign module built for this kernel, if one did.
    fn foreign_device(&self) -> Option<Device> {
        Some(self.p.foreign.as_ref()?.as_ref().ok()?.device)
    }

    pub(super) fn guest<'a>(&'a self, s: &Scenario, dir: &'a Path) -> Guest<'a> {
        let arch = self.p.kernel.arch;
        let path = self.dma_path.for_scenario(s, arch);
        let mut g = Guest {
            arch,
            qemu: &self.tc.qemu,
            kernel: &self.p.image,
            hz: self.p.hz,
            initrd: &self.p.initrd,
            cmdline: match s.check {
                Check::Sweep(sample) => format!(
                    "pcirig.scenario={} {} {}",
                    s.script_name(),
                    s.cmdline,
                    crate::sweep::cmdline(&self.sweep.points(self.p.kernel.arch, sample))
                ),
                _ => format!("pcirig.scenario={} {}", s.script_name(), s.cmdline),
            },
            dir,
            extra_args: path
                .qemu_args(arch)
                .iter()
                .copied()
                .chain(s.stock_devices.iter().flat_map(|d| ["-device", d]))
                .chain(s.machine.qemu_args(self.p.kernel.arch).iter().copied())
                .map(str::to_string)
                .collect(),
        };
        g.cmdline.push_str(path.cmdline(arch));
        if let (scenario::Machine::Module(_), Some(Ok(m))) = (s.machine, &self.p.foreign) {
            g.cmdline.push_str(&m.cmdline());
            if s.script_name() == scenario::MODULE_SWEEP.name {
                g.cmdline.push(' ');
                g.cmdline
                    .push_str(&crate::sweep::cmdline(&crate::sweep::foreign()));
            }
            if m.device == Device::Testdev {
                g.extra_args.extend([
                    "-device".into(),
                    format!("pci-testdev,bus=rp0,id={}", device::QEMU_ID),
                ]);
            }
        }
        if matches!(s.check, Check::Driver(_) | Check::Sweep(_)) {
            // The DMA core's own record of every mapping, on the console in printk order with
            // the driver's lines (judge/dma_core.rs).
            g.cmdline.push_str(crate::judge::dma_core::CMDLINE);
        }
        if let Some(so) = self.vcpu_yield {
            g.extra_args
                .extend(["-plugin".into(), so.display().to_string()]);
        }
        g
    }

    /// Boots once, with a fresh device server when the scenario wants one,
    /// and returns the console, what the servers left (the first one, then
    /// one per hot-plug the guest asked for) and what the host timed:
    /// `device_del_to_remove_ms`, from sending the first device_del to the
    /// driver's `remove_begin` line arriving.
    fn boot(&self, s: &Scenario, dir: &Path) -> Result<(Console, Vec<Stopped>, Timings)> {
        let dir = qemu::boot_dir(dir)?;
        let sockets = qemu::socket_dir(&dir)?;
        let bin = match (self.with_server(s), self.device) {
            (true, Some(bin)) => Some(bin),
            (true, None) => bail!(
                "scenario {} needs the device server, which was not built",
                s.name
            ),
            (false, _) => None,
        };
        let servers = match bin {
            Some(bin) => vec![self.first_server(s, bin, &dir, &sockets)?],
            None => Vec::new(),
        };
        let mut g = self.guest(s, &dir);
        let oracle = self.attach(s, &dir, &mut g, servers.first())?;
        self.watch(&dir, &mut g)?;
        let mut host = HostSide::new(&dir, bin, servers, oracle)?;
        let console = g.run(s.timeout, |line, qmp, console_in| {
            host.on_line(line, qmp, console_in)
        });
        let server_dirs: Vec<String> = host
            .servers
            .iter()
            .map(|server| match server.dir.strip_prefix(&dir) {
                Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
                Ok(rel) => rel.display().to_string(),
                Err(_) => server.dir.display().to_string(),
            })
            .collect();
        let stopped = std::mem::take(&mut host.servers)
            .into_iter()
            .map(DeviceServer::stop)
            .collect::<Result<Vec<_>>>()?;
        if sockets != dir {
            let _ = std::fs::remove_dir_all(&sockets);
        }
        let mut console = console.map_err(|e| {
            let stderr = std::fs::read_to_string(dir.join("qemu-stderr.log")).unwrap_or_default();
            match (oracle, crate::guest::oracle::refused(&stderr)) {
                (true, Some(why)) => anyhow::anyhow!("{why}"),
                _ => e,
            }
        })?;
        console.host_failures = host.failures;
        console.injected_ns = host.injected_ns;
        console.marks = host.marks;
        if oracle {
            let log = crate::guest::oracle::read(&dir.join(crate::judge::oracle::LOG));
            console.oracle = Some(log.map(|mut log| {
                log.host = host.armed;
                log
            }));
        }
        seal(&dir, s, &console, &stopped, &server_dirs)?;
        Ok((console, stopped, host.timings))
    }

    /// The device server a boot starts with, its logs in `dir`, its sockets in `sockets`.
    fn first_server(
        &self,
        s: &Scenario,
        bin: &Path,
        dir: &Path,
        sockets: &Path,
    ) -> Result<DeviceServer> {
        let delay = dma_delay_us(self.sweep, self.p.kernel.arch, s);
        let mut server = DeviceServer::start(bin, dir, sockets, delay)?;
        // The sweep's servers may die at a write (`die`); PCI_RIG_POSTED_WRITES=on keeps
        // QEMU's posted writes there, to reproduce its abort (docs/sweep.md).
        let posted = std::env::var("PCI_RIG_POSTED_WRITES").is_ok_and(|v| v == "on");
        // A foreign module's accesses are placed against the host's marks by the time the
        // device saw them: an unposted write reached it before the guest went on.
        server.unposted_writes =
            matches!(s.check, Check::Sweep(_) | Check::Module { .. }) && !posted;
        Ok(server)
    }

    /// Gives the guest what `s` boots with besides the kernel: its device tree, our device
    /// (`server`), the MMIO oracle's plugin. Returns whether the oracle watches.
    fn attach(
        &self,
        s: &Scenario,
        dir: &Path,
        g: &mut Guest<'_>,
        server: Option<&DeviceServer>,
    ) -> Result<bool> {
        let mut node_window = None;
        if let scenario::Machine::DeviceTree(edit) = s.machine {
            let dt = crate::guest::dt::prepare(&self.tc.qemu, g.arch, dir, edit)?;
            g.extra_args
                .extend(["-dtb".into(), dt.dtb.display().to_string()]);
            node_window = dt.window;
        }
        if let Some(server) = server {
            g.extra_args
                .extend(["-device".into(), server.qemu_device()]);
        }
        // The oracle watches the machine's PCI windows in every boot with
        // our device, except the benchmark's, whose figures are MMIO costs
        // it would distort; and the platform demo node's window.
        let watched = s.machine.has_device()
            || matches!(s.check, Check::UpstreamPci { .. } | Check::Module { .. });
        let windows = if watched && !matches!(s.check, Check::Bench) {
            Some(crate::guest::oracle::windows(g.arch).to_vec())
        } else {
            node_window.map(|w| vec![w])
        };
        let Some((so, windows)) = self.oracle.zip(windows) else {
            return Ok(false);
        };
        // Armed late: the guest asks once it has booted (images/init).
        let arm = dir.join(crate::guest::oracle::ARM);
        let _ = std::fs::remove_file(&arm);
        let log = dir.join(crate::judge::oracle::LOG);
        g.extra_args.extend([
            "-plugin".into(),
            crate::guest::oracle::plugin_arg(so, &windows, &log, &arm),
        ]);
        g.cmdline.push(' ');
        g.cmdline.push_str(crate::guest::oracle::CMDLINE);
        Ok(true)
    }

    /// Loads the coverage plugin, and leaves its manifest in the boot's
    /// folder beside the record it will write.
    fn watch(&self, dir: &Path, g: &mut Guest<'_>) -> Result<()> {
        let (Some(so), Some(watch)) = (self.coverage, &self.p.watch) else {
            return Ok(());
        };
        std::fs::write(dir.join(::coverage::MANIFEST), watch.manifest.to_text())?;
        g.extra_args.extend([
            "-plugin".into(),
            super::coverage::plugin_arg(so, &watch.ranges, &dir.join(::coverage::BLOCKS)),
        ]);
        Ok(())
    }

    /// Runs one scenario and judges it; a pass also gives what was timed.
    pub(super) fn run_scenario(&self, s: &Scenario, dir: &Path) -> Judgement {
        let arch = self.p.kernel.arch;
        let arches = s.machine.arches();
        if !arches.contains(&arch) {
            let on: Vec<&str> = arches.iter().map(|a| a.name()).collect();
            return Judgement::plain(
                Verdict::Skip,
                format!(
                    "{} only; not applicable to {arch}{}",
                    on.join(", "),
                    s.machine.skip_reason()
                ),
            );
        }
        if let (true, Err(e)) = (s.needs_driver(), &self.p.driver) {
            return Judgement::plain(Verdict::Fail, format!("the driver did not build: {e}"));
        }
        if let (scenario::Machine::DeviceTree(_), Err(e)) = (s.machine, &self.p.platform) {
            return Judgement::plain(Verdict::Fail, e.clone());
        }
        if let Check::Module { ours_only } = s.check {
            match &self.p.foreign {
                None => {
                    return Judgement::plain(
                        Verdict::Fail,
                        format!("{} runs a module given with --module DIR; none was", s.name),
                    )
                }
                Some(Err(e)) => {
                    return Judgement::plain(
                        Verdict::Fail,
                        format!("the module given with --module did not build: {e}"),
                    )
                }
                Some(Ok(m)) if ours_only && m.device == Device::Testdev => {
                    return Judgement::plain(
                        Verdict::Skip,
                        format!(
                            "{} binds pci-testdev, which has no fault knobs; {} needs our device",
                            m.name, s.name
                        ),
                    )
                }
                Some(Ok(_)) => {}
            }
        }
        let plain = |(verdict, reason)| Judgement::plain(verdict, reason);
        let result = match s.check {
            Check::SelfTest => self.selftest(dir).map(plain),
            Check::CompileFail => self.compile_fail().map(plain),
            Check::IdTable => self.id_table().map(plain),
            _ => {
                // A sweep's boot lasts as long as its points take.
                let budget = match s.check {
                    Check::Sweep(sample) => crate::sweep::budget(&self.sweep.points(arch, sample)),
                    _ if s.script_name() == scenario::MODULE_SWEEP.name => {
                        crate::sweep::budget(&crate::sweep::foreign())
                    }
                    _ => Duration::ZERO,
                };
                let s = &Scenario {
                    timeout: (s.timeout + budget) * self.p.slowdown,
                    ..*s
                };
                self.boot(s, dir).map(|(c, device, host)| {
                    let mut j = judge::judge(s, &c, &device);
                    if j.verdict == Verdict::Pass {
                        j.timings.extend(host);
                    }
                    if j.verdict == Verdict::Pass
                        && matches!(s.check, Check::Kunit | Check::KunitMainline)
                    {
                        match self.kunit_py(&c.lines) {
                            Ok(agreed) => j.reason.push_str(&agreed),
                            Err(e) => j = Judgement::fail(crate::verdict::Cause::Checks, e),
                        }
                    }
                    // A QEMU that failed says why on its stderr (an assertion, an abort).
                    if c.exit.is_some_and(|e| !e.success()) {
                        let stderr = std::fs::read_to_string(dir.join("qemu-stderr.log"))
                            .unwrap_or_default();
                        if let Some(last) = last_words(&stderr) {
                            j.reason.push_str(&format!("; QEMU's last words: {last}"));
                        }
                    }
                    j
                })
            }
        };
        result.unwrap_or_else(|e| Judgement::plain(Verdict::Fail, format!("could not run: {e:#}")))
    }

    /// The kernel's own KTAP parser (`kunit.py parse`, from this kernel's source tree) over the
    /// same console lines, held against our reading of them.
    fn kunit_py(&self, lines: &[String]) -> std::result::Result<String, String> {
        let script = self.p.kernel.src.join("tools/testing/kunit/kunit.py");
        let mut child = Command::new("python3")
            // No __pycache__ beside kunit.py: a user's tree (`--kernel-src`) is never written to.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .arg(&script)
            .arg("parse")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        let input = lines.join("\n") + "\n";
        let mut stdin = child.stdin.take().expect("piped");
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child
            .wait_with_output()
            .map_err(|e| format!("kunit.py parse: {e}"))?;
        let _ = writer.join();
        let text = String::from_utf8_lossy(&out.stdout);
        let theirs = judge::kunit::KunitPy::parse(&text)
            .ok_or("kunit.py parse printed no `Testing complete` line for this log")?;
        judge::kunit::agrees(lines, &theirs)
    }

    /// Builds the compile-fail module as is and once per mistake.
    fn compile_fail(&self) -> Result<(Verdict, String)> {
        let _tree = kernel::relock(&self.p.kernel)?;
        let dir = self.paths.root.join("guest-kernel/compile-fail");
        Ok(
            match modcheck::compile_fail(self.tc, &self.p.kernel, &dir) {
                Ok(note) => (Verdict::Pass, note),
                Err(e) => (Verdict::Fail, format!("{e:#}")),
            },
        )
    }

    /// Reads our driver's `.ko` and checks its PCI id table.
    fn id_table(&self) -> Result<(Verdict, String)> {
        let ko = self.p.driver.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
        let bytes = std::fs::read(ko).with_context(|| format!("reading {}", ko.display()))?;
        Ok(match modcheck::pci_id_table(&bytes) {
            Ok(t) => {
                let ids: Vec<String> = t
                    .ids
                    .iter()
                    .map(|(v, d)| format!("{v:04x}:{d:04x}"))
                    .collect();
                (
                    Verdict::Pass,
                    format!(
                        "{} entr{} ({}) in read-only {}, then a zero sentinel",
                        t.ids.len(),
                        if t.ids.len() == 1 { "y" } else { "ies" },
                        ids.join(", "),
                        t.section
                    ),
                )
            }
            Err(e) => (Verdict::Fail, format!("{}: {e:#}", ko.display())),
        })
    }

    /// Boots guests that are broken or lie on purpose and checks the harness
    /// judges each one failed for the right reason (one after the other;
    /// `cargo xtask test` runs them as jobs of their own).
    fn selftest(&self, dir: &Path) -> Result<(Verdict, String)> {
        let results = scenario::SELFTEST_CASES
            .iter()
            .map(|case| self.selftest_case(case, dir))
            .collect::<Result<Vec<_>>>()?;
        Ok(selftest_verdict(&results))
    }

    /// Boots one broken or lying guest: `Ok` with the line that says why
    /// it was judged fail, or `Err` with how the harness misjudged it.
    pub(super) fn selftest_case(
        &self,
        case: &scenario::SelfTestCase,
        dir: &Path,
    ) -> Result<SelfTestPart> {
        let s = &case.scenario;
        let arch = self.p.kernel.arch;
        if !s.machine.arches().contains(&arch) {
            return Ok(Ok(format!("{}: {NOT_HERE} {arch}", s.name)));
        }
        let (c, device, _) = self.boot(s, &dir.join(s.name))?;
        let j = judge::judge(s, &c, &device);
        // The line that says why, or the first.
        let first = j
            .reason
            .lines()
            .find(|l| l.contains(case.says))
            .or(j.reason.lines().next())
            .unwrap_or("")
            .to_string();
        Ok(if !set_up_ran(case.set_up, &c.lines) {
            Err(format!(
                "{}: its set-up did not run (no console line `{}`), so its verdict proves nothing",
                s.name,
                case.set_up.unwrap_or_default()
            ))
        } else if j.cause == Some(case.cause) && j.reason.contains(case.says) {
            Ok(format!("{}: {first}", s.name))
        } else {
            Err(format!(
                "{}: wanted {:?} saying `{}`, judged {:?}: {}",
                s.name, case.cause, case.says, j.cause, j.reason
            ))
        })
    }
}

/// Whether a selftest guest printed its set-up line (`SelfTestCase::set_up`).
pub(super) fn set_up_ran(set_up: Option<&str>, lines: &[String]) -> bool {
    set_up.is_none_or(|want| {
        lines
            .iter()
            .any(|l| console::strip_timestamp(l).starts_with(want))
    })
}

/// One harness-selftest guest's result (`Rig::selftest_case`).
pub(super) type SelfTestPart = std::result::Result<String, String>;
/// What a selftest guest whose machine this arch has not says instead.
pub(super) const NOT_HERE: &str = "not a machine of";
/// The same, with when its job started and ended.
pub(super) type TimedPart = (SelfTestPart, Instant, Instant);

/// harness-selftest's verdict over its guests' results.
pub(super) fn selftest_verdict(results: &[SelfTestPart]) -> (Verdict, String) {
    let wrong: Vec<&str> = results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .map(String::as_str)
        .collect();
    let (absent, seen): (Vec<&str>, Vec<&str>) = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(String::as_str)
        .partition(|r| r.contains(NOT_HERE));
    if wrong.is_empty() {
        let absent = if absent.is_empty() {
            String::new()
        } else {
            format!(" ({})", absent.join("; "))
        };
        (
            Verdict::Pass,
            format!(
                "all {} broken or lying guests judged fail for the right reason{absent}; {}",
                seen.len(),
                seen.join("; ")
            ),
        )
    } else {
        (
            Verdict::Fail,
            format!("the harness misjudged guests:\n{}", wrong.join("\n")),
        )
    }
}

/// The last line a program wrote to its stderr, if any.
pub(super) fn last_words(stderr: &str) -> Option<&str> {
    stderr.lines().map(str::trim).rfind(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn qemus_last_words_are_its_last_line() {
        let stderr = "qemu-system-x86_64: Unable to write to socket: Broken pipe\nqemu-system-x86_64: util/error.c:62: error_setv: Assertion `*errp == NULL' failed.\n\n";
        assert_eq!(
            super::last_words(stderr),
            Some("qemu-system-x86_64: util/error.c:62: error_setv: Assertion `*errp == NULL' failed.")
        );
        assert_eq!(super::last_words(" \n"), None);
    }

    #[test]
    fn run_ids_are_timestamps_with_the_pid() {
        let id = super::run_id();
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(parts.len(), 3, "{id}");
        assert_eq!(parts[0].len(), 8);
        assert!(parts[0].starts_with("20"), "{id}");
        assert_eq!(parts[1].len(), 6);
        assert_eq!(parts[2], std::process::id().to_string());
    }

    #[test]
    fn a_selftest_guest_not_on_this_arch_is_named_not_counted() {
        let results = vec![
            Ok("selftest-hang: timeout".to_string()),
            Ok(format!(
                "selftest-platform-late: {} x86_64",
                super::NOT_HERE
            )),
        ];
        let (v, why) = super::selftest_verdict(&results);
        assert_eq!(v, super::Verdict::Pass);
        assert!(why.starts_with("all 1 broken or lying guests judged fail for the right reason (selftest-platform-late: not a machine of x86_64); selftest-hang"), "{why}");
        let wrong = vec![
            results[0].clone(),
            Err("selftest-panic: judged pass".to_string()),
        ];
        assert_eq!(super::selftest_verdict(&wrong).0, super::Verdict::Fail);
    }

    #[test]
    fn a_selftest_case_whose_set_up_did_not_run_is_not_counted() {
        let want = Some("pcirig: devmem ran before arming");
        let ran = ["pcirig: devmem ran before arming, at 0xb0000000".to_string()];
        assert!(super::set_up_ran(want, &ran));
        assert!(super::set_up_ran(None, &[]));
        let missing = ["pcirig: oracle armed".to_string()];
        assert!(!super::set_up_ran(want, &missing));
    }
}
