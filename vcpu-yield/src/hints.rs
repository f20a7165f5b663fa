//! The spin-wait hints of each target: the instructions Linux puts in its
//! busy-wait loops (`cpu_relax()`, `smp_cond_load_*()`), which do nothing a
//! guest can observe.

/// One instruction's whole encoding, as it sits in guest memory.
pub type Encoding = &'static [u8];

/// x86 `pause` (`rep; nop`).
const X86_PAUSE: Encoding = &[0xf3, 0x90];
/// AArch64 `yield` (0xd503203f), little-endian.
const ARM64_YIELD: Encoding = &[0x3f, 0x20, 0x03, 0xd5];
/// AArch64 `wfe` (0xd503205f): QEMU does not wait in it, so a wait for an
/// event is a spin too.
const ARM64_WFE: Encoding = &[0x5f, 0x20, 0x03, 0xd5];
/// RISC-V Zihintpause `pause` (0x0100000f, `fence w,0`), which Linux
/// emits by its encoding whatever the toolchain.
const RISCV_PAUSE: Encoding = &[0x0f, 0x00, 0x00, 0x01];

/// The hints of the QEMU target `target` (`qemu_info_t.target_name`), or
/// `None` for a target we know none of.
pub fn of_target(target: &str) -> Option<&'static [Encoding]> {
    match target {
        "x86_64" | "i386" => Some(&[X86_PAUSE]),
        "aarch64" => Some(&[ARM64_YIELD, ARM64_WFE]),
        "riscv64" | "riscv32" => Some(&[RISCV_PAUSE]),
        _ => None,
    }
}

/// Whether the instruction whose whole encoding is `insn` is one of
/// `hints`.
pub fn is_hint(hints: &[Encoding], insn: &[u8]) -> bool {
    hints.contains(&insn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_targets_hints_and_nothing_else() {
        let x86 = of_target("x86_64").unwrap();
        assert!(is_hint(x86, &[0xf3, 0x90]));
        assert!(!is_hint(x86, &[0x90]), "a plain nop is no hint");
        assert!(
            !is_hint(x86, &[0xf3, 0x90, 0x90]),
            "only a whole instruction"
        );
        assert!(!is_hint(x86, &[0xf3, 0xa4]), "rep movsb");
        let arm = of_target("aarch64").unwrap();
        assert!(is_hint(arm, &0xd503203fu32.to_le_bytes()));
        assert!(is_hint(arm, &0xd503205fu32.to_le_bytes()));
        assert!(!is_hint(arm, &0xd503201fu32.to_le_bytes()), "nop");
        assert!(
            !is_hint(arm, &0xd503207fu32.to_le_bytes()),
            "wfi halts in QEMU"
        );
        let riscv = of_target("riscv64").unwrap();
        assert!(is_hint(riscv, &0x0100000fu32.to_le_bytes()));
        assert!(!is_hint(riscv, &0x0ff0000fu32.to_le_bytes()), "fence");
        assert!(!is_hint(riscv, &0x00000013u32.to_le_bytes()), "nop");
        assert_eq!(of_target("s390x"), None);
    }
}
