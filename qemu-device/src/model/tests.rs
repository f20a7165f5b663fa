use super::bar0::*;
use super::*;

fn rd(m: &mut Model, region: Region, off: u64, size: usize) -> u64 {
    let mut b = vec![0u8; size];
    m.read(region, off, &mut b, 0).unwrap();
    let mut w = [0u8; 8];
    w[..size.min(8)].copy_from_slice(&b[..size.min(8)]);
    u64::from_le_bytes(w)
}

fn r32(m: &mut Model, off: u64) -> u32 {
    rd(m, Region::Bar0, off, 4) as u32
}

fn w32(m: &mut Model, off: u64, v: u32) {
    m.write(Region::Bar0, off, &v.to_le_bytes(), 0).unwrap();
}

fn cfg32(m: &mut Model, off: u64) -> u32 {
    rd(m, Region::Config, off, 4) as u32
}

fn cfg_w32(m: &mut Model, off: u64, v: u32) {
    m.write(Region::Config, off, &v.to_le_bytes(), 0).unwrap();
}

fn run(m: &mut Model, op: u32, offset: u32, len: u32, arg: u32) -> u32 {
    w32(m, OP_OFFSET, offset);
    w32(m, OP_LENGTH, len);
    w32(m, OP_ARG, arg);
    w32(m, CMD, op);
    r32(m, STATUS)
}

fn set(m: &mut Model, f: impl FnOnce(&mut Knobs)) {
    let mut k = m.knobs().clone();
    f(&mut k);
    m.set_knobs(k).unwrap();
}

#[test]
fn config_header_identifies_the_device() {
    let mut m = Model::new();
    assert_eq!(cfg32(&mut m, 0x00), 0x0001_7072);
    assert_eq!(cfg32(&mut m, 0x08), 0xff00_0001);
    assert_eq!(cfg32(&mut m, 0x2c), 0x0001_7072);
    assert_eq!(rd(&mut m, Region::Config, 0x0e, 1), 0, "type-0 header");
    assert_eq!(rd(&mut m, Region::Config, 0x3d, 1), 1, "INTA#");
    assert_eq!(
        cfg32(&mut m, 0x04) >> 16,
        u32::from(config::STATUS_CAP_LIST)
    );
    assert_eq!(rd(&mut m, Region::Config, 0x34, 1), 0x40);
    // MSI capability, 64-bit, one vector; then power management; then PCI Express, last.
    assert_eq!(cfg32(&mut m, 0x40), 0x0080_5005);
    assert_eq!(cfg32(&mut m, 0x50), 0x0003_6001);
    assert_eq!(cfg32(&mut m, 0x60), 0x0002_0010, "PCIe v2 endpoint");
    assert_eq!(cfg32(&mut m, 0x64) & 1 << 28, 1 << 28, "FLR capable");
    // The extended space: AER alone.
    assert_eq!(cfg32(&mut m, 0x100), 0x0002_0001);
    assert_eq!(cfg32(&mut m, config::AER_UNCOR_SEVER as u64), 0x0046_2030);
}

#[test]
fn aer_status_is_sticky_and_cleared_by_writing_ones() {
    let mut m = Model::new();
    let status = config::AER_UNCOR_STATUS as u64;
    cfg_w32(&mut m, status, 0);
    assert_eq!(cfg32(&mut m, status), 0);
    m.arm_fault(FaultKind::Hang, 1, false).unwrap();
    r32(&mut m, MAGIC);
    assert_eq!(
        cfg32(&mut m, status),
        config::AER_UNCOR_INTERNAL,
        "a hang is recorded"
    );
    assert_eq!(
        cfg32(&mut m, config::AER_CAP_CTL as u64) & 0x1f,
        22,
        "first error pointer"
    );
    let devsta = rd(&mut m, Region::Config, config::DEVSTA as u64, 2);
    assert_eq!(devsta, 1 << 2, "fatal by default severity");
    m.device_reset(5);
    assert_eq!(r32(&mut m, MAGIC), MAGIC_VALUE);
    assert_eq!(
        cfg32(&mut m, status),
        config::AER_UNCOR_INTERNAL,
        "sticky across a reset"
    );
    assert_eq!(
        rd(&mut m, Region::Config, config::DEVSTA as u64, 2),
        0,
        "not sticky"
    );
    cfg_w32(&mut m, status, 1 << 4);
    assert_eq!(
        cfg32(&mut m, status),
        config::AER_UNCOR_INTERNAL,
        "other bits stay"
    );
    cfg_w32(&mut m, status, config::AER_UNCOR_INTERNAL);
    assert_eq!(cfg32(&mut m, status), 0, "RW1C");
}

#[test]
fn a_function_level_reset_resets_and_is_logged() {
    let mut m = Model::new();
    w32(&mut m, SCRATCH, 7);
    let devctl = config::DEVCTL as u64;
    let before = rd(&mut m, Region::Config, devctl, 2);
    m.write(
        Region::Config,
        devctl,
        &((before as u16) | config::DEVCTL_FLR).to_le_bytes(),
        9,
    )
    .unwrap();
    assert_eq!(r32(&mut m, SCRATCH), 0, "reset");
    assert_eq!(
        rd(&mut m, Region::Config, devctl, 2),
        0x2810,
        "FLR reads 0, defaults back"
    );
    assert!(m
        .dma()
        .log()
        .iter()
        .any(|e| matches!(e, super::dma::Event::Reset { time_ns: 9, .. })));
}

/// The power-state field of PMCSR, written as the PCI core does (16 bits).
fn set_power(m: &mut Model, state: u16) {
    m.write(
        Region::Config,
        config::PMCSR as u64,
        &state.to_le_bytes(),
        0,
    )
    .unwrap();
}

fn power_events(m: &Model) -> Vec<(u8, u8, bool)> {
    m.dma()
        .log()
        .iter()
        .filter_map(|e| match e {
            super::dma::Event::Power { from, to, lost, .. } => Some((*from, *to, *lost)),
            _ => None,
        })
        .collect()
}

#[test]
fn d3hot_to_d0_resets_the_function_unless_no_soft_reset() {
    let mut m = Model::new();
    w32(&mut m, INT_ENABLE, 0x3);
    w32(&mut m, SCRATCH, 0x1234_5678);
    set_power(&mut m, 3);
    assert_eq!(m.config().power_state(), 3);
    set_power(&mut m, 0);
    assert_eq!(power_events(&m), [(0, 3, false), (3, 0, true)]);
    assert_eq!(r32(&mut m, INT_ENABLE), 0, "registers lost");
    assert_eq!(r32(&mut m, SCRATCH), 0);
    // With No_Soft_Reset (the knob, shown in PMCSR), they are kept.
    set(&mut m, |k| k.no_soft_reset = true);
    assert_eq!(
        rd(&mut m, Region::Config, config::PMCSR as u64, 2) as u16 & config::PM_NO_SOFT_RESET,
        config::PM_NO_SOFT_RESET
    );
    w32(&mut m, SCRATCH, 0x1234_5678);
    set_power(&mut m, 3);
    set_power(&mut m, 0);
    assert_eq!(r32(&mut m, SCRATCH), 0x1234_5678, "kept");
    assert_eq!(power_events(&m)[2..], [(0, 3, false), (3, 0, false)]);
}

#[test]
fn unsupported_power_states_are_ignored() {
    let mut m = Model::new();
    set_power(&mut m, 1);
    set_power(&mut m, 2);
    assert_eq!(m.config().power_state(), 0);
    assert!(power_events(&m).is_empty());
    // The guest cannot set No_Soft_Reset.
    set_power(&mut m, config::PM_NO_SOFT_RESET);
    assert_eq!(rd(&mut m, Region::Config, config::PMCSR as u64, 2), 0);
}

#[test]
fn read_only_config_fields_ignore_writes() {
    let mut m = Model::new();
    cfg_w32(&mut m, 0x00, 0xdead_beef);
    cfg_w32(&mut m, 0x08, 0);
    cfg_w32(&mut m, 0x2c, 0);
    assert_eq!(cfg32(&mut m, 0x00), 0x0001_7072);
    assert_eq!(cfg32(&mut m, 0x08), 0xff00_0001);
    assert_eq!(cfg32(&mut m, 0x2c), 0x0001_7072);
}

#[test]
fn bar_sizing_returns_size_masks() {
    let mut m = Model::new();
    for bar in 0..6u64 {
        cfg_w32(&mut m, 0x10 + 4 * bar, 0xffff_ffff);
    }
    let masks: Vec<u32> = (0..6).map(|b| cfg32(&mut m, 0x10 + 4 * b)).collect();
    assert_eq!(masks, [0xffff_f000, 0, 0xffff_0000, 0, 0, 0]);
    // An address sticks, its low bits do not.
    cfg_w32(&mut m, 0x10, 0xfebf_1234);
    assert_eq!(cfg32(&mut m, 0x10), 0xfebf_1000);
    // No expansion ROM.
    cfg_w32(&mut m, 0x30, 0xffff_ffff);
    assert_eq!(cfg32(&mut m, 0x30), 0);
}

#[test]
fn command_register_keeps_only_implemented_bits() {
    let mut m = Model::new();
    cfg_w32(&mut m, 0x04, 0xffff_ffff);
    assert_eq!(cfg32(&mut m, 0x04) & 0xffff, 0x0546);
}

#[test]
fn whole_config_space_reads_in_one_access() {
    let mut m = Model::new();
    let mut all = [0u8; 256];
    m.read(Region::Config, 0, &mut all, 0).unwrap();
    assert_eq!(&all[..4], &[0x72, 0x70, 0x01, 0x00]);
    assert_eq!(m.log().since(0).last().unwrap().value, None);
}

#[test]
fn identification_and_scratch() {
    let mut m = Model::new();
    assert_eq!(r32(&mut m, MAGIC), MAGIC_VALUE);
    assert_eq!(r32(&mut m, VERSION), VERSION_VALUE);
    assert_eq!(r32(&mut m, SCRATCH), 0);
    w32(&mut m, SCRATCH, 0x1234_5678);
    assert_eq!(r32(&mut m, SCRATCH), 0x1234_5678);
    w32(&mut m, MAGIC, 0);
    assert_eq!(r32(&mut m, MAGIC), MAGIC_VALUE);
    assert_eq!(m.counters().read_only, 1);
}

#[test]
fn counter_increments_on_every_read() {
    let mut m = Model::new();
    assert_eq!(
        (0..4).map(|_| r32(&mut m, COUNTER)).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    // Writes do not reset it; a narrow read still has the side effect.
    w32(&mut m, COUNTER, 0);
    assert_eq!(rd(&mut m, Region::Bar0, COUNTER, 1), 4);
    assert_eq!(r32(&mut m, COUNTER), 5);
}

#[test]
fn crc32_operation() {
    let mut m = Model::new();
    m.write(Region::Bar2, 0x100, b"123456789", 0).unwrap();
    assert_eq!(run(&mut m, OP_CRC32, 0x100, 9, 0), STATUS_DONE);
    assert_eq!(r32(&mut m, RESULT), 0xcbf4_3926);
    assert_eq!(r32(&mut m, INT_STATUS), INT_DONE);
    assert_eq!(m.counters().commands, 1);
}

#[test]
fn fill_and_invert_change_the_window() {
    let mut m = Model::new();
    assert_eq!(run(&mut m, OP_FILL, 16, 32, 0x1a5), STATUS_DONE);
    assert_eq!(r32(&mut m, RESULT), crc32(&[0xa5; 32]));
    assert_eq!(rd(&mut m, Region::Bar2, 16, 8), 0xa5a5_a5a5_a5a5_a5a5);
    assert_eq!(rd(&mut m, Region::Bar2, 48, 1), 0);
    assert_eq!(run(&mut m, OP_INVERT, 16, 32, 0), STATUS_DONE);
    assert_eq!(rd(&mut m, Region::Bar2, 16, 4), 0x5a5a_5a5a);
    assert_eq!(r32(&mut m, RESULT), crc32(&[0x5a; 32]));
}

#[test]
fn whole_window_and_empty_ranges_are_valid() {
    let mut m = Model::new();
    assert_eq!(run(&mut m, OP_CRC32, 0, BAR2_SIZE as u32, 0), STATUS_DONE);
    assert_eq!(r32(&mut m, RESULT), crc32(&vec![0; BAR2_SIZE as usize]));
    assert_eq!(run(&mut m, OP_CRC32, BAR2_SIZE as u32, 0, 0), STATUS_DONE);
    assert_eq!(r32(&mut m, RESULT), 0);
}

#[test]
fn operation_errors_set_code_and_keep_result() {
    let mut m = Model::new();
    run(&mut m, OP_CRC32, 0, 4, 0);
    let before = r32(&mut m, RESULT);
    let err = |code: u32| STATUS_DONE | STATUS_ERROR | (code << STATUS_CODE_SHIFT);
    assert_eq!(run(&mut m, 0, 0, 4, 0), err(ERR_BAD_OPCODE));
    assert_eq!(run(&mut m, 99, 0, u32::MAX, 0), err(ERR_BAD_OPCODE));
    assert_eq!(run(&mut m, OP_FILL, 0xfff0, 0x11, 0), err(ERR_BAD_RANGE));
    assert_eq!(
        run(&mut m, OP_FILL, u32::MAX, u32::MAX, 0),
        err(ERR_BAD_RANGE)
    );
    assert_eq!(r32(&mut m, RESULT), before);
    assert_eq!(r32(&mut m, INT_STATUS), INT_DONE | INT_ERROR);
    assert_eq!(m.counters().command_errors, 4);
    assert_eq!(
        rd(&mut m, Region::Bar2, 0xfff0, 8),
        0,
        "failed fill wrote nothing"
    );
}

#[test]
fn an_ack_clears_only_the_bits_written() {
    let mut m = Model::new();
    w32(&mut m, INT_ENABLE, INT_ALL);
    w32(&mut m, INT_RAISE, INT_SOFT | INT_DONE);
    w32(&mut m, INT_ACK, INT_SOFT);
    assert_eq!(
        r32(&mut m, INT_STATUS),
        INT_DONE,
        "a source not acked stays pending"
    );
    assert!(m.intx_asserted(), "and keeps the line up");
}

#[test]
fn interrupts_follow_status_and_enable() {
    let mut m = Model::new();
    w32(&mut m, INT_RAISE, INT_SOFT);
    assert_eq!(r32(&mut m, INT_STATUS), INT_SOFT);
    assert!(!m.intx_asserted(), "disabled sources do not interrupt");
    w32(&mut m, INT_ENABLE, 0xffff_ffff);
    assert_eq!(r32(&mut m, INT_ENABLE), INT_ALL);
    assert!(m.intx_asserted(), "enabling a pending source interrupts");
    assert_eq!(cfg32(&mut m, 0x04) >> 16 & 0x8, 0x8, "status.INTx");
    assert_eq!(r32(&mut m, IRQ_COUNT), 1);
    w32(&mut m, INT_RAISE, INT_SOFT);
    assert_eq!(r32(&mut m, IRQ_COUNT), 1, "no new edge while pending");
    w32(&mut m, INT_ACK, INT_SOFT);
    assert!(!m.intx_asserted());
    assert_eq!(cfg32(&mut m, 0x04) >> 16 & 0x8, 0);
    run(&mut m, OP_CRC32, 0, 1, 0);
    assert!(m.intx_asserted());
    assert_eq!(r32(&mut m, IRQ_COUNT), 2);
    assert_eq!(m.irq_edges(), 2);
    assert_eq!(m.counters().irqs_raised, 2);
}

#[test]
fn intx_disable_masks_the_pin_not_the_line() {
    let mut m = Model::new();
    w32(&mut m, INT_ENABLE, INT_SOFT);
    w32(&mut m, INT_RAISE, INT_SOFT);
    cfg_w32(&mut m, 0x04, u32::from(config::CMD_INTX_DISABLE));
    assert!(!m.intx_asserted());
    assert_eq!(cfg32(&mut m, 0x04) >> 16 & 0x8, 0x8);
    cfg_w32(&mut m, 0x04, 0);
    assert!(m.intx_asserted());
}

#[test]
fn msi_enable_is_visible() {
    let mut m = Model::new();
    assert!(!m.msi_enabled());
    cfg_w32(&mut m, 0x40, 0x0001_0000);
    assert!(m.msi_enabled());
    cfg_w32(&mut m, 0x44, 0xfee0_0003);
    assert_eq!(cfg32(&mut m, 0x44), 0xfee0_0000);
}

#[test]
fn soft_reset_restores_registers_and_window() {
    let mut m = Model::new();
    w32(&mut m, SCRATCH, 7);
    r32(&mut m, COUNTER);
    w32(&mut m, INT_ENABLE, INT_ALL);
    run(&mut m, OP_FILL, 0, 16, 0xff);
    cfg_w32(&mut m, 0x04, 0x2);
    assert!(m.intx_asserted());
    w32(&mut m, RESET, 2);
    assert_eq!(r32(&mut m, SCRATCH), 7, "only RESET_KEY resets");
    w32(&mut m, RESET, RESET_KEY);
    assert_eq!(m.registers(), &Registers::default());
    assert!(m.window().iter().all(|&b| b == 0));
    assert!(!m.intx_asserted());
    assert_eq!(cfg32(&mut m, 0x04) & 0xffff, 2, "config space survives");
    assert_eq!(m.counters().resets, 1);
    let seq = m.log().next_seq();
    m.device_reset(5);
    assert_eq!(cfg32(&mut m, 0x04) & 0xffff, 0);
    assert_eq!(m.irq_edges(), 1, "edges are never reset");
    assert_eq!(
        m.dma().log().last(),
        Some(&super::dma::Event::Reset { seq, time_ns: 5 }),
        "a whole-device reset is logged"
    );
}

#[test]
fn narrow_and_wide_accesses() {
    let mut m = Model::new();
    w32(&mut m, SCRATCH, 0xaabb_ccdd);
    assert_eq!(rd(&mut m, Region::Bar0, SCRATCH + 1, 1), 0xcc);
    assert_eq!(rd(&mut m, Region::Bar0, SCRATCH + 2, 2), 0xaabb);
    m.write(Region::Bar0, SCRATCH, &[0; 2], 0).unwrap();
    assert_eq!(r32(&mut m, SCRATCH), 0xaabb_ccdd, "narrow writes drop");
    // 8 bytes at SCRATCH: SCRATCH low, COUNTER high (with its side effect).
    assert_eq!(rd(&mut m, Region::Bar0, SCRATCH, 8), 0xaabb_ccdd);
    assert_eq!(r32(&mut m, COUNTER), 1);
    m.write(
        Region::Bar0,
        OP_OFFSET,
        &0x0000_0010_0000_0020u64.to_le_bytes(),
        0,
    )
    .unwrap();
    assert_eq!(r32(&mut m, OP_OFFSET), 0x20);
    assert_eq!(r32(&mut m, OP_LENGTH), 0x10);
    let c = m.counters();
    assert_eq!((c.narrow, c.wide), (3, 2));
}

#[test]
fn odd_accesses_are_harmless_and_counted() {
    let mut m = Model::new();
    w32(&mut m, SCRATCH, 5);
    assert_eq!(r32(&mut m, 0x800), 0, "undefined");
    w32(&mut m, 0x800, 1);
    assert_eq!(rd(&mut m, Region::Bar0, SCRATCH + 1, 4), 0, "unaligned");
    m.write(Region::Bar0, SCRATCH + 2, &[1, 2, 3, 4], 0)
        .unwrap();
    m.write(Region::Bar0, SCRATCH + 1, &[1, 2], 0).unwrap();
    assert_eq!(rd(&mut m, Region::Bar0, SCRATCH, 3), 0, "bad size");
    m.write(Region::Bar0, SCRATCH, &[], 0).unwrap();
    m.write(Region::Bar0, SCRATCH, &[0; 16], 0).unwrap();
    assert_eq!(r32(&mut m, SCRATCH), 5);
    let c = m.counters().clone();
    assert_eq!((c.undefined, c.unaligned, c.bad_size), (2, 3, 3));
    // The last undefined word of the BAR, and past the end.
    assert_eq!(r32(&mut m, BAR0_SIZE - 4), 0);
    let mut b = [0u8; 4];
    assert_eq!(
        m.read(Region::Bar0, BAR0_SIZE - 2, &mut b, 0),
        Err(AccessError::OutOfRange)
    );
    assert_eq!(
        m.write(Region::Bar2, u64::MAX, &[1], 0),
        Err(AccessError::OutOfRange)
    );
    assert_eq!(
        m.read(Region::Config, 4095, &mut b, 0),
        Err(AccessError::OutOfRange)
    );
    assert_eq!(m.counters().out_of_range, 3);
}

#[test]
fn bar2_takes_any_size_and_alignment() {
    let mut m = Model::new();
    let data: Vec<u8> = (0..=255).collect();
    m.write(Region::Bar2, 3, &data, 0).unwrap();
    assert_eq!(rd(&mut m, Region::Bar2, 4, 2), 0x0201);
    let mut back = vec![0u8; 256];
    m.read(Region::Bar2, 3, &mut back, 0).unwrap();
    assert_eq!(back, data);
    assert_eq!(m.window()[3..259], data[..]);
}

#[test]
fn all_ones_knob_is_surprise_removal() {
    let mut m = Model::new();
    w32(&mut m, INT_ENABLE, INT_ALL);
    w32(&mut m, INT_RAISE, INT_SOFT);
    assert!(m.intx_asserted());
    set(&mut m, |k| k.all_ones = true);
    assert!(!m.intx_asserted(), "a removed device interrupts no more");
    assert_eq!(r32(&mut m, MAGIC), u32::MAX);
    assert_eq!(cfg32(&mut m, 0), u32::MAX);
    assert_eq!(rd(&mut m, Region::Bar2, 0, 8), u64::MAX);
    assert_eq!(rd(&mut m, Region::Bar0, 1, 2), 0xffff);
    w32(&mut m, SCRATCH, 9);
    assert_eq!(m.counters().removed, 5);
    set(&mut m, |k| k.all_ones = false);
    assert_eq!(r32(&mut m, SCRATCH), 0, "writes while removed dropped");
    assert_eq!(
        r32(&mut m, COUNTER),
        0,
        "no read side effects while removed"
    );
    assert!(m.intx_asserted(), "back: pending status interrupts again");
}

#[test]
fn force_error_knob() {
    let mut m = Model::new();
    set(&mut m, |k| k.force_error = true);
    let s = run(&mut m, OP_CRC32, 0, 4, 0);
    assert_eq!(
        s,
        STATUS_DONE | STATUS_ERROR | (ERR_FORCED << STATUS_CODE_SHIFT)
    );
    set(&mut m, |k| k.force_error = false);
    assert_eq!(run(&mut m, OP_CRC32, 0, 4, 0), STATUS_DONE);
}

/// REGISTERS.md's order: BAD_OPCODE before BAD_RANGE before FORCED.
#[test]
fn error_codes_take_precedence_in_the_documented_order() {
    let mut m = Model::new();
    let err = |code: u32| STATUS_DONE | STATUS_ERROR | (code << STATUS_CODE_SHIFT);
    set(&mut m, |k| k.force_error = true);
    assert_eq!(run(&mut m, 0x63, 0xffff, 2, 0), err(ERR_BAD_OPCODE));
    assert_eq!(run(&mut m, 0x63, 0, 4, 0), err(ERR_BAD_OPCODE));
    assert_eq!(run(&mut m, OP_FILL, 0xffff, 2, 0x5a), err(ERR_BAD_RANGE));
    assert_eq!(run(&mut m, OP_FILL, 0, 4, 0x5a), err(ERR_FORCED));
    assert_eq!(
        rd(&mut m, Region::Bar2, 0, 4),
        0,
        "a forced error fills nothing"
    );
    set(&mut m, |k| k.force_error = false);
    assert_eq!(run(&mut m, OP_FILL, 0xffff, 2, 0x5a), err(ERR_BAD_RANGE));
}

#[test]
fn stuck_busy_knob_holds_operation_until_cleared() {
    let mut m = Model::new();
    w32(&mut m, INT_ENABLE, INT_DONE);
    set(&mut m, |k| k.stuck_busy = true);
    m.write(Region::Bar2, 0, b"123456789", 0).unwrap();
    assert_eq!(run(&mut m, OP_CRC32, 0, 9, 0), STATUS_BUSY);
    // Parameters are latched: changing them or ringing again changes nothing.
    w32(&mut m, OP_LENGTH, 1);
    w32(&mut m, CMD, OP_FILL);
    assert_eq!(r32(&mut m, STATUS), STATUS_BUSY);
    assert_eq!(m.counters().doorbell_busy, 1);
    assert!(!m.intx_asserted());
    set(&mut m, |k| k.stuck_busy = false);
    assert_eq!(r32(&mut m, STATUS), STATUS_DONE);
    assert_eq!(r32(&mut m, RESULT), 0xcbf4_3926);
    assert!(m.intx_asserted(), "completion on knob clear interrupts");
}

#[test]
fn stuck_busy_operation_is_abandoned_by_reset() {
    let mut m = Model::new();
    set(&mut m, |k| k.stuck_busy = true);
    assert_eq!(run(&mut m, OP_FILL, 0, 4, 0xff), STATUS_BUSY);
    w32(&mut m, RESET, RESET_KEY);
    set(&mut m, |k| k.stuck_busy = false);
    assert_eq!(r32(&mut m, STATUS), 0);
    assert_eq!(rd(&mut m, Region::Bar2, 0, 4), 0);
}

#[test]
fn drop_irqs_knob_loses_the_edge() {
    let mut m = Model::new();
    w32(&mut m, INT_ENABLE, INT_ALL);
    set(&mut m, |k| k.drop_irqs = true);
    run(&mut m, OP_CRC32, 0, 4, 0);
    assert_eq!(r32(&mut m, INT_STATUS), INT_DONE, "status still latched");
    assert!(!m.intx_asserted());
    assert_eq!(r32(&mut m, IRQ_COUNT), 0);
    set(&mut m, |k| k.drop_irqs = false);
    assert!(!m.intx_asserted(), "a dropped interrupt stays lost");
    w32(&mut m, INT_ACK, INT_ALL);
    run(&mut m, OP_CRC32, 0, 4, 0);
    assert!(m.intx_asserted());
    let c = m.counters();
    assert_eq!((c.irqs_dropped, c.irqs_raised), (1, 1));
}

#[test]
fn wrong_id_knob() {
    let mut m = Model::new();
    set(&mut m, |k| k.wrong_id = true);
    assert_eq!(r32(&mut m, MAGIC), WRONG_MAGIC_VALUE);
    assert_eq!(r32(&mut m, VERSION), WRONG_VERSION_VALUE);
    assert_eq!(cfg32(&mut m, 0), 0x0001_7072, "config ids unchanged");
}

#[test]
fn wrong_version_knob_changes_only_the_major() {
    let mut m = Model::new();
    set(&mut m, |k| k.wrong_version = true);
    assert_eq!(r32(&mut m, MAGIC), MAGIC_VALUE);
    assert_eq!(r32(&mut m, VERSION), WRONG_MAJOR_VALUE);
    assert_ne!(WRONG_MAJOR_VALUE >> 16, VERSION_VALUE >> 16);
    assert_eq!(WRONG_MAJOR_VALUE & 0xffff, VERSION_VALUE & 0xffff);
    set(&mut m, |k| k.wrong_version = false);
    assert_eq!(r32(&mut m, VERSION), VERSION_VALUE);
}

#[test]
fn latency_above_the_bound_is_refused_and_changes_nothing() {
    let mut m = Model::new();
    set(&mut m, |k| k.latency_ns = MAX_LATENCY_NS);
    let mut k = m.knobs().clone();
    k.latency_ns = MAX_LATENCY_NS + 1;
    k.all_ones = true;
    let e = m.set_knobs(k).unwrap_err();
    assert!(e.contains("above the limit of 100000000"), "{e}");
    assert_eq!(m.knobs().latency_ns, MAX_LATENCY_NS);
    assert!(!m.knobs().all_ones, "a refused request changes no knob");
}

#[test]
fn knobs_survive_resets() {
    let mut m = Model::new();
    set(&mut m, |k| k.latency_ns = 5000);
    w32(&mut m, RESET, RESET_KEY);
    m.device_reset(5);
    assert_eq!(m.knobs().latency_ns, 5000);
}

#[test]
fn log_records_every_access_in_order() {
    let mut m = Model::new();
    m.write(Region::Bar0, SCRATCH, &7u32.to_le_bytes(), 100)
        .unwrap();
    let mut b = [0u8; 4];
    m.read(Region::Bar0, COUNTER, &mut b, 200).unwrap();
    m.read(Region::Bar0, 0x801, &mut b[..2], 300).unwrap();
    let _ = m.read(Region::Bar2, BAR2_SIZE, &mut b, 400);
    let log: Vec<_> = m.log().since(0).cloned().collect();
    assert_eq!(log.len(), 4);
    assert_eq!(
        log[0],
        Access {
            seq: 1,
            time_ns: 100,
            region: Region::Bar0,
            offset: SCRATCH,
            size: 4,
            value: Some(7),
            kind: Kind::Write,
            class: Class::Ok,
            fault: None,
        }
    );
    assert_eq!(
        (log[1].seq, log[1].kind, log[1].value),
        (2, Kind::Read, Some(0))
    );
    assert_eq!(log[2].class, Class::Unaligned);
    assert_eq!(
        (log[3].class, log[3].region),
        (Class::OutOfRange, Region::Bar2)
    );
    assert_eq!(m.log().since(2).map(|a| a.seq).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(m.log().since(4).count(), 0);
    m.clear_log();
    assert!(m.log().is_empty());
    m.read(Region::Bar0, MAGIC, &mut b, 500).unwrap();
    assert_eq!(m.log().since(0).next().unwrap().seq, 5, "numbering goes on");
}

#[test]
fn full_log_drops_oldest_and_counts() {
    let mut m = Model::with_log_capacity(3);
    for _ in 0..5 {
        r32(&mut m, MAGIC);
    }
    assert_eq!(
        m.log().since(0).map(|a| a.seq).collect::<Vec<_>>(),
        [3, 4, 5]
    );
    assert_eq!(m.counters().log_overflow, 2);
    assert_eq!(m.counters().bar0_reads, 5);
}

#[test]
fn access_serializes_as_documented() {
    let mut m = Model::new();
    w32(&mut m, SCRATCH, 0x10);
    let a = m.log().since(0).next().unwrap();
    assert_eq!(
        serde_json::to_string(a).unwrap(),
        r#"{"seq":1,"time_ns":0,"region":"bar0","offset":8,"size":4,"value":16,"kind":"write","class":"ok"}"#
    );
}

#[test]
fn the_device_raises_soft_by_itself_like_int_raise_and_logs_no_access() {
    let mut m = Model::new();
    w32(&mut m, INT_ENABLE, INT_SOFT);
    let logged = m.log().len();
    m.raise_soft();
    assert!(m.intx_asserted());
    assert_eq!(r32(&mut m, INT_STATUS), INT_SOFT);
    assert_eq!(r32(&mut m, IRQ_COUNT), 1);
    // Latched: another tick before the ack is no new edge.
    m.raise_soft();
    assert_eq!(r32(&mut m, IRQ_COUNT), 1);
    w32(&mut m, INT_ACK, INT_SOFT);
    assert!(!m.intx_asserted());
    m.raise_soft();
    assert_eq!(r32(&mut m, IRQ_COUNT), 2);
    // The ticks themselves are not accesses: only the reads and writes above are logged.
    assert_eq!(m.log().len(), logged + 5);
    // Disabled: latched, no interrupt.
    w32(&mut m, INT_ENABLE, 0);
    w32(&mut m, INT_ACK, INT_SOFT);
    m.raise_soft();
    assert!(!m.intx_asserted());
}

#[test]
fn irq_ignore_enable_interrupts_after_a_reset() {
    let mut m = Model::new();
    set(&mut m, |k| k.irq_ignore_enable = true);
    // RESET cleared INT_ENABLE; the device interrupts all the same.
    w32(&mut m, RESET, RESET_KEY);
    assert_eq!(r32(&mut m, INT_ENABLE), 0);
    m.raise_soft();
    assert!(m.intx_asserted());
    assert_eq!(r32(&mut m, IRQ_COUNT), 1);
    w32(&mut m, INT_ACK, INT_SOFT);
    assert!(!m.intx_asserted());
    // Off again: the same tick is latched, silently.
    set(&mut m, |k| k.irq_ignore_enable = false);
    m.raise_soft();
    assert!(!m.intx_asserted());
    assert_eq!(r32(&mut m, IRQ_COUNT), 1);
}

#[test]
fn irq_every_us_below_the_bound_is_refused_and_zero_is_off() {
    let mut m = Model::new();
    let mut k = m.knobs().clone();
    k.irq_every_us = MIN_IRQ_EVERY_US - 1;
    let e = m.set_knobs(k).unwrap_err();
    assert!(e.contains("below the limit of 100"), "{e}");
    set(&mut m, |k| k.irq_every_us = MIN_IRQ_EVERY_US);
    assert_eq!(m.knobs().irq_every_us, MIN_IRQ_EVERY_US);
    set(&mut m, |k| k.irq_every_us = 0);
    assert_eq!(m.knobs().irq_every_us, 0);
}

#[test]
fn display_names_are_the_log_names() {
    let json = |v: serde_json::Value| v.as_str().unwrap().to_string();
    for r in [Region::Config, Region::Bar0, Region::Bar2] {
        assert_eq!(r.to_string(), json(serde_json::to_value(r).unwrap()));
    }
    for k in [Kind::Read, Kind::Write] {
        assert_eq!(k.to_string(), json(serde_json::to_value(k).unwrap()));
    }
    use Class::*;
    let classes = [
        Ok, Narrow, Wide, Undefined, ReadOnly, Unaligned, BadSize, OutOfRange, Removed,
    ];
    for c in classes {
        assert_eq!(c.to_string(), json(serde_json::to_value(c).unwrap()));
        assert_eq!(c.to_string().parse(), Result::<Class, String>::Ok(c));
    }
    assert_eq!("bar2".parse(), Result::<Region, String>::Ok(Region::Bar2));
    let e = "bar1".parse::<Region>().unwrap_err();
    assert_eq!(e, r#""bar1" is no Region; one of: config, bar0, bar2"#);
}

#[test]
fn a_fault_strikes_at_the_nth_bar_access_counted_from_arming() {
    let mut m = Model::new();
    r32(&mut m, MAGIC);
    assert!(
        m.arm_fault(FaultKind::Vanish, 0, false).is_err(),
        "at counts from 1"
    );
    m.arm_fault(FaultKind::Vanish, 3, false).unwrap();
    assert_eq!(r32(&mut m, MAGIC), MAGIC_VALUE);
    cfg32(&mut m, 0); // config space is not counted
    w32(&mut m, SCRATCH, 5);
    let _ = m.read(Region::Bar0, BAR0_SIZE, &mut [0; 4], 0); // nor an access past the end
    assert_eq!(m.fault().counted, 2);
    assert_eq!(r32(&mut m, MAGIC), u32::MAX, "vanished at the third");
    let struck = m.fault().struck.unwrap();
    assert_eq!((struck.kind, struck.at), (FaultKind::Vanish, 3));
    let log: Vec<_> = m.log().since(0).cloned().collect();
    let hit = log.iter().find(|a| a.fault.is_some()).unwrap();
    assert_eq!((hit.seq, hit.class), (struck.seq, Class::Removed));
    assert_eq!(log.iter().filter(|a| a.fault.is_some()).count(), 1);
    assert_eq!(m.fault().armed, None, "one strike per arming");
    assert_eq!(cfg32(&mut m, 0), u32::MAX, "gone from config space too");
    m.clear_fault();
    assert_eq!(r32(&mut m, SCRATCH), 5, "back, as it was");
    assert_eq!(m.fault(), &FaultState::default());
}

#[test]
fn an_error_fault_corrupts_one_access() {
    let mut m = Model::new();
    m.arm_fault(FaultKind::Error, 1, false).unwrap();
    assert_eq!(r32(&mut m, MAGIC), !MAGIC_VALUE);
    assert_eq!(r32(&mut m, MAGIC), MAGIC_VALUE, "the next one is right");
    m.arm_fault(FaultKind::Error, 2, false).unwrap();
    w32(&mut m, SCRATCH, 1);
    w32(&mut m, SCRATCH, 2);
    assert_eq!(r32(&mut m, SCRATCH), 1, "the struck write dropped");
    let log: Vec<_> = m.log().since(0).cloned().collect();
    let struck: Vec<_> = log.iter().filter(|a| a.fault.is_some()).collect();
    assert_eq!(struck.len(), 2);
    assert_eq!(
        struck[0].value,
        Some(u64::from(!MAGIC_VALUE)),
        "logged as answered"
    );
    assert_eq!(
        (struck[1].class, struck[1].value),
        (Class::Corrupted, Some(2))
    );
    assert_eq!(m.counters().corrupted, 2);
}

#[test]
fn a_fault_may_count_writes_only() {
    let mut m = Model::new();
    m.arm_fault(FaultKind::Vanish, 2, true).unwrap();
    r32(&mut m, MAGIC);
    w32(&mut m, SCRATCH, 1);
    r32(&mut m, MAGIC);
    assert_eq!(m.fault().counted, 1);
    w32(&mut m, SCRATCH, 2);
    assert_eq!(m.fault().struck.map(|s| s.seq), Some(4));
    assert_eq!(r32(&mut m, MAGIC), u32::MAX);
}

#[test]
fn die_unplug_and_aer_strikes_are_only_recorded_by_the_model() {
    for kind in [FaultKind::Die, FaultKind::Unplug, FaultKind::Aer] {
        let mut m = Model::new();
        m.arm_fault(kind, 1, false).unwrap();
        assert_eq!(r32(&mut m, MAGIC), MAGIC_VALUE, "{kind}");
        assert_eq!(m.fault().struck.map(|s| s.kind), Some(kind));
        assert_eq!(m.log().since(0).next().unwrap().fault, Some(kind));
    }
    assert!("vanish".parse::<FaultKind>().is_ok());
    let e = "vanished".parse::<FaultKind>().unwrap_err();
    assert!(
        e.contains("one of: vanish, error, die, unplug, aer, hang"),
        "{e}"
    );
}

#[test]
fn a_hung_function_answers_config_space_only_until_a_reset() {
    let mut m = Model::new();
    w32(&mut m, INT_ENABLE, INT_ALL);
    w32(&mut m, SCRATCH, 7);
    m.arm_fault(FaultKind::Hang, 1, false).unwrap();
    assert_eq!(
        r32(&mut m, MAGIC),
        u32::MAX,
        "hung from the struck access on"
    );
    w32(&mut m, INT_RAISE, INT_SOFT);
    w32(&mut m, SCRATCH, 8);
    assert!(!m.intx_asserted(), "no interrupt from a hung function");
    assert_eq!(r32(&mut m, SCRATCH), u32::MAX);
    assert_eq!(
        cfg32(&mut m, 0) & 0xffff,
        u32::from(config::VENDOR_ID),
        "config space still answers"
    );
    let log: Vec<_> = m.log().since(0).cloned().collect();
    let hung: Vec<_> = log.iter().filter(|a| a.class == Class::Hung).collect();
    assert_eq!(hung.len(), 4, "every BAR access while hung: {log:?}");
    assert_eq!(hung[0].fault, Some(FaultKind::Hang));
    assert_eq!(m.counters().hung, 4);
    m.device_reset(5);
    assert_eq!(r32(&mut m, MAGIC), MAGIC_VALUE, "a reset brings it back");
    assert_eq!(
        r32(&mut m, SCRATCH),
        0,
        "reset, not resumed: the dropped write is lost"
    );
    m.arm_fault(FaultKind::Hang, 1, false).unwrap();
    r32(&mut m, MAGIC);
    m.clear_fault();
    assert_eq!(
        r32(&mut m, MAGIC),
        MAGIC_VALUE,
        "and so does the host's clear_fault"
    );
}

mod dma {
    use super::super::dma::{Direction, Event, Outcome, VecMemory};
    use super::*;

    const RAM: u64 = 0x4000_0000;

    /// A model with 64 KiB of guest memory at RAM, bus mastering on.
    fn with_ram() -> (Model, std::sync::Arc<VecMemory>) {
        let mut m = Model::new();
        let ram = VecMemory::new(0x1_0000);
        m.dma_map(RAM, 0x1_0000, Some(ram.clone()), Allowed::ReadWrite);
        cfg_w32(
            &mut m,
            0x04,
            u32::from(config::CMD_MEMORY | config::CMD_MASTER),
        );
        (m, ram)
    }

    fn dma(m: &mut Model, op: u32, iova: u64, offset: u32, len: u32) -> u32 {
        w32(m, DMA_ADDR_LO, iova as u32);
        w32(m, DMA_ADDR_HI, (iova >> 32) as u32);
        run(m, op, offset, len, 0)
    }

    fn last(m: &Model) -> Event {
        m.dma().log().last().cloned().expect("a DMA event")
    }

    fn code(status: u32) -> u32 {
        (status >> STATUS_CODE_SHIFT) & 0xff
    }

    #[test]
    fn a_delayed_dma_runs_on_the_devices_clock() {
        let (mut m, ram) = with_ram();
        set(&mut m, |k| k.dma_delay_us = 500);
        ram.write(0x100, b"123456789");
        // The doorbell leaves it BUSY; nothing moved yet.
        assert_eq!(
            dma(&mut m, OP_DMA_TO_DEVICE, RAM + 0x100, 0, 9),
            STATUS_BUSY
        );
        let cmd = m.log().next_seq() - 2; // the CMD write, before the STATUS read
        assert!(m
            .dma()
            .log()
            .iter()
            .all(|e| !matches!(e, Event::Dma { .. })));
        assert_eq!(m.dma_due_ns(), Some(500_000));
        assert!(!m.tick(499_999), "not yet due");
        assert_eq!(
            r32(&mut m, STATUS),
            STATUS_BUSY,
            "a read does not wait for it"
        );
        assert!(m.tick(500_000));
        assert_eq!(r32(&mut m, STATUS), STATUS_DONE);
        assert_eq!(r32(&mut m, INT_STATUS) & INT_DONE, INT_DONE);
        let before = m.log().next_seq() - 2; // the STATUS read after the tick
        assert!(matches!(
            last(&m),
            Event::Dma { seq, before: b, waited: false, time_ns: 500_000, .. } if seq == cmd && b == before
        ));
        assert_eq!(m.dma_due_ns(), None);
        // Other operations stay synchronous.
        assert_eq!(run(&mut m, OP_CRC32, 0, 9, 0), STATUS_DONE);
    }

    #[test]
    fn a_write_waits_for_the_delayed_dma_in_flight() {
        let (mut m, _ram) = with_ram();
        set(&mut m, |k| k.dma_delay_us = 20_000);
        assert_eq!(dma(&mut m, OP_DMA_FROM_DEVICE, RAM, 0, 16), STATUS_BUSY);
        // remove()'s RESET: the engine finishes the DMA, then takes the write.
        let reset = m.log().next_seq();
        w32(&mut m, RESET, RESET_KEY);
        assert!(matches!(
            last(&m),
            Event::Dma { before, waited: true, outcome: Outcome::Ok, .. } if before == reset
        ));
        assert_eq!(r32(&mut m, STATUS), 0, "then the reset cleared everything");
        assert!(!m.tick(u64::MAX), "nothing left to run");
    }

    #[test]
    fn a_stuck_busy_device_holds_a_delayed_dma_and_the_delay_is_bounded() {
        let (mut m, _ram) = with_ram();
        set(&mut m, |k| {
            k.dma_delay_us = 100;
            k.stuck_busy = true;
        });
        assert_eq!(dma(&mut m, OP_DMA_FROM_DEVICE, RAM, 0, 16), STATUS_BUSY);
        assert!(!m.tick(u64::MAX));
        w32(&mut m, SCRATCH, 1);
        assert!(m
            .dma()
            .log()
            .iter()
            .all(|e| !matches!(e, Event::Dma { .. })));
        let mut k = m.knobs().clone();
        k.dma_delay_us = MAX_DMA_DELAY_US + 1;
        assert!(m.set_knobs(k).unwrap_err().contains("dma_delay_us"));
    }

    #[test]
    fn a_device_that_is_gone_runs_no_delayed_dma() {
        let (mut m, _ram) = with_ram();
        set(&mut m, |k| k.dma_delay_us = 100);
        assert_eq!(dma(&mut m, OP_DMA_FROM_DEVICE, RAM, 0, 16), STATUS_BUSY);
        let mut k = m.knobs().clone();
        k.all_ones = true;
        // Raised while the DMA waits on the device's clock: `set_knobs` must not run it either.
        m.set_knobs(k).unwrap();
        assert!(!m.tick(u64::MAX));
        w32(&mut m, SCRATCH, 1);
        let dmas = m
            .dma()
            .log()
            .iter()
            .filter(|e| matches!(e, Event::Dma { .. }));
        assert_eq!(dmas.count(), 0);
    }

    #[test]
    fn copies_both_ways_and_sums_guest_memory() {
        let (mut m, ram) = with_ram();
        ram.write(0x100, b"123456789");
        assert_eq!(
            dma(&mut m, OP_DMA_TO_DEVICE, RAM + 0x100, 0x20, 9),
            STATUS_DONE
        );
        assert_eq!(&m.window()[0x20..0x29], b"123456789");
        assert_eq!(r32(&mut m, RESULT), 0xcbf4_3926);
        let seq = m.log().next_seq() - 3; // the CMD write, before the STATUS and RESULT reads
        assert_eq!(
            last(&m),
            Event::Dma {
                seq,
                before: seq,
                waited: false,
                time_ns: 0,
                iova: RAM + 0x100,
                len: 9,
                dir: Direction::ToDevice,
                crc_only: false,
                outcome: Outcome::Ok,
                crc: Some(0xcbf4_3926),
            }
        );
        run(&mut m, OP_INVERT, 0x20, 9, 0);
        assert_eq!(
            dma(&mut m, OP_DMA_FROM_DEVICE, RAM + 0xfff0, 0x20, 9),
            STATUS_DONE
        );
        let back: Vec<u8> = b"123456789".iter().map(|b| !b).collect();
        assert_eq!(&ram.bytes()[0xfff0..0xfff9], &back[..]);
        assert!(matches!(
            last(&m),
            Event::Dma {
                dir: Direction::FromDevice,
                outcome: Outcome::Ok,
                ..
            }
        ));
        assert_eq!(
            dma(&mut m, OP_DMA_CRC32, RAM + 0x100, 0xdead, 9),
            STATUS_DONE
        );
        assert_eq!(r32(&mut m, RESULT), 0xcbf4_3926);
        assert!(matches!(
            last(&m),
            Event::Dma {
                crc_only: true,
                crc: Some(0xcbf4_3926),
                ..
            }
        ));
        assert_eq!(r32(&mut m, INT_STATUS) & INT_DONE, INT_DONE);
    }

    #[test]
    fn refuses_without_bus_master_past_the_mask_and_outside_mapped_memory() {
        let (mut m, ram) = with_ram();
        ram.write(0, &[7; 16]);
        let window = m.window().to_vec();
        for (setup, iova, len, err, outcome) in [
            (0u16, RAM, 16, ERR_NO_BUS_MASTER, Outcome::NoBusMaster),
            (config::CMD_MASTER, 1 << 32, 16, ERR_DMA_MASK, Outcome::Mask),
            (
                config::CMD_MASTER,
                0xffff_fff8,
                16,
                ERR_DMA_MASK,
                Outcome::Mask,
            ),
            (
                config::CMD_MASTER,
                RAM - 8,
                16,
                ERR_DMA_FAULT,
                Outcome::Fault,
            ),
            (
                config::CMD_MASTER,
                RAM + 0xfff8,
                16,
                ERR_DMA_FAULT,
                Outcome::Fault,
            ),
        ] {
            cfg_w32(&mut m, 0x04, u32::from(config::CMD_MEMORY | setup));
            for op in [OP_DMA_TO_DEVICE, OP_DMA_FROM_DEVICE, OP_DMA_CRC32] {
                let s = dma(&mut m, op, iova, 0, len);
                assert_eq!(s & STATUS_ERROR, STATUS_ERROR, "{iova:#x} op {op}");
                assert_eq!(code(s), err, "{iova:#x} op {op}");
                assert!(
                    matches!(last(&m), Event::Dma { outcome: o, crc: None, .. } if o == outcome),
                    "{:?}",
                    last(&m)
                );
            }
        }
        assert_eq!(m.window(), &window[..], "a refused DMA moved nothing");
        assert_eq!(&ram.bytes()[..16], &[7; 16]);
        // A malformed request is never a DMA: not logged.
        let n = m.dma().log().len();
        assert_eq!(
            code(dma(&mut m, OP_DMA_TO_DEVICE, RAM, 0xfff0, 0x20)),
            ERR_BAD_RANGE
        );
        assert_eq!(
            code(dma(&mut m, OP_DMA_CRC32, RAM, 0, 0x1_0001)),
            ERR_BAD_RANGE
        );
        assert_eq!(m.dma().log().len(), n);
        // The forced error refuses a DMA that would have run.
        cfg_w32(
            &mut m,
            0x04,
            u32::from(config::CMD_MEMORY | config::CMD_MASTER),
        );
        set(&mut m, |k| k.force_error = true);
        assert_eq!(
            code(dma(&mut m, OP_DMA_FROM_DEVICE, RAM, 0, 16)),
            ERR_FORCED
        );
        assert!(matches!(
            last(&m),
            Event::Dma {
                outcome: Outcome::Forced,
                ..
            }
        ));
    }

    #[test]
    fn spans_adjacent_windows_and_forgets_unmapped_ones() {
        let mut m = Model::new();
        let (a, b) = (VecMemory::new(0x1000), VecMemory::new(0x1000));
        m.dma_map(0x1000, 0x1000, Some(a.clone()), Allowed::ReadWrite);
        m.dma_map(0x2000, 0x1000, Some(b.clone()), Allowed::ReadWrite);
        m.dma_map(0x8000, 0x1000, None, Allowed::ReadWrite);
        cfg_w32(&mut m, 0x04, u32::from(config::CMD_MASTER));
        run(&mut m, OP_FILL, 0, 0x20, 0x5a);
        assert_eq!(
            dma(&mut m, OP_DMA_FROM_DEVICE, 0x1ff0, 0, 0x20),
            STATUS_DONE
        );
        assert_eq!(&a.bytes()[0xff0..], &[0x5a; 16]);
        assert_eq!(&b.bytes()[..16], &[0x5a; 16]);
        assert_eq!(
            code(dma(&mut m, OP_DMA_CRC32, 0x8000, 0, 4)),
            ERR_DMA_FAULT,
            "no fd: unreachable"
        );
        m.dma_unmap(0x2000, 0x1000);
        assert_eq!(
            code(dma(&mut m, OP_DMA_CRC32, 0x1ff0, 0, 0x20)),
            ERR_DMA_FAULT
        );
        assert_eq!(dma(&mut m, OP_DMA_CRC32, 0x1ff0, 0, 0x10), STATUS_DONE);
        assert_eq!(
            m.dma().windows().collect::<Vec<_>>(),
            vec![(0x1000, 0x1000)]
        );
        assert!(m.dma().log().iter().any(|e| matches!(
            e,
            Event::Unmap {
                iova: 0x2000,
                windows: 1,
                ..
            }
        )));
        assert!(m.dma().log().iter().any(|e| matches!(
            e,
            Event::Map {
                iova: 0x8000,
                memory: false,
                ..
            }
        )));
        // Every event round-trips through its JSON line.
        for e in m.dma().log() {
            let line = serde_json::to_string(e).unwrap();
            assert_eq!(&serde_json::from_str::<Event>(&line).unwrap(), e, "{line}");
        }
    }

    #[test]
    fn honours_the_maps_read_and_write_flags() {
        let mut m = Model::new();
        let (ro, wo) = (VecMemory::new(0x1000), VecMemory::new(0x1000));
        m.dma_map(0x1000, 0x1000, Some(ro.clone()), Allowed::Read);
        m.dma_map(0x2000, 0x1000, Some(wo.clone()), Allowed::Write);
        cfg_w32(&mut m, 0x04, u32::from(config::CMD_MASTER));
        run(&mut m, OP_FILL, 0, 0x20, 0x5a);
        // The device may read the read-only window and write the write-only one...
        assert_eq!(dma(&mut m, OP_DMA_CRC32, 0x1000, 0, 0x10), STATUS_DONE);
        assert_eq!(
            dma(&mut m, OP_DMA_FROM_DEVICE, 0x2000, 0, 0x10),
            STATUS_DONE
        );
        assert_eq!(&wo.bytes()[..16], &[0x5a; 16]);
        // ...and neither the other way, nor a range that crosses into the wrong one.
        for (op, at) in [
            (OP_DMA_FROM_DEVICE, 0x1000),
            (OP_DMA_TO_DEVICE, 0x2000),
            (OP_DMA_CRC32, 0x1ff8),
        ] {
            assert_eq!(
                code(dma(&mut m, op, at, 0, 0x10)),
                ERR_DMA_FAULT,
                "{op} {at:#x}"
            );
            assert!(matches!(
                last(&m),
                Event::Dma {
                    outcome: Outcome::Denied,
                    ..
                }
            ));
        }
        assert_eq!(
            ro.bytes(),
            vec![0; 0x1000],
            "nothing written to the read-only window"
        );
        let map = serde_json::to_string(&m.dma().log()[0]).unwrap();
        assert!(map.contains(r#""allowed":"read""#), "{map}");
    }

    #[test]
    fn a_stuck_dma_runs_when_released_and_checks_bus_master_then() {
        let (mut m, _ram) = with_ram();
        set(&mut m, |k| k.stuck_busy = true);
        assert_eq!(dma(&mut m, OP_DMA_FROM_DEVICE, RAM, 0, 8), STATUS_BUSY);
        assert!(m
            .dma()
            .log()
            .iter()
            .all(|e| !matches!(e, Event::Dma { .. })));
        cfg_w32(&mut m, 0x04, u32::from(config::CMD_MEMORY));
        set(&mut m, |k| k.stuck_busy = false);
        assert_eq!(code(r32(&mut m, STATUS)), ERR_NO_BUS_MASTER);
        assert!(matches!(
            last(&m),
            Event::Dma {
                outcome: Outcome::NoBusMaster,
                ..
            }
        ));
    }

    #[test]
    fn dma_registers_read_back_and_reset() {
        let (mut m, _) = with_ram();
        assert_eq!(r32(&mut m, DMA_BITS), DMA_ADDRESS_BITS);
        w32(&mut m, DMA_BITS, 64);
        assert_eq!(r32(&mut m, DMA_BITS), 32, "read-only");
        w32(&mut m, DMA_ADDR_LO, 0x1234_5678);
        w32(&mut m, DMA_ADDR_HI, 0x9);
        assert_eq!(
            (r32(&mut m, DMA_ADDR_LO), r32(&mut m, DMA_ADDR_HI)),
            (0x1234_5678, 9)
        );
        w32(&mut m, RESET, RESET_KEY);
        assert_eq!((r32(&mut m, DMA_ADDR_LO), r32(&mut m, DMA_ADDR_HI)), (0, 0));
        assert_eq!(m.dma().windows().count(), 1, "a reset keeps QEMU's maps");
    }
}

#[test]
fn caps_reads_stream_while_the_knob_is_set() {
    let mut m = Model::new();
    assert_eq!(r32(&mut m, CAPS), 0);
    set(&mut m, |k| k.stream = true);
    assert_eq!(r32(&mut m, CAPS), regmap::CAP_STREAM);
    w32(&mut m, CAPS, 0);
    assert_eq!(r32(&mut m, CAPS), regmap::CAP_STREAM, "read-only");
}
