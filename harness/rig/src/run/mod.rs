//! The commands: setup, build, an interactive boot, and `test`, which runs
//! the workspace's unit tests and then every chosen scenario on every chosen
//! arch, writing report.json and junit.xml into a fresh run folder.

pub mod report;
mod schedule;

use crate::arch::Arch;
use crate::guest::console;
use crate::guest::device::{self, DeviceServer, Stopped};
use crate::guest::image;
use crate::guest::qemu;
use crate::guest::qemu::{Console, Guest};
use crate::guest::qmp::Qmp;
use crate::guest::requests::{DEVICE_DONE, DEVICE_FAILED};
use crate::guest::{GuestRequest, HostAction};
use crate::host::provision::{self, Toolchain};
use crate::judge::driver;
use crate::judge::{self, Judgement};
use crate::kernel::modcheck;
use crate::kernel::{self, Flavor, Kernel};
use crate::scenario::{self, Check, Scenario};
use crate::Paths;
use anyhow::{bail, Context, Result};
use qemu_device::control::Request;
use qemu_device::model::FaultKind;
use report::{Outcome, Timings, Verdict};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

/// In-tree modules every guest image carries.
const MODULES: &[&str] = &[
    "samples/rust/rust_minimal.ko",
    "drivers/misc/lkdtm/lkdtm.ko",
];

/// The mainline line's in-tree modules: upstream's samples, its drivers under test.
const MAINLINE_MODULES: &[&str] = &[
    "samples/rust/rust_minimal.ko",
    "samples/rust/rust_driver_pci.ko",
    "samples/rust/rust_dma.ko",
    "samples/rust/rust_driver_auxiliary.ko",
];

/// A kernel and an initramfs, ready to boot.
pub struct Prepared {
    pub kernel: Kernel,
    pub image: PathBuf,
    pub initrd: PathBuf,
    /// Our driver's module, or why there is none (not asked for, or its
    /// build failed: then only the scenarios that need it fail).
    pub driver: std::result::Result<PathBuf, String>,
    /// The device-tree machines' platform modules (`guest-kernel/platform`:
    /// `pcirig_platform`, `rcpufreq_dt`), or why there are none.
    pub platform: std::result::Result<Vec<PathBuf>, String>,
    /// How many times its scenarios' timeouts a boot of this kernel gets
    /// ([`Flavor::slowdown`]).
    pub slowdown: u32,
    /// The kernel's `CONFIG_HZ`.
    pub hz: Option<u32>,
}

pub fn setup(paths: &Paths, arches: &[Arch]) -> Result<Toolchain> {
    // linux-source is installed once the host packages are: unpack it while bindgen builds.
    let tc = provision::ensure(paths, arches, || {
        kernel::unpack_source(paths, kernel::Line::Lts)
    })?;
    eprintln!("setup: cache {}", paths.cache.display());
    eprintln!("setup: bindgen {}", tc.bindgen.display());
    let qemu = tc
        .qemu
        .prefix
        .as_ref()
        .map_or("system".to_string(), |p| p.display().to_string());
    eprintln!("setup: QEMU {} ({qemu})", tc.qemu.version);
    for (a, b) in &tc.busybox {
        eprintln!("setup: busybox {a}: {}", b.display());
    }
    Ok(tc)
}

/// Builds the kernel (and our driver, when `with_driver`) and writes an
/// initramfs into `out` (the run folder, so concurrent runs never share one).
/// `modules`: where the out-of-tree modules' sources are (`guest-kernel`
/// unless a mutant's copy, [`TestOptions::modules`]).
pub fn prepare(
    paths: &Paths,
    tc: &Toolchain,
    arch: Arch,
    flavor: &Flavor,
    out: &Path,
    with_driver: bool,
    modules: Option<&Path>,
) -> Result<Prepared> {
    let tree = kernel::lock(paths, arch, flavor)?;
    let kernel = kernel::build(paths, tc, &tree, flavor)?;
    let lts = flavor.line == kernel::Line::Lts;
    let in_tree = if lts { MODULES } else { MAINLINE_MODULES };
    let guest = modules.map_or_else(|| paths.root.join("guest-kernel"), Path::to_path_buf);
    let mut modules: Vec<PathBuf> = in_tree.iter().map(|m| kernel.module(m)).collect();
    // The driver, its benchmarking sibling (loaded only by `bench`) and the
    // platform modules build in copies of their own: all at once. On
    // mainline, the driver and bench module are their ports to upstream's API.
    let (driver_dir, bench_dir) = match flavor.line {
        kernel::Line::Lts => ("driver", "bench"),
        kernel::Line::Mainline => ("driver-mainline", "bench-mainline"),
    };
    let (driver, platform) = std::thread::scope(|s| {
        let k = &kernel;
        let platform = s.spawn(|| match lts {
            true => platform_modules(tc, k, &guest.join("platform")),
            false => Err("the platform modules are the 6.12 line's".to_string()),
        });
        let driver = with_driver.then(|| {
            // The driver's generated regs.rs names the registers for all of them; its
            // selftest.rs is the mainline driver's too.
            let of_driver = |files: &[&str]| -> Vec<PathBuf> {
                files.iter().map(|f| guest.join("driver").join(f)).collect()
            };
            let (driver_shared, bench_shared) = match lts {
                true => (vec![], of_driver(&["regs.rs"])),
                false => (
                    of_driver(&["regs.rs", "selftest.rs"]),
                    of_driver(&["regs.rs"]),
                ),
            };
            let bench = guest.join(bench_dir);
            let bench = s.spawn(move || {
                kernel::module::build_external(tc, k, &bench, "pci_rig_bench", &bench_shared)
            });
            let dir = guest.join(driver_dir);
            let ko = kernel::module::build_external(tc, k, &dir, "pci_rig", &driver_shared);
            (ko, bench.join())
        });
        (driver, platform.join())
    });
    // A thread's panic goes on here.
    let platform = platform.unwrap_or_else(|p| std::panic::resume_unwind(p));
    // The driver's failure first, then the bench module's, as when the
    // bench module was built only after the driver.
    let driver = match driver {
        Some((driver, bench)) => {
            let bench = bench.unwrap_or_else(|p| std::panic::resume_unwind(p));
            driver
                .and_then(|ko| {
                    modules.push(bench?);
                    Ok(ko)
                })
                .inspect(|ko| modules.push(ko.clone()))
                .map_err(|e| format!("{e:#}"))
        }
        None => Err("the driver was not asked for".to_string()),
    };
    if let Err(e) = &driver {
        if with_driver {
            eprintln!("build: {arch}: the driver did not build; its scenarios will fail:\n{e}");
        }
    }
    match &platform {
        Ok(kos) => modules.extend(kos.iter().cloned()),
        Err(e) => eprintln!("build: {arch}: {e}"),
    }
    drop(tree);
    let initrd = match flavor.line {
        kernel::Line::Lts => out.join(format!("{arch}-initramfs.cpio")),
        line => out.join(format!("{arch}-{}-initramfs.cpio", line.name())),
    };
    image::build(
        &image::Contents {
            busybox: &tc.busybox[&arch],
            images: &paths.root.join("images"),
            scripts: &scenario::scripts(),
            modules: &modules,
        },
        &initrd,
    )?;
    Ok(Prepared {
        image: kernel.image(),
        hz: kernel.hz(),
        kernel,
        initrd,
        driver,
        platform,
        slowdown: flavor.slowdown(),
    })
}

/// Builds `guest-kernel/platform` (two modules, one Kbuild) on the
/// device-tree machines; x86_64 has no device tree for them to bind.
fn platform_modules(
    tc: &Toolchain,
    kernel: &Kernel,
    dir: &Path,
) -> std::result::Result<Vec<PathBuf>, String> {
    if kernel.arch == Arch::X86_64 {
        return Err("the platform modules are for device-tree machines (arm64, riscv64)".into());
    }
    let first = kernel::module::build_module_copy(tc, kernel, dir, &[], "platform", "pcirig_platform", &[])
        .map_err(|e| format!("the platform modules did not build; the platform and cpufreq scenarios will fail:\n{e:#}"))?;
    let second = first.with_file_name("rcpufreq_dt.ko");
    Ok(vec![first, second])
}

/// `cargo xtask run`: boots to a shell on this terminal, with our device
/// attached (its control socket is printed, for poking knobs by hand).
pub fn interactive(paths: &Paths, arch: Arch, flavor: &Flavor) -> Result<()> {
    let tc = provision::ensure(paths, &[arch], || {
        kernel::unpack_source(paths, kernel::Line::Lts)
    })?;
    let run_dir = new_run_dir(paths)?;
    let p = prepare(paths, &tc, arch, flavor, &run_dir, true, None)?;
    let bin = device::build_server(paths)?;
    let dir = boot_dir(&run_dir.join(format!("{arch}-shell")))?;
    let server = DeviceServer::start(&bin, &dir, &qemu::socket_dir(&dir)?, 0)?;
    eprintln!(
        "run: booting {arch}; Ctrl-A X quits QEMU (logs: {})",
        dir.display()
    );
    eprintln!("run: device control socket: {}", server.control.display());
    let rig = Rig {
        paths,
        tc: &tc,
        p: &p,
        device: None,
        oracle: None,
        vcpu_yield: None,
        sweep: &crate::sweep::Plan::All,
        dma_path: DmaPath::Direct,
    };
    let mut g = rig.guest(&Scenario::runner("shell", "", Duration::MAX), &dir);
    g.extra_args = vec!["-device".into(), server.qemu_device()];
    g.interactive()?;
    server.stop()?;
    Ok(())
}

/// A boot's folder, private to the user (sockets live there).
fn boot_dir(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(dir.to_path_buf())
}

/// How long after its doorbell a boot's device runs each DMA: from 100 to 999 µs, drawn from
/// the run's seed (the sweep's, printed: `--sweep-seed` replays it), the arch and the
/// scenario, so that a driver cannot rely on a DMA being done at any moment but its interrupt.
/// The benchmarks' boots run each at the doorbell, so that their DMA figures stay the engine's.
fn dma_delay_us(plan: &crate::sweep::Plan, arch: Arch, s: &Scenario) -> u64 {
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
struct Rig<'a> {
    paths: &'a Paths,
    tc: &'a Toolchain,
    p: &'a Prepared,
    /// The device server binary, when some scenario attaches it.
    device: Option<&'a Path>,
    /// The MMIO oracle plugin (`oracle`), loaded with the device.
    oracle: Option<&'a Path>,
    /// The `vcpu-yield` plugin: a vCPU spinning at a wait hint yields its
    /// host CPU (several two-vCPU guests share two cores).
    vcpu_yield: Option<&'a Path>,
    /// The removal-point sweep's plan (the `sweep` scenarios).
    sweep: &'a crate::sweep::Plan,
    dma_path: DmaPath,
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
        match (self, arch) {
            (DmaPath::Iommu, Arch::Riscv64) => Some(
                "riscv64 has no vIOMMU driver on 6.12 (VIRTIO_IOMMU is ARM64 || X86 there, \
                 riscv-iommu came later): use --bounce there",
            ),
            _ => None,
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
    fn guest<'a>(&'a self, s: &Scenario, dir: &'a Path) -> Guest<'a> {
        let arch = self.p.kernel.arch;
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
            extra_args: self
                .dma_path
                .qemu_args(arch)
                .iter()
                .copied()
                .chain(s.stock_devices.iter().flat_map(|d| ["-device", d]))
                .chain(s.machine.qemu_args(self.p.kernel.arch).iter().copied())
                .map(str::to_string)
                .collect(),
        };
        g.cmdline.push_str(self.dma_path.cmdline(arch));
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
        let dir = boot_dir(dir)?;
        let sockets = qemu::socket_dir(&dir)?;
        let bin = match (s.machine.has_device(), self.device) {
            (true, Some(bin)) => Some(bin),
            (true, None) => bail!(
                "scenario {} needs the device server, which was not built",
                s.name
            ),
            (false, _) => None,
        };
        let mut servers = Vec::new();
        if let Some(bin) = bin {
            let delay = dma_delay_us(self.sweep, self.p.kernel.arch, s);
            let mut server = DeviceServer::start(bin, &dir, &sockets, delay)?;
            // The sweep's servers may die at a write (`die`); PCI_RIG_POSTED_WRITES=on keeps
            // QEMU's posted writes there, to reproduce its abort (docs/sweep.md).
            let posted = std::env::var("PCI_RIG_POSTED_WRITES").is_ok_and(|v| v == "on");
            server.unposted_writes = matches!(s.check, Check::Sweep(_)) && !posted;
            servers.push(server);
        }
        let mut g = self.guest(s, &dir);
        let mut node_window = None;
        if let scenario::Machine::DeviceTree(edit) = s.machine {
            let dt = crate::guest::dt::prepare(&self.tc.qemu, g.arch, &dir, edit)?;
            g.extra_args
                .extend(["-dtb".into(), dt.dtb.display().to_string()]);
            node_window = dt.window;
        }
        if let Some(server) = servers.first() {
            g.extra_args
                .extend(["-device".into(), server.qemu_device()]);
        }
        // The oracle watches the machine's PCI windows in every boot with
        // our device, except the benchmark's, whose figures are MMIO costs
        // it would distort; and the platform demo node's window.
        let watched = s.machine.has_device() || matches!(s.check, Check::UpstreamPci { .. });
        let windows = if watched && !matches!(s.check, Check::Bench) {
            Some(crate::guest::oracle::windows(g.arch).to_vec())
        } else {
            node_window.map(|w| vec![w])
        };
        let oracle = self.oracle.zip(windows);
        let oracle_log = dir.join(crate::judge::oracle::LOG);
        if let Some((so, windows)) = &oracle {
            // Armed late: the guest asks once it has booted (images/init).
            let arm = dir.join(crate::guest::oracle::ARM);
            let _ = std::fs::remove_file(&arm);
            g.extra_args.extend([
                "-plugin".into(),
                crate::guest::oracle::plugin_arg(so, windows, &oracle_log, &arm),
            ]);
            g.cmdline.push(' ');
            g.cmdline.push_str(crate::guest::oracle::CMDLINE);
        }
        let mut actions = std::fs::File::create(dir.join("host-actions.log"))?;
        let mut failures = Vec::new();
        let mut unplugs = 0;
        let mut unplugged_at: Option<Instant> = None;
        let mut timings = Timings::new();
        let mut line_no = 0;
        let mut armed: Option<crate::judge::oracle::HostArmed> = None;
        let mut injected_ns = Vec::new();
        // A fault armed for the host to carry out when it strikes (`aer`, `unplug`).
        let mut watching: Option<FaultKind> = None;
        let console = g.run(s.timeout, |line, qmp, console_in| {
            let text = console::strip_timestamp(line);
            line_no += 1;
            if let Some(kind) = watching {
                // The driver prints a line per access: the strike is seen within one line.
                if let Some(at) = struck(servers.last()) {
                    watching = None;
                    if kind == FaultKind::Unplug {
                        unplugged_at = Some(Instant::now());
                    }
                    let result = match kind {
                        FaultKind::Unplug => host_action(
                            HostAction::Unplug,
                            qmp,
                            bin,
                            &dir,
                            &mut servers,
                            &mut unplugs,
                        ),
                        FaultKind::Aer => {
                            host_action(AER_AT_STRIKE, qmp, bin, &dir, &mut servers, &mut unplugs)
                                .inspect(|_| {
                                    injected_ns.push(qemu_device::transport::monotonic_ns())
                                })
                        }
                        _ => Err(anyhow::anyhow!("the host carries out no {kind} fault")),
                    }
                    .unwrap_or_else(|e| {
                        failures.push(format!("the {kind} fault that struck #{at}: {e:#}"));
                        format!("error: {e:#}")
                    });
                    writeln!(actions, "{kind} fault struck access #{at} -> {result}")?;
                }
            }
            match GuestRequest::parse(text) {
                None => {}
                Some(Err(e)) => {
                    failures.push(format!("`{text}`: {e}"));
                    writeln!(actions, "{text} -> error: {e}")?;
                }
                Some(Ok(GuestRequest::Device {
                    json,
                    must_refuse,
                    answer,
                })) => {
                    let (logged, failure) = device_request(servers.last(), json, must_refuse);
                    if let Ok(Request::ArmFault { kind, .. }) = serde_json::from_str(json) {
                        let host_acts = matches!(kind, FaultKind::Aer | FaultKind::Unplug);
                        watching = (failure.is_none() && host_acts).then_some(kind);
                    }
                    if answer {
                        let done = failure.is_none();
                        let says = if done { DEVICE_DONE } else { DEVICE_FAILED };
                        writeln!(console_in, "{says}")?;
                        console_in.flush()?;
                    }
                    failures.extend(failure);
                    writeln!(actions, "{json} -> {logged}")?;
                }
                Some(Ok(GuestRequest::Host(HostAction::ArmOracle))) => {
                    // Arm the MMIO oracle, and answer the guest (which waits
                    // for it on its console) once it is armed.
                    let t = Instant::now();
                    let result = arm_oracle(oracle.is_some(), &dir, servers.last(), console_in)
                        .map(|device_next_seq| {
                            armed = Some(crate::judge::oracle::HostArmed {
                                line: line_no - 1,
                                device_next_seq,
                            });
                            format!(
                                "armed after {:.0} ms; the device's next access is #{}",
                                t.elapsed().as_secs_f64() * 1000.0,
                                device_next_seq.map_or("-".to_string(), |n| n.to_string())
                            )
                        })
                        .unwrap_or_else(|e| {
                            failures.push(format!("{text}: {e:#}"));
                            format!("error: {e:#}")
                        });
                    writeln!(actions, "{text} -> {result}")?;
                }
                Some(Ok(GuestRequest::Host(action))) => {
                    if action == HostAction::Unplug {
                        unplugged_at = Some(Instant::now());
                    }
                    let result = host_action(action, qmp, bin, &dir, &mut servers, &mut unplugs)
                        .inspect(|_| {
                            if matches!(action, HostAction::Aer { .. }) {
                                injected_ns.push(qemu_device::transport::monotonic_ns());
                            }
                        })
                        .unwrap_or_else(|e| {
                            failures.push(format!("{text}: {e:#}"));
                            format!("error: {e:#}")
                        });
                    writeln!(actions, "{text} -> {result}")?;
                }
            }
            if driver::is_event(line, "remove_begin") {
                if let Some(at) = unplugged_at.take() {
                    let ms = at.elapsed().as_secs_f64() * 1000.0;
                    timings.entry("device_del_to_remove_ms").or_insert(ms);
                    writeln!(actions, "guest remove() began {ms:.1} ms after device_del")?;
                }
            }
            Ok(())
        });
        let server_dirs: Vec<String> = servers
            .iter()
            .map(|s| {
                let rel = s.dir.strip_prefix(&dir).unwrap_or(&s.dir);
                match rel.to_str() {
                    Some("") => ".".to_string(),
                    _ => rel.display().to_string(),
                }
            })
            .collect();
        let stopped = servers
            .into_iter()
            .map(DeviceServer::stop)
            .collect::<Result<Vec<_>>>()?;
        if sockets != dir {
            let _ = std::fs::remove_dir_all(&sockets);
        }
        let mut console = console.map_err(|e| {
            let stderr = std::fs::read_to_string(dir.join("qemu-stderr.log")).unwrap_or_default();
            match (&oracle, crate::guest::oracle::refused(&stderr)) {
                (Some(_), Some(why)) => anyhow::anyhow!("{why}"),
                _ => e,
            }
        })?;
        console.host_failures = failures;
        console.injected_ns = injected_ns;
        if oracle.is_some() {
            console.oracle = Some(crate::guest::oracle::read(&oracle_log).map(|mut log| {
                log.host = armed;
                log
            }));
        }
        seal(&dir, s, &console, &stopped, &server_dirs)?;
        Ok((console, stopped, timings))
    }

    /// Runs one scenario and judges it; a pass also gives what was timed.
    fn run_scenario(&self, s: &Scenario, dir: &Path) -> Judgement {
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
        let plain = |(verdict, reason)| Judgement::plain(verdict, reason);
        let result = match s.check {
            Check::SelfTest => self.selftest(dir).map(plain),
            Check::CompileFail => self.compile_fail().map(plain),
            Check::IdTable => self.id_table().map(plain),
            _ => {
                // A sweep's boot lasts as long as its points take.
                let budget = match s.check {
                    Check::Sweep(sample) => crate::sweep::budget(&self.sweep.points(arch, sample)),
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
    fn selftest_case(&self, case: &scenario::SelfTestCase, dir: &Path) -> Result<SelfTestPart> {
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
fn set_up_ran(set_up: Option<&str>, lines: &[String]) -> bool {
    set_up.is_none_or(|want| {
        lines
            .iter()
            .any(|l| console::strip_timestamp(l).starts_with(want))
    })
}

/// One harness-selftest guest's result (`Rig::selftest_case`).
type SelfTestPart = std::result::Result<String, String>;
/// What a selftest guest whose machine this arch has not says instead.
const NOT_HERE: &str = "not a machine of";
/// The same, with when its job started and ended.
type TimedPart = (SelfTestPart, Instant, Instant);

/// harness-selftest's verdict over its guests' results.
fn selftest_verdict(results: &[SelfTestPart]) -> (Verdict, String) {
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

/// The last line a program wrote to its stderr, if any.
fn last_words(stderr: &str) -> Option<&str> {
    stderr.lines().map(str::trim).rfind(|l| !l.is_empty())
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
fn host_action(
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
            let d = boot_dir(&dir.join(format!("replug-{}", servers.len())))?;
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

/// A UTC timestamp plus the pid: unique even for two runs started in the
/// same second.
pub fn run_id() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        std::process::id()
    )
}

/// Leaves a boot's evidence at rest in its folder (`judge::Sealed`): `console.log`, the lines
/// as the judge reads them, and `evidence.json`, the rest; `rejudge` reads them back.
fn seal(
    dir: &Path,
    s: &Scenario,
    c: &judge::Console,
    device: &[Stopped],
    server_dirs: &[String],
) -> Result<()> {
    let mut lines = c.lines.join("\n");
    lines.push('\n');
    std::fs::write(dir.join(CONSOLE_LOG), lines)?;
    let sealed = judge::seal(s.name, c, device, server_dirs);
    std::fs::write(dir.join(EVIDENCE), serde_json::to_string_pretty(&sealed)?)?;
    Ok(())
}

/// A boot's console as the judge read it, and the rest of its evidence (see [`seal`]).
pub const CONSOLE_LOG: &str = "console.log";
pub const EVIDENCE: &str = "evidence.json";

/// Judges a boot again from what it left in `dir` (`cargo xtask judge DIR`): the verdict it
/// would get now, from the same evidence.
pub fn rejudge(dir: &Path) -> Result<Judgement> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).with_context(|| {
            format!(
                "reading {} (a boot folder of pci-rig 0.1 or newer has it)",
                dir.join(name).display()
            )
        })
    };
    let sealed: judge::Sealed = serde_json::from_str(&read(EVIDENCE)?)
        .with_context(|| format!("parsing {}", dir.join(EVIDENCE).display()))?;
    let scenario = crate::scenario::find(&sealed.scenario).map_err(anyhow::Error::msg)?;
    let console = read(CONSOLE_LOG)?;
    let mut texts = Vec::new();
    for server in &sealed.servers {
        let d = dir.join(&server.dir);
        let text = |name: &str| std::fs::read_to_string(d.join(name)).unwrap_or_default();
        texts.push((text("device-access.jsonl"), text("device-dma.jsonl")));
    }
    let logs: Vec<judge::ServerLogs<'_>> = texts
        .iter()
        .map(|(access, dma)| judge::ServerLogs { access, dma })
        .collect();
    let oracle = std::fs::read_to_string(dir.join(judge::oracle::LOG)).ok();
    let (c, device) =
        judge::unseal(&sealed, &console, &logs, oracle.as_deref()).map_err(anyhow::Error::msg)?;
    Ok(judge::judge(scenario, &c, &device))
}

/// Makes `target/pci-rig/<run-id>` and points `target/pci-rig/latest` at it.
pub fn new_run_dir(paths: &Paths) -> Result<PathBuf> {
    let id = run_id();
    let dir = paths.results().join(&id);
    std::fs::create_dir_all(&dir)?;
    let tmp = paths
        .results()
        .join(format!(".latest-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&id, &tmp)?;
    std::fs::rename(&tmp, paths.results().join("latest"))?;
    Ok(dir)
}

/// The crates that must not spawn, touch files or read a clock: their `clippy.toml` bans those
/// calls, and [`cargo_test`] lints them for it.
pub const PURE_CRATES: &[&str] = &["vocab", "judge"];

/// `cargo test --workspace`, then clippy over [`PURE_CRATES`] with only their bans as errors;
/// the output of both in `cargo-test.log` (it runs while the guests boot; a failure prints the
/// log's tail).
fn cargo_test(paths: &Paths, dir: &Path) -> Outcome {
    eprintln!(
        "test: cargo test --workspace, clippy's bans on {} (output: cargo-test.log)",
        PURE_CRATES.join(", ")
    );
    let started = Instant::now();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let log = dir.join("cargo-test.log");
    let mut lint = vec!["clippy"];
    for c in PURE_CRATES {
        lint.extend(["-p", c]);
    }
    lint.extend([
        "--lib",
        "--",
        "-A",
        "clippy::all",
        "-D",
        "clippy::disallowed_methods",
        "-D",
        "clippy::disallowed_types",
    ]);
    let status = std::fs::File::create(&log).and_then(|out| {
        for args in [&["test", "--workspace"][..], &lint] {
            let s = Command::new(&cargo)
                .args(args)
                .current_dir(&paths.root)
                .stdin(std::process::Stdio::null())
                .stdout(out.try_clone()?)
                .stderr(out.try_clone()?)
                .status()?;
            if !s.success() {
                return Ok(s);
            }
        }
        Ok(std::process::ExitStatus::default())
    });
    let (verdict, reason) = match status {
        Ok(s) if s.success() => (
            Verdict::Pass,
            "all workspace tests passed; the pure crates spawn, open and time nothing".to_string(),
        ),
        Ok(s) => {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            (
                Verdict::Fail,
                format!(
                    "cargo test --workspace or the pure crates' lint failed ({s}); the end of {}:\n{}",
                    log.display(),
                    crate::host::process::tail(&text, 40)
                ),
            )
        }
        Err(e) => (Verdict::Fail, format!("could not run cargo: {e}")),
    };
    eprintln!(
        "test: host cargo-test: {verdict:?} in {:.1} s — {}",
        started.elapsed().as_secs_f64(),
        reason.lines().next().unwrap_or("")
    );
    Outcome {
        arch: "host".into(),
        scenario: "cargo-test".into(),
        verdict,
        duration_s: started.elapsed().as_secs_f64(),
        log: dir.display().to_string(),
        reason,
        timings: Timings::new(),
        findings: Default::default(),
    }
}

#[derive(Clone)]
pub struct TestOptions {
    /// Where the 6.12 line's scenarios run.
    pub arches: Vec<Arch>,
    /// Where the mainline line's scenarios (`Scenario::line`) run: by default x86_64 alone.
    pub mainline_arches: Vec<Arch>,
    pub scenarios: Vec<&'static Scenario>,
    pub flavor: Flavor,
    pub unit_tests: bool,
    /// Runs of each scenario (soak: many).
    pub repeat: usize,
    /// Arches run at once.
    pub jobs: usize,
    /// The `sweep` scenario's points.
    pub sweep: crate::sweep::Plan,
    /// Build the out-of-tree modules (driver, bench, platform) from this copy of
    /// `guest-kernel` instead (`cargo xtask mutate`'s mutants).
    pub modules: Option<PathBuf>,
    /// Boot this device server instead of building `qemu-device` (a device mutant's).
    pub device: Option<PathBuf>,
    pub dma_path: DmaPath,
}

/// `cargo xtask test`. Returns whether every verdict passed.
pub fn test(paths: &Paths, opts: &TestOptions) -> Result<bool> {
    let dir = new_run_dir(paths)?;
    eprintln!("test: results in {}", dir.display());
    for s in &opts.scenarios {
        let Check::Sweep(sample) = s.check else {
            continue;
        };
        for &arch in opts
            .arches
            .iter()
            .filter(|a| s.machine.arches().contains(a))
        {
            let points = opts.sweep.points(arch, sample);
            let line = crate::sweep::cmdline(&points);
            if line.len() > crate::sweep::CMDLINE_MAX {
                bail!(
                    "{arch} {}: {} points make a kernel command line of {} characters, more than the {} the kernel prints whole (the judge reads the points back from it): ask for fewer, or for neighbouring ones, which go as runs (KIND:A-B)",
                    s.name,
                    points.len(),
                    line.len(),
                    crate::sweep::CMDLINE_MAX
                );
            }
            eprintln!(
                "test: {arch} {}: {} points ({}; replay: cargo xtask test --arch {arch} --scenario {} {})",
                s.name,
                points.len(),
                crate::sweep::cmdline(&points),
                s.name,
                opts.sweep.replay()
            );
        }
    }
    if opts.scenarios.iter().any(|s| s.machine.has_device()) {
        let seed = match &opts.sweep {
            crate::sweep::Plan::Sample(seed) => seed.to_string(),
            _ => "0 (the sweep's points were named)".to_string(),
        };
        eprintln!(
            "test: each boot's device runs a DMA 100-999 µs after its doorbell, drawn from seed {seed} with the arch and scenario (`--sweep-seed` replays it)"
        );
    }
    // x86_64's boots pass the host's TSC frequency, measured over 50 ms:
    // measured beside the builds, not before the first boot.
    if opts.arches.contains(&Arch::X86_64) {
        std::thread::spawn(crate::host::tsc::host_tsc_khz);
    }
    // The unit tests run beside the guests: neither waits for the other.
    let (unit, boots) = std::thread::scope(|scope| {
        let unit = opts
            .unit_tests
            .then(|| scope.spawn(|| cargo_test(paths, &dir)));
        let boots = scenarios(paths, opts, &dir);
        (unit.map(|t| t.join().expect("cargo test's thread")), boots)
    });
    let mut results: Vec<Outcome> = unit.into_iter().collect();
    results.extend(boots?);
    report::write_files(&dir, &results)?;
    for o in results.iter().filter(|o| !o.findings.sweep.is_empty()) {
        let chart = paths.root.join(&o.log).join("sweep.svg");
        let title = format!(
            "{} {}: {} points",
            o.arch,
            o.scenario,
            o.findings.sweep.len()
        );
        std::fs::write(&chart, judge::sweep::chart(&title, &o.findings.sweep))
            .with_context(|| format!("writing {}", chart.display()))?;
        println!(
            "\n{title} (chart: {})\n{}",
            chart.display(),
            judge::sweep::table(&o.findings.sweep)
        );
    }
    if opts.repeat == 1 {
        println!("\n{}", report::table(&results));
    } else {
        println!("\n{}", report::table(&report::per_scenario(&results)));
    }
    let phases = report::phase_summary(&results);
    if !phases.is_empty() {
        println!(
            "\nwhere the passing boots' time went (medians):\n{}",
            report::phase_table(&phases)
        );
    }
    println!("report: {}", dir.join("report.json").display());
    Ok(results.iter().all(|r| r.verdict != Verdict::Fail))
}

/// The host programs the boots use, built by cargo beside the kernels and modules.
struct HostBins {
    /// The device server, when a scenario has our device.
    device: Option<PathBuf>,
    /// The MMIO oracle's plugin, when a scenario's device is watched.
    oracle: Option<PathBuf>,
    /// The `vcpu-yield` plugin, when the run's vCPUs outnumber the CPUs.
    vcpu_yield: Option<PathBuf>,
}

/// `boots_at_once`: the most guests the run boots at the same time.
fn host_bins(paths: &Paths, opts: &TestOptions, boots_at_once: usize) -> Result<HostBins> {
    let device = match &opts.device {
        _ if !opts.scenarios.iter().any(|s| s.machine.has_device()) => None,
        Some(server) => Some(server.clone()),
        None => Some(device::build_server(paths)?),
    };
    // PCI_RIG_ORACLE=off boots without the plugin (to measure what it costs).
    let oracle_off = std::env::var("PCI_RIG_ORACLE").is_ok_and(|v| v == "off");
    let watched = opts.scenarios.iter().any(|s| {
        s.machine.has_device()
            || s.machine == scenario::Machine::DeviceTree(crate::guest::dt::Edit::Platform)
            || matches!(s.check, Check::UpstreamPci { .. })
    });
    // vcpu-yield pays only where vCPUs outnumber the host's CPUs: a boot
    // alone pays for its translation callbacks and gains nothing (`probe`
    // alone on x86_64, 6 interleaved pairs: 1.49 s without, 1.62 s with).
    // PCI_RIG_VCPU_YIELD=off boots without it (to measure what it saves).
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let oversubscribed = boots_at_once * crate::arch::VCPUS > cpus;
    let yield_off = std::env::var("PCI_RIG_VCPU_YIELD").is_ok_and(|v| v == "off");
    let plugins = crate::host::plugins::build(paths)?;
    Ok(HostBins {
        device,
        oracle: (watched && !oracle_off).then_some(plugins.oracle),
        vcpu_yield: (oversubscribed && !yield_off).then_some(plugins.vcpu_yield),
    })
}

/// Where a run boots: an arch's kernel of one line (each builds its own).
struct Target {
    arch: Arch,
    flavor: Flavor,
    scenarios: Vec<&'static Scenario>,
}

/// Each kernel line's chosen scenarios on its arches (`opts.arches` for the 6.12 line's,
/// `opts.mainline_arches` for mainline's): the 6.12 line's targets first.
fn targets(opts: &TestOptions) -> Vec<Target> {
    let mut out = Vec::new();
    for (line, arches) in [
        (kernel::Line::Lts, &opts.arches),
        (kernel::Line::Mainline, &opts.mainline_arches),
    ] {
        let chosen: Vec<&'static Scenario> = opts
            .scenarios
            .iter()
            .copied()
            .filter(|s| s.line == line)
            .collect();
        if chosen.is_empty() {
            continue;
        }
        for &arch in arches {
            out.push(Target {
                arch,
                flavor: Flavor {
                    line,
                    ..opts.flavor.clone()
                },
                scenarios: chosen.clone(),
            });
        }
    }
    out
}

/// Runs the chosen scenarios on the chosen arches of each kernel line, logs under `dir`; a
/// verdict for each run (the unit tests are the caller's), in line and arch order. Up to
/// `opts.jobs` jobs go at once, from any arch and line, all from one board: a boot is one TCG
/// process, and much of a hot-plug scenario is waiting. Longest first (by the previous run's
/// times), so that no long boot starts last; a target's kernel and image are built by the
/// first job that needs them, and a job of a target not yet built never holds a worker while
/// another has work ready (so one line's kernel builds while the other's guests boot).
/// harness-selftest's guests are jobs of their own.
pub fn scenarios(paths: &Paths, opts: &TestOptions, dir: &Path) -> Result<Vec<Outcome>> {
    let targets = targets(opts);
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    let mut arches: Vec<Arch> = targets.iter().map(|t| t.arch).collect();
    arches.sort();
    arches.dedup();
    let tc = setup(paths, &arches).context("provisioning")?;
    // Target-major, as reported.
    let runs: Vec<(usize, &Scenario, usize)> = targets
        .iter()
        .enumerate()
        .flat_map(|(a, t)| {
            t.scenarios
                .iter()
                .flat_map(move |&s| (1..=opts.repeat).map(move |i| (a, s, i)))
        })
        .collect();
    let history = report::previous_durations(&paths.results(), dir);
    let target_arches: Vec<Arch> = targets.iter().map(|t| t.arch).collect();
    let jobs = schedule::jobs(&runs, &target_arches, &history);
    let boots_at_once = opts.jobs.clamp(1, jobs.len().max(1));
    let host = OnceLock::new();
    let runner = Runner {
        paths,
        tc: &tc,
        host: &host,
        opts,
        dir,
    };
    let board = schedule::Board::new(jobs, targets.len());
    let prepared: Vec<OnceLock<Result<Prepared>>> =
        targets.iter().map(|_| Default::default()).collect();
    let done: Vec<OnceLock<Outcome>> = runs.iter().map(|_| Default::default()).collect();
    let parts: Vec<Vec<OnceLock<TimedPart>>> = runs
        .iter()
        .map(|(_, s, _)| schedule::parts(s).map(|_| Default::default()).collect())
        .collect();
    std::thread::scope(|scope| {
        // While the first kernels and modules build (the edit loop's module, above all).
        scope.spawn(|| {
            let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                host_bins(paths, opts, boots_at_once)
            }));
            // Set even when the build panicked: every boot waits for it.
            let _ = host.set(match built {
                Ok(r) => r.map_err(|e| format!("{e:#}")),
                Err(_) => Err("building the device server or the oracle panicked".into()),
            });
        });
        for _ in 0..opts.jobs.clamp(1, board.len().max(1)) {
            scope.spawn(|| {
                while let Some(task) = board.next() {
                    match task {
                        schedule::Task::Prepare(a) => {
                            // Ready even if the build panics: no worker
                            // then waits for this arch forever.
                            let _ready = schedule::ReadyOnDrop(&board, a);
                            let t = &targets[a];
                            let with_driver = t.scenarios.iter().any(|s| s.needs_driver());
                            let _ = prepared[a].set(prepare(
                                paths,
                                &tc,
                                t.arch,
                                &t.flavor,
                                dir,
                                with_driver,
                                opts.modules.as_deref(),
                            ));
                        }
                        schedule::Task::Run(job) => {
                            let (a, s, i) = runs[job.run];
                            let arch = targets[a].arch;
                            let panicked: Result<Prepared> = Err(anyhow::anyhow!(
                                "building the {arch} kernel or image panicked"
                            ));
                            let p = prepared[a].get().unwrap_or(&panicked);
                            match job.part {
                                None => {
                                    let _ = done[job.run].set(runner.run(arch, p, s, i));
                                }
                                Some(k) => {
                                    let part = runner.selftest_part(arch, p, s, i, k);
                                    let _ = parts[job.run][k].set(part);
                                }
                            }
                        }
                    }
                }
            });
        }
    });
    if let Some(Err(e)) = host.get() {
        bail!("{e}");
    }
    Ok(runs
        .iter()
        .zip(done)
        .zip(parts)
        .filter_map(|((&(a, s, i), done), parts)| {
            done.into_inner().or_else(|| {
                let parts: Vec<TimedPart> =
                    parts.into_iter().filter_map(OnceLock::into_inner).collect();
                (!parts.is_empty()).then(|| runner.selftest_outcome(targets[a].arch, s, i, parts))
            })
        })
        .collect())
}

/// What every run of one `scenarios` call shares.
struct Runner<'a> {
    paths: &'a Paths,
    tc: &'a Toolchain,
    /// Set once cargo built them; each boot waits for it.
    host: &'a OnceLock<std::result::Result<HostBins, String>>,
    opts: &'a TestOptions,
    dir: &'a Path,
}

impl Runner<'_> {
    /// The folder of one run's logs.
    fn log_dir(&self, arch: Arch, s: &Scenario, i: usize) -> PathBuf {
        if self.opts.repeat == 1 {
            self.dir.join(format!("{arch}-{}", s.name))
        } else {
            self.dir.join(format!("{arch}-{}-{i:03}", s.name))
        }
    }

    /// Guest `k` of harness-selftest, as a job of its own; with the time
    /// it started and ended, for the run's duration.
    fn selftest_part(
        &self,
        arch: Arch,
        prepared: &Result<Prepared>,
        s: &Scenario,
        i: usize,
        k: usize,
    ) -> TimedPart {
        let t = Instant::now();
        let case = &scenario::SELFTEST_CASES[k];
        let result = match (prepared, self.host.wait()) {
            (Err(e), _) => Err(format!("kernel or image build failed: {e:#}")),
            (_, Err(e)) => Err(e.clone()),
            (Ok(p), _) if s.needs_driver() && p.driver.is_err() => Err(format!(
                "the driver did not build: {}",
                p.driver.as_ref().err().map_or("", String::as_str)
            )),
            (Ok(p), Ok(host)) => Rig {
                paths: self.paths,
                tc: self.tc,
                p,
                device: host.device.as_deref(),
                oracle: host.oracle.as_deref(),
                vcpu_yield: host.vcpu_yield.as_deref(),
                sweep: &self.opts.sweep,
                dma_path: self.opts.dma_path,
            }
            .selftest_case(case, &self.log_dir(arch, s, i))
            .unwrap_or_else(|e| Err(format!("{}: could not run: {e:#}", case.scenario.name))),
        };
        (result, t, Instant::now())
    }

    /// harness-selftest's outcome from its guests' jobs, printed.
    fn selftest_outcome(
        &self,
        arch: Arch,
        s: &Scenario,
        i: usize,
        parts: Vec<TimedPart>,
    ) -> Outcome {
        // Its guests' boots summed: they run as separate jobs, interleaved with others, so the
        // span from the first start to the last end says nothing (and the next run's
        // schedule estimates each guest from this).
        let duration_s = parts.iter().map(|p| (p.2 - p.1).as_secs_f64()).sum();
        let results: Vec<SelfTestPart> = parts.into_iter().map(|p| p.0).collect();
        let (verdict, reason) = if results.len() == scenario::SELFTEST_CASES.len() {
            selftest_verdict(&results)
        } else {
            (Verdict::Fail, "not every selftest guest ran".to_string())
        };
        self.outcome(arch, s, i, Judgement::plain(verdict, reason), duration_s)
    }

    /// One run of one scenario on one arch, printed as it ends.
    fn run(&self, arch: Arch, prepared: &Result<Prepared>, s: &Scenario, i: usize) -> Outcome {
        let log = self.log_dir(arch, s, i);
        let t = Instant::now();
        let judgement = match (prepared, self.host.wait()) {
            (_, Err(e)) => Judgement::plain(Verdict::Fail, e.clone()),
            (Ok(p), Ok(host)) => Rig {
                paths: self.paths,
                tc: self.tc,
                p,
                device: host.device.as_deref(),
                oracle: host.oracle.as_deref(),
                vcpu_yield: host.vcpu_yield.as_deref(),
                sweep: &self.opts.sweep,
                dma_path: self.opts.dma_path,
            }
            .run_scenario(s, &log),
            (Err(e), _) => Judgement::plain(
                Verdict::Fail,
                format!("kernel or image build failed: {e:#}"),
            ),
        };
        self.outcome(arch, s, i, judgement, t.elapsed().as_secs_f64())
    }

    /// A run's outcome, printed as it ends.
    fn outcome(
        &self,
        arch: Arch,
        s: &Scenario,
        i: usize,
        j: Judgement,
        duration_s: f64,
    ) -> Outcome {
        let Judgement {
            verdict,
            reason,
            timings,
            findings,
            ..
        } = j;
        let log = self.log_dir(arch, s, i);
        eprintln!(
            "test: {arch} {}{}: {:?} in {duration_s:.1} s — {}",
            s.name,
            if self.opts.repeat == 1 {
                String::new()
            } else {
                format!(" ({i}/{})", self.opts.repeat)
            },
            verdict,
            reason.lines().next().unwrap_or("")
        );
        if verdict == Verdict::Fail {
            eprintln!("{reason}\n(logs: {})", log.display());
        }
        let log = log
            .strip_prefix(&self.paths.root)
            .unwrap_or(&log)
            .display()
            .to_string();
        Outcome {
            arch: arch.to_string(),
            scenario: s.name.to_string(),
            verdict,
            duration_s,
            log,
            reason,
            timings,
            findings,
        }
    }
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
