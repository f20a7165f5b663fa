//! Our own bindings to the few functions and types of QEMU's TCG plugin API,
//! version 7, that our plugins use (`mmio-oracle`, `vcpu-yield`). Facts from QEMU's
//! `include/plugins/qemu-plugin.h` and checked against the bundled
//! qemu-system-x86_64 11.1.3 (its exported `qemu_plugin_*` functions and how
//! it calls a plugin's callbacks): version 7 gives every registration a
//! `userdata` pointer that comes back as the callback's last argument; the
//! translation callback gets `(tb, userdata)`, no plugin id.
//!
//! The functions are not linked: QEMU exports them and they resolve when QEMU
//! loads the plugin.

use std::ffi::{c_char, c_int, c_uint, c_void};

/// The API version our plugins are built against (`QEMU_PLUGIN_VERSION`).
pub const VERSION: c_int = 7;

/// `qemu_plugin_id_t`.
pub type PluginId = u64;

/// `qemu_plugin_meminfo_t`: an opaque handle describing one memory access.
pub type MemInfo = u32;

/// `struct qemu_plugin_tb`, opaque.
#[repr(C)]
pub struct Tb {
    _opaque: [u8; 0],
}

/// `struct qemu_plugin_insn`, opaque.
#[repr(C)]
pub struct Insn {
    _opaque: [u8; 0],
}

/// `struct qemu_plugin_hwaddr`, opaque.
#[repr(C)]
pub struct HwAddr {
    _opaque: [u8; 0],
}

/// `qemu_info_t.version`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct InfoVersion {
    pub min: c_int,
    pub cur: c_int,
}

/// `qemu_info_t.system`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct InfoSystem {
    pub smp_vcpus: c_int,
    pub max_vcpus: c_int,
}

/// `qemu_info_t`: what QEMU tells a plugin at install (valid only during
/// `qemu_plugin_install`). The header's anonymous union has one member,
/// `system`, so it is that member here.
#[repr(C)]
pub struct Info {
    pub target_name: *const c_char,
    pub version: InfoVersion,
    pub system_emulation: bool,
    pub system: InfoSystem,
}

/// `enum qemu_plugin_cb_flags`: the callback does not touch CPU registers.
pub const CB_NO_REGS: c_uint = 0;
/// `enum qemu_plugin_mem_rw`: reads and writes.
pub const MEM_RW: c_uint = 3;

/// `enum qemu_plugin_mem_value_type`.
pub const MEM_VALUE_U8: c_uint = 0;
pub const MEM_VALUE_U16: c_uint = 1;
pub const MEM_VALUE_U32: c_uint = 2;
pub const MEM_VALUE_U64: c_uint = 3;
pub const MEM_VALUE_U128: c_uint = 4;

/// The `u128` member of `qemu_plugin_mem_value.data`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct U128 {
    pub low: u64,
    pub high: u64,
}

/// `qemu_plugin_mem_value.data`, in host byte order.
#[repr(C)]
#[derive(Clone, Copy)]
pub union MemValueData {
    pub u8: u8,
    pub u16: u16,
    pub u32: u32,
    pub u64: u64,
    pub u128: U128,
}

/// `qemu_plugin_mem_value`: the value a load read or a store wrote.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MemValue {
    pub kind: c_uint,
    pub data: MemValueData,
}

/// `struct qemu_plugin_scoreboard`: per-vCPU storage QEMU's inline operations write.
#[repr(C)]
pub struct Scoreboard {
    _opaque: [u8; 0],
}

/// `qemu_plugin_u64`: one u64 at `offset` in each vCPU's element of a scoreboard.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct U64Entry {
    pub score: *mut Scoreboard,
    pub offset: usize,
}

/// `enum qemu_plugin_cond`: QEMU_PLUGIN_COND_EQ.
pub const COND_EQ: c_uint = 2;
/// `enum qemu_plugin_op`: QEMU_PLUGIN_INLINE_STORE_U64.
pub const INLINE_STORE_U64: c_uint = 1;

/// `qemu_plugin_vcpu_tb_trans_cb_t` (v7).
pub type TbTransCb = unsafe extern "C" fn(tb: *mut Tb, userdata: *mut c_void);
/// `qemu_plugin_vcpu_mem_cb_t`.
pub type MemCb =
    unsafe extern "C" fn(vcpu_index: c_uint, info: MemInfo, vaddr: u64, userdata: *mut c_void);
/// `qemu_plugin_udata_cb_t`: at exit, and when a reset has finished.
pub type UdataCb = unsafe extern "C" fn(userdata: *mut c_void);
/// `qemu_plugin_vcpu_udata_cb_t`: a vCPU going idle or resuming, or about
/// to execute an instruction.
pub type VcpuUdataCb = unsafe extern "C" fn(vcpu_index: c_uint, userdata: *mut c_void);

extern "C" {
    pub fn qemu_plugin_register_vcpu_tb_trans_cb(
        id: PluginId,
        cb: TbTransCb,
        userdata: *mut c_void,
    );
    pub fn qemu_plugin_register_atexit_cb(id: PluginId, cb: UdataCb, userdata: *mut c_void);
    pub fn qemu_plugin_register_vcpu_idle_cb(id: PluginId, cb: VcpuUdataCb, userdata: *mut c_void);
    pub fn qemu_plugin_register_vcpu_resume_cb(
        id: PluginId,
        cb: VcpuUdataCb,
        userdata: *mut c_void,
    );
    /// Unregisters every callback of the plugin and flushes QEMU's
    /// translated code, then calls `cb` (which may register callbacks
    /// again). Asynchronous: from a vCPU thread it is queued as "safe work"
    /// run with every vCPU stopped (`tb_flush`, then the unregistering, then
    /// `cb`); from any other thread it unregisters at once and flushes
    /// nothing (QEMU's plugins/loader.c, `plugin_reset_uninstall`).
    pub fn qemu_plugin_reset(id: PluginId, cb: UdataCb, userdata: *mut c_void);
    pub fn qemu_plugin_tb_n_insns(tb: *const Tb) -> usize;
    /// A scoreboard of `element_size` bytes per vCPU, zeroed.
    pub fn qemu_plugin_scoreboard_new(element_size: usize) -> *mut Scoreboard;
    /// `cb` runs each time the block is about to execute and `entry cond imm` holds for the
    /// executing vCPU (evaluated in registration order with the block's inline operations).
    pub fn qemu_plugin_register_vcpu_tb_exec_cond_cb(
        tb: *mut Tb,
        cb: VcpuUdataCb,
        flags: c_uint,
        cond: c_uint,
        entry: U64Entry,
        imm: u64,
        userdata: *mut c_void,
    );
    /// An operation on the executing vCPU's `entry`, inlined in the translated code (no call).
    pub fn qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
        tb: *mut Tb,
        op: c_uint,
        entry: U64Entry,
        imm: u64,
    );
    /// The guest virtual address of the block's first instruction.
    pub fn qemu_plugin_tb_vaddr(tb: *const Tb) -> u64;
    /// `cb` runs each time the block is about to execute, on the executing
    /// vCPU's thread.
    pub fn qemu_plugin_register_vcpu_tb_exec_cb(
        tb: *mut Tb,
        cb: VcpuUdataCb,
        flags: c_uint,
        userdata: *mut c_void,
    );
    pub fn qemu_plugin_tb_get_insn(tb: *const Tb, idx: usize) -> *mut Insn;
    pub fn qemu_plugin_insn_vaddr(insn: *const Insn) -> u64;
    /// The instruction's size in bytes.
    pub fn qemu_plugin_insn_size(insn: *const Insn) -> usize;
    /// Copies up to `len` bytes of the instruction's encoding to `dest`;
    /// returns how many it copied (the instruction's size at most).
    pub fn qemu_plugin_insn_data(insn: *const Insn, dest: *mut c_void, len: usize) -> usize;
    /// `cb` runs each time the instruction is about to execute, on the
    /// executing vCPU's thread.
    pub fn qemu_plugin_register_vcpu_insn_exec_cb(
        insn: *mut Insn,
        cb: VcpuUdataCb,
        flags: c_uint,
        userdata: *mut c_void,
    );
    pub fn qemu_plugin_register_vcpu_mem_cb(
        insn: *mut Insn,
        cb: MemCb,
        flags: c_uint,
        rw: c_uint,
        userdata: *mut c_void,
    );
    pub fn qemu_plugin_mem_size_shift(info: MemInfo) -> c_uint;
    pub fn qemu_plugin_mem_is_store(info: MemInfo) -> bool;
    pub fn qemu_plugin_mem_get_value(info: MemInfo) -> MemValue;
    pub fn qemu_plugin_get_hwaddr(info: MemInfo, vaddr: u64) -> *mut HwAddr;
    pub fn qemu_plugin_hwaddr_is_io(haddr: *const HwAddr) -> bool;
    pub fn qemu_plugin_hwaddr_phys_addr(haddr: *const HwAddr) -> u64;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_the_c_header_on_lp64() {
        assert_eq!(offset_of!(Info, version), 8);
        assert_eq!(offset_of!(Info, system_emulation), 16);
        assert_eq!(offset_of!(Info, system), 20);
        assert_eq!(size_of::<Info>(), 32);
        assert_eq!(offset_of!(MemValue, data), 8);
        assert_eq!(size_of::<MemValue>(), 24);
        assert_eq!(size_of::<U64Entry>(), 16);
    }
}
