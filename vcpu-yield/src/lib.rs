//! `vcpu-yield`: a QEMU TCG plugin that has a vCPU's thread give its host
//! CPU away (`sched_yield`) each time the vCPU executes a spin-wait hint
//! ([`hints`]). Loaded with `-plugin libvcpu_yield.so`, no arguments, by
//! runs that boot more vCPUs at once than the host has CPUs.
//!
//! Why: the rig boots several two-vCPU guests on a host of two cores. A
//! vCPU that waits for the other one (an IPI's answer, a TLB shootdown, a
//! lock) spins; when the other one's thread is not on a host CPU, each spin
//! burns host time the awaited vCPU needs, until the host scheduler steps
//! in. Hardware virtualization has pause-loop exiting for this, TCG has
//! nothing. Linux marks its wait loops with hint instructions; at each of
//! them this plugin yields. The hints have no architectural effect, so the
//! guest computes the same; only who runs on the host next changes, and on
//! an idle host `sched_yield` returns at once.
//!
//! Cost: a translation callback that reads each instruction's bytes, and a
//! call per executed hint; nothing on any other instruction.

pub mod hints;

use hints::Encoding;
use qemu_plugin_api as api;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

/// The API version we were built against; QEMU refuses the plugin when it
/// does not support it.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static qemu_plugin_version: c_int = api::VERSION;

/// This target's hints, set once at install.
static HINTS: OnceLock<&'static [Encoding]> = OnceLock::new();

/// Called by QEMU once, when it loads the plugin.
///
/// # Safety
/// QEMU passes a valid `info` for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: api::PluginId,
    info: *const api::Info,
    argc: c_int,
    _argv: *const *const c_char,
) -> c_int {
    // SAFETY: QEMU hands us a valid qemu_info_t for the length of this call.
    match unsafe { install(id, info, argc) } {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("vcpu-yield: {e}");
            1
        }
    }
}

/// # Safety
/// `info` is valid or null, as QEMU passes it.
unsafe fn install(id: api::PluginId, info: *const api::Info, argc: c_int) -> Result<(), String> {
    // SAFETY: as the caller promises.
    let info = unsafe { info.as_ref() }.ok_or("QEMU passed no qemu_info_t")?;
    if !(info.version.min..=info.version.cur).contains(&api::VERSION) {
        return Err(format!(
            "this QEMU offers plugin API {}..={}, vcpu-yield is built for {}",
            info.version.min,
            info.version.cur,
            api::VERSION
        ));
    }
    if argc != 0 {
        return Err("takes no arguments".into());
    }
    let target = if info.target_name.is_null() {
        String::new()
    } else {
        // SAFETY: target_name is a NUL-terminated string QEMU keeps alive
        // at least during this call; we copy it.
        unsafe { CStr::from_ptr(info.target_name) }
            .to_string_lossy()
            .into_owned()
    };
    let hints =
        hints::of_target(&target).ok_or(format!("knows no spin-wait hint of target {target:?}"))?;
    HINTS.set(hints).map_err(|_| "loaded twice in one QEMU")?;
    // SAFETY: `on_translate` has the v7 signature QEMU calls it with and
    // takes no userdata.
    unsafe { api::qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate, std::ptr::null_mut()) };
    Ok(())
}

/// Translation: each hint instruction gets [`on_hint`].
unsafe extern "C" fn on_translate(tb: *mut api::Tb, _userdata: *mut c_void) {
    let Some(hints) = HINTS.get() else { return };
    // SAFETY: `tb` is valid during this callback, and so are the insn
    // handles it gives, which is when we use them; `buf` is writable for
    // its length.
    unsafe {
        for i in 0..api::qemu_plugin_tb_n_insns(tb) {
            let insn = api::qemu_plugin_tb_get_insn(tb, i);
            // Longer than any hint: a longer instruction copies more and
            // matches none.
            let mut buf = [0u8; 8];
            let n = api::qemu_plugin_insn_data(insn, buf.as_mut_ptr().cast(), buf.len());
            if hints::is_hint(hints, &buf[..n.min(buf.len())]) {
                api::qemu_plugin_register_vcpu_insn_exec_cb(
                    insn,
                    on_hint,
                    api::CB_NO_REGS,
                    std::ptr::null_mut(),
                );
            }
        }
    }
}

/// A vCPU is about to execute a hint: let another thread have the CPU.
unsafe extern "C" fn on_hint(_vcpu: c_uint, _userdata: *mut c_void) {
    std::thread::yield_now();
}
