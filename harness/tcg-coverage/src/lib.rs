//! `tcg-coverage`: a QEMU TCG plugin that writes down which guest code ran,
//! in chosen ranges of guest virtual addresses (the kernel's module area, the
//! Rust `kernel` crate's text), as the blocks QEMU translated and executed
//! there. Loaded with
//! `-plugin libtcg_coverage.so,range=0xSTART+0xLEN[,range=…],out=PATH`.
//!
//! The guest is not changed: no kcov, no instrumented build. What ran is
//! seen from outside, and mapped to source lines afterwards on the host
//! (the `coverage` crate), from each module's load address (printed by the
//! guest's init) and its debug line tables.
//!
//! Cost: a translation callback compares each new block's address with the
//! ranges; a block outside them gets nothing, so the rest of the kernel runs
//! as without the plugin. A block inside gets a slot of its own in one
//! scoreboard (a u64 per vCPU), an inline store of 1 into it and a callback
//! conditional on it being 0, both in the translated code: the callback runs
//! at a block's first run on each vCPU, and afterwards the block pays a
//! compare and a store, no call (an unconditional callback per run cost
//! the matrix 1.22x its time without the plugin). The first run writes the
//! block's line to `out` at once, so a guest that ends in a timeout (QEMU
//! killed) keeps what it ran. Past `SLOTS` blocks, a block gets the
//! unconditional callback.
//!
//! Output: a header line, then `0xSTART 0xEND` per block, first run first
//! (END exclusive). A block is keyed by its start, end and instruction
//! bytes: a module loaded where another was is new code, written again.

pub mod args;

use args::Args;
use qemu_plugin_api as api;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// The API version we were built against; QEMU refuses the plugin when it
/// does not support it.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static qemu_plugin_version: c_int = api::VERSION;

/// The header line of the output file.
pub const HEADER: &str =
    "# tcg-coverage v1: 0xSTART 0xEND of each guest block run, first run first";

/// One translated block of watched code.
struct Block {
    start: u64,
    end: u64,
    ran: AtomicBool,
}

/// A block by its start, its end and the digest of its bytes.
type BlockKey = (u64, u64, u64);

/// Blocks with a scoreboard slot of their own; more get a plain callback.
const SLOTS: usize = 1 << 16;

/// The scoreboard the slots live in (QEMU's, alive as long as it runs).
struct Slots(*mut api::Scoreboard);

// SAFETY: QEMU's scoreboard pointer is only handed back to QEMU, from any vCPU thread, as
// its API allows; the plugin never dereferences it.
unsafe impl Send for Slots {}
// SAFETY: As above.
unsafe impl Sync for Slots {}

struct Coverage {
    ranges: Vec<(u64, u64)>,
    slots: Slots,
    /// Every block seen, by (start, end, digest of its bytes), with its slot.
    /// Leaked: a block's address is the userdata of its execution callback,
    /// which QEMU may call until it exits.
    blocks: Mutex<HashMap<BlockKey, (&'static Block, usize)>>,
    out: Mutex<File>,
}

static COVERAGE: OnceLock<Coverage> = OnceLock::new();

/// Called by QEMU once, when it loads the plugin.
///
/// # Safety
/// QEMU passes a valid `info` for the duration of the call and `argc`
/// NUL-terminated strings in `argv`.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: api::PluginId,
    info: *const api::Info,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    // SAFETY: as the caller promises.
    match unsafe { install(id, info, argc, argv) } {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("tcg-coverage: {e}");
            1
        }
    }
}

/// # Safety
/// As [`qemu_plugin_install`].
unsafe fn install(
    id: api::PluginId,
    info: *const api::Info,
    argc: c_int,
    argv: *const *const c_char,
) -> Result<(), String> {
    // SAFETY: QEMU hands us a valid qemu_info_t for the length of this call.
    let info = unsafe { info.as_ref() }.ok_or("QEMU passed no qemu_info_t")?;
    if !(info.version.min..=info.version.cur).contains(&api::VERSION) {
        return Err(format!(
            "this QEMU offers plugin API {}..={}, the plugin is built for {}",
            info.version.min,
            info.version.cur,
            api::VERSION
        ));
    }
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
    let mut out = File::create(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    writeln!(out, "{HEADER}").map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    // SAFETY: a plain allocation request; QEMU keeps the scoreboard until it exits.
    let score = unsafe { api::qemu_plugin_scoreboard_new(SLOTS * 8) };
    if score.is_null() {
        return Err("QEMU gave no scoreboard".into());
    }
    let coverage = Coverage {
        ranges: args.ranges,
        slots: Slots(score),
        blocks: Mutex::new(HashMap::new()),
        out: Mutex::new(out),
    };
    COVERAGE
        .set(coverage)
        .map_err(|_| "loaded twice in one QEMU")?;
    // SAFETY: the callback has the v7 signature QEMU calls it with and takes
    // no userdata.
    unsafe { api::qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate, std::ptr::null_mut()) };
    Ok(())
}

/// FNV-1a, over a block's instruction bytes.
fn digest(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// Called by QEMU for each block it translates, on the translating vCPU.
unsafe extern "C" fn on_translate(tb: *mut api::Tb, _: *mut c_void) {
    let Some(c) = COVERAGE.get() else { return };
    // SAFETY: `tb` is valid for the length of this callback.
    let start = unsafe { api::qemu_plugin_tb_vaddr(tb) };
    if !args::within(&c.ranges, start) {
        return;
    }
    // SAFETY: as above.
    let n = unsafe { api::qemu_plugin_tb_n_insns(tb) };
    let mut end = start;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut bytes = [0u8; 16];
    for i in 0..n {
        // SAFETY: `i` is below the block's instruction count; the returned
        // instruction lives as long as `tb`.
        let insn = unsafe { api::qemu_plugin_tb_get_insn(tb, i) };
        // SAFETY: `insn` is one of this block's instructions.
        let (vaddr, size) = unsafe {
            (
                api::qemu_plugin_insn_vaddr(insn),
                api::qemu_plugin_insn_size(insn),
            )
        };
        // SAFETY: `bytes` has room for 16 bytes; QEMU copies at most that.
        let got =
            unsafe { api::qemu_plugin_insn_data(insn, bytes.as_mut_ptr().cast(), bytes.len()) };
        h = digest(h, &bytes[..got.min(bytes.len())]);
        end = end.max(vaddr + size as u64);
    }
    let (block, slot): (&'static Block, usize) = {
        let mut blocks = c.blocks.lock().unwrap_or_else(|p| p.into_inner());
        let next = blocks.len();
        *blocks.entry((start, end, h)).or_insert_with(|| {
            let block: &'static Block = Box::leak(Box::new(Block {
                start,
                end,
                ran: AtomicBool::new(false),
            }));
            (block, next)
        })
    };
    let userdata = block as *const Block as *mut c_void;
    if slot >= SLOTS {
        // SAFETY: the callback has the v7 signature; its userdata is a leaked
        // `Block`, valid for as long as QEMU runs.
        unsafe {
            api::qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, api::CB_NO_REGS, userdata)
        };
        return;
    }
    let entry = api::U64Entry {
        score: c.slots.0,
        offset: slot * 8,
    };
    // SAFETY: `entry` lies inside the scoreboard's element (`slot < SLOTS`); the callback has
    // the v7 signature and its userdata is a leaked `Block`. Registered in this order, the
    // condition reads the slot before the store sets it.
    unsafe {
        api::qemu_plugin_register_vcpu_tb_exec_cond_cb(
            tb,
            on_exec,
            api::CB_NO_REGS,
            api::COND_EQ,
            entry,
            0,
            userdata,
        );
        api::qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, api::INLINE_STORE_U64, entry, 1);
    }
}

/// Called by QEMU each time a watched block is about to run.
unsafe extern "C" fn on_exec(_vcpu: c_uint, userdata: *mut c_void) {
    // SAFETY: the userdata is the leaked `Block` registered with this
    // callback in `on_translate`.
    let block = unsafe { &*(userdata as *const Block) };
    if block.ran.load(Ordering::Relaxed) || block.ran.swap(true, Ordering::Relaxed) {
        return;
    }
    let Some(c) = COVERAGE.get() else { return };
    let mut out = c.out.lock().unwrap_or_else(|p| p.into_inner());
    // A failed write loses one block's record; the guest must run on.
    let _ = writeln!(out, "{:#x} {:#x}", block.start, block.end);
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_digest_tells_different_bytes_apart() {
        let h = 0xcbf2_9ce4_8422_2325;
        assert_ne!(
            super::digest(h, &[0x90, 0xc3]),
            super::digest(h, &[0xc3, 0x90])
        );
        assert_eq!(super::digest(h, &[]), h);
    }
}
