//! `mmio-oracle`: a QEMU TCG plugin that writes down every guest memory
//! access whose physical address falls in a watched range, as JSON lines
//! (see [`record`]). Loaded with
//! `-plugin libmmio_oracle.so,watch=0xADDR+0xLEN[,watch=…],out=PATH[,arm=PATH]`.
//!
//! Armed late (`arm=PATH`): until the file `PATH` exists the plugin
//! instruments nothing (no translation callback at all), so the guest runs
//! at nearly full speed while it boots. Each time a vCPU goes idle or
//! resumes, the plugin looks for the file; once there, it asks QEMU for a
//! reset (`qemu_plugin_reset`, from that vCPU's thread), which QEMU runs
//! with every vCPU stopped: it flushes all translated code, drops our
//! callbacks and calls [`on_reset`], which registers the translation
//! callback and writes the `armed` record. Every instruction run after that
//! is translated anew, with the memory callback, so from the `armed` record
//! on no load or store escapes the log. Without `arm=`, armed from the
//! start.
//!
//! Cost once armed: QEMU instruments only an instruction's memory
//! operations, so the callback runs once per guest load or store; it asks
//! QEMU for the physical address and turns the access away with two
//! comparisons unless it lies within the watched ranges' bounding box. The
//! instruction's address is the callback's userdata (set at translation),
//! so nothing is allocated per instruction.

pub use qemu_plugin_api as api;
pub mod record;
pub mod watch;

use api::{Info, MemInfo, Tb};
use record::Record;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use watch::{Args, Ranges};

/// The API version we were built against; QEMU refuses the plugin when it
/// does not support it.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static qemu_plugin_version: c_int = api::VERSION;

struct Oracle {
    id: api::PluginId,
    watch: Ranges,
    /// The file whose existence arms the oracle, when armed late.
    arm: Option<PathBuf>,
    /// [`WAITING`], [`RESETTING`] or [`ARMED`].
    state: AtomicU8,
    out: Mutex<Out>,
}

/// Not armed, no reset asked for: nothing is instrumented.
const WAITING: u8 = 0;
/// The arm file appeared and a reset was asked for; QEMU has not run it yet.
const RESETTING: u8 = 1;
/// Translated code was flushed (or none existed) and every translation
/// since instruments every load and store.
const ARMED: u8 = 2;

struct Out {
    file: File,
    seq: u64,
    line: String,
    error: Option<std::io::Error>,
}

static ORACLE: OnceLock<Oracle> = OnceLock::new();

/// Why QEMU's offer cannot be taken, if it cannot.
fn check_info(api_min: c_int, api_cur: c_int, system: bool) -> Result<(), String> {
    if !(api_min..=api_cur).contains(&api::VERSION) {
        return Err(format!(
            "this QEMU offers plugin API {api_min}..={api_cur}, the oracle is built for {}",
            api::VERSION
        ));
    }
    if !system {
        return Err("needs system emulation (physical addresses); this is user mode".into());
    }
    Ok(())
}

/// Called by QEMU once, when it loads the plugin.
///
/// # Safety
/// QEMU passes a valid `info` for the duration of the call and `argc`
/// NUL-terminated strings in `argv`.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: api::PluginId,
    info: *const Info,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    match install(id, info, argc, argv) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("mmio-oracle: {e}");
            1
        }
    }
}

/// # Safety
/// As [`qemu_plugin_install`].
unsafe fn install(
    id: api::PluginId,
    info: *const Info,
    argc: c_int,
    argv: *const *const c_char,
) -> Result<(), String> {
    // SAFETY: QEMU hands us a valid qemu_info_t for the length of this call.
    let info = unsafe { info.as_ref() }.ok_or("QEMU passed no qemu_info_t")?;
    check_info(info.version.min, info.version.cur, info.system_emulation)?;
    let target = if info.target_name.is_null() {
        "?".to_string()
    } else {
        // SAFETY: target_name is a NUL-terminated string QEMU keeps alive
        // at least during this call; we copy it.
        unsafe { CStr::from_ptr(info.target_name) }
            .to_string_lossy()
            .into_owned()
    };
    let mut strs = Vec::with_capacity(argc.max(0) as usize);
    for i in 0..argc.max(0) as usize {
        // SAFETY: argv holds argc valid pointers to NUL-terminated strings
        // that live as long as the plugin.
        let s = unsafe { CStr::from_ptr(*argv.add(i)) };
        strs.push(
            s.to_str()
                .map_err(|_| format!("argument {i} is not UTF-8"))?,
        );
    }
    let args = Args::parse(strs)?;
    let mut file = File::create(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    file.write_all(
        record::header(
            &target,
            (info.version.min, info.version.cur),
            args.watch.as_slice(),
        )
        .as_bytes(),
    )
    .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    let late = args.arm.is_some();
    let oracle = Oracle {
        id,
        watch: args.watch,
        arm: args.arm,
        state: AtomicU8::new(WAITING),
        out: Mutex::new(Out {
            file,
            seq: 0,
            line: String::with_capacity(256),
            error: None,
        }),
    };
    if ORACLE.set(oracle).is_err() {
        return Err("loaded twice in one QEMU".into());
    }
    if late {
        // SAFETY: the callbacks have the v7 signatures QEMU calls them with
        // and take no userdata.
        unsafe {
            api::qemu_plugin_register_vcpu_idle_cb(id, on_idle_or_resume, std::ptr::null_mut());
            api::qemu_plugin_register_vcpu_resume_cb(id, on_idle_or_resume, std::ptr::null_mut());
            api::qemu_plugin_register_atexit_cb(id, on_exit, std::ptr::null_mut());
        }
    } else {
        // No vCPU has run yet: nothing was translated, nothing to flush.
        arm(id, false);
    }
    Ok(())
}

/// Registers what an armed oracle needs and writes the `armed` record.
/// Called where no vCPU runs guest code: at install, or in [`on_reset`].
fn arm(id: api::PluginId, flushed: bool) {
    let Some(o) = ORACLE.get() else { return };
    // SAFETY: both callbacks have the v7 signatures QEMU calls them with and
    // take no userdata.
    unsafe {
        api::qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate, std::ptr::null_mut());
        api::qemu_plugin_register_atexit_cb(id, on_exit, std::ptr::null_mut());
    }
    o.state.store(ARMED, Ordering::SeqCst);
    let mut out = o.out.lock().unwrap_or_else(|p| p.into_inner());
    out.seq += 1;
    let line = record::armed(out.seq, flushed);
    // Flushed at once: the harness waits for this line before it lets the
    // guest go on.
    if let Err(e) = out.file.write_all(line.as_bytes()) {
        out.error.get_or_insert(e);
    }
}

/// A vCPU goes idle or resumes (its own thread, outside translated code):
/// when the arm file has appeared, ask QEMU once for the reset that arms
/// the oracle. Called from a vCPU thread so that QEMU flushes translated
/// code (from any other thread it would not). Asked while going idle, the
/// reset runs when the vCPU next wakes up; asked on resuming, right away.
unsafe extern "C" fn on_idle_or_resume(_vcpu: c_uint, _userdata: *mut c_void) {
    let Some(o) = ORACLE.get() else { return };
    if o.state.load(Ordering::Relaxed) != WAITING {
        return;
    }
    let Some(path) = &o.arm else { return };
    if !path.exists() {
        return;
    }
    if o.state
        .compare_exchange(WAITING, RESETTING, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        // SAFETY: `on_reset` has the v7 `qemu_plugin_udata_cb_t` signature
        // and takes no userdata; we are on a vCPU thread (QEMU's
        // `current_cpu` is set), which makes QEMU flush translated code.
        unsafe { api::qemu_plugin_reset(o.id, on_reset, std::ptr::null_mut()) };
    }
}

/// QEMU finished the reset: every vCPU is stopped, translated code was
/// flushed and our callbacks dropped. From here on every translation is
/// instrumented.
unsafe extern "C" fn on_reset(_userdata: *mut c_void) {
    if let Some(o) = ORACLE.get() {
        arm(o.id, true);
    }
}

/// Translation: every instruction gets the memory callback, with its own
/// address as userdata. QEMU calls it only for the instruction's loads and
/// stores; an instruction without any costs nothing at run time.
unsafe extern "C" fn on_translate(tb: *mut Tb, _userdata: *mut c_void) {
    // SAFETY: `tb` is valid during this callback; the insn handles it gives
    // are valid during it too, which is when we use them.
    unsafe {
        let n = api::qemu_plugin_tb_n_insns(tb);
        for i in 0..n {
            let insn = api::qemu_plugin_tb_get_insn(tb, i);
            let pc = api::qemu_plugin_insn_vaddr(insn);
            api::qemu_plugin_register_vcpu_mem_cb(
                insn,
                on_access,
                api::CB_NO_REGS,
                api::MEM_RW,
                pc as usize as *mut c_void,
            );
        }
    }
}

/// Every guest load or store: cheap rejection first.
unsafe extern "C" fn on_access(vcpu: c_uint, info: MemInfo, vaddr: u64, pc: *mut c_void) {
    let Some(o) = ORACLE.get() else { return };
    // SAFETY: `info` is the handle QEMU gave this callback; the hwaddr handle
    // is used only during it.
    let (addr, h) = unsafe {
        let h = api::qemu_plugin_get_hwaddr(info, vaddr);
        if h.is_null() {
            return;
        }
        (api::qemu_plugin_hwaddr_phys_addr(h), h)
    };
    // Almost every access ends here, having cost QEMU two calls: no access
    // of any size starting at `addr` reaches the watched box.
    if !o.watch.may_touch(addr) {
        return;
    }
    // SAFETY: as above, still inside the callback.
    let size = 1u64 << unsafe { api::qemu_plugin_mem_size_shift(info) };
    if !o.watch.overlaps(addr, size) {
        return;
    }
    // SAFETY: as above, still inside the callback.
    let (write, value, io) = unsafe {
        (
            api::qemu_plugin_mem_is_store(info),
            value_of(api::qemu_plugin_mem_get_value(info)),
            api::qemu_plugin_hwaddr_is_io(h),
        )
    };
    let mut out = o.out.lock().unwrap_or_else(|p| p.into_inner());
    out.seq += 1;
    let rec = Record {
        seq: out.seq,
        ns: monotonic_ns(),
        vcpu,
        pc: pc as usize as u64,
        vaddr,
        addr,
        size: size as u32,
        write,
        value,
        io,
    };
    let Out {
        file, line, error, ..
    } = &mut *out;
    line.clear();
    rec.write_line(line);
    // One write per record: the log is whole up to the last access even if
    // QEMU is killed.
    if let Err(e) = file.write_all(line.as_bytes()) {
        error.get_or_insert(e);
    }
}

fn value_of(v: api::MemValue) -> u128 {
    // SAFETY: `kind` says which member of the union QEMU filled in.
    unsafe {
        match v.kind {
            api::MEM_VALUE_U8 => v.data.u8.into(),
            api::MEM_VALUE_U16 => v.data.u16.into(),
            api::MEM_VALUE_U32 => v.data.u32.into(),
            api::MEM_VALUE_U64 => v.data.u64.into(),
            api::MEM_VALUE_U128 => {
                (u128::from(v.data.u128.high) << 64) | u128::from(v.data.u128.low)
            }
            _ => 0,
        }
    }
}

unsafe extern "C" fn on_exit(_userdata: *mut c_void) {
    let Some(o) = ORACLE.get() else { return };
    let mut out = o.out.lock().unwrap_or_else(|p| p.into_inner());
    let tail = record::trailer(out.seq);
    if let Err(e) = out.file.write_all(tail.as_bytes()) {
        out.error.get_or_insert(e);
    }
    if let Some(e) = &out.error {
        eprintln!("mmio-oracle: writing the log failed: {e}");
    }
}

/// The host's CLOCK_MONOTONIC in ns: the clock of the device server's log and of the host's
/// marks (`record`'s `ns`).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass, which outlives the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_only_api_7_in_system_mode() {
        assert!(check_info(7, 7, true).is_ok());
        assert!(check_info(2, 9, true).is_ok());
        let e = check_info(2, 6, true).unwrap_err();
        assert!(e.contains("offers plugin API 2..=6"), "{e}");
        let e = check_info(8, 9, true).unwrap_err();
        assert!(e.contains("built for 7"), "{e}");
        let e = check_info(7, 7, false).unwrap_err();
        assert!(e.contains("user mode"), "{e}");
    }

    #[test]
    fn values_follow_their_type() {
        let mut v = api::MemValue {
            kind: api::MEM_VALUE_U16,
            data: api::MemValueData { u64: 0 },
        };
        v.data.u16 = 0xbeef;
        assert_eq!(value_of(v), 0xbeef);
        v.kind = api::MEM_VALUE_U128;
        v.data.u128 = api::U128 { low: 1, high: 2 };
        assert_eq!(value_of(v), (2u128 << 64) | 1);
        v.kind = 99;
        assert_eq!(value_of(v), 0, "unknown type: no value");
    }
}
