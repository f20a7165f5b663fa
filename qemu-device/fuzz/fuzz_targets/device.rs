//! Register-access sequences, resets, knob changes and raw control lines against the model.
//! Besides "no panic", it checks invariants REGISTERS.md promises.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use qemu_device::control::handle_line;
use qemu_device::model::dma::{self, Event, Outcome, VecMemory};
use qemu_device::model::{bar0, config, Knobs, Model, Region, BAR0_SIZE, BAR2_SIZE};

/// DMA_MAP's read/write flags.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Allowed {
    ReadWrite,
    Read,
    Write,
}

impl From<Allowed> for dma::Allowed {
    fn from(a: Allowed) -> Self {
        match a {
            Allowed::ReadWrite => dma::Allowed::ReadWrite,
            Allowed::Read => dma::Allowed::Read,
            Allowed::Write => dma::Allowed::Write,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Step {
    Read {
        region: u8,
        offset: Offset,
        size: u8,
    },
    Write {
        region: u8,
        offset: Offset,
        data: Vec<u8>,
    },
    /// A 32-bit register write with a chosen value: reaches deep states sooner.
    Reg {
        index: u8,
        value: u32,
    },
    Knobs {
        bits: u8,
    },
    Control(String),
    /// A well-formed control request, so the fuzzer need not discover JSON first.
    Command {
        which: u8,
        n: u64,
        bits: u8,
    },
    DeviceReset,
    /// QEMU maps guest memory (with or without a file descriptor) or unmaps it.
    DmaMap {
        page: u8,
        pages: u8,
        memory: bool,
        allowed: Allowed,
    },
    DmaUnmap {
        page: u8,
        pages: u8,
    },
    /// Bus Master Enable on or off.
    Master(bool),
}

#[derive(Arbitrary, Debug)]
enum Offset {
    Near(u16),
    Any(u64),
}

fn region(r: u8) -> Region {
    match r % 3 {
        0 => Region::Config,
        1 => Region::Bar0,
        _ => Region::Bar2,
    }
}

const REGS: [u64; 19] = [
    bar0::MAGIC,
    bar0::VERSION,
    bar0::SCRATCH,
    bar0::COUNTER,
    bar0::CMD,
    bar0::STATUS,
    bar0::OP_OFFSET,
    bar0::OP_LENGTH,
    bar0::OP_ARG,
    bar0::RESULT,
    bar0::INT_STATUS,
    bar0::INT_ENABLE,
    bar0::INT_RAISE,
    bar0::INT_ACK,
    bar0::IRQ_COUNT,
    bar0::RESET,
    bar0::DMA_ADDR_LO,
    bar0::DMA_ADDR_HI,
    bar0::DMA_BITS,
];

/// Guest memory for the DMA steps: 16 pages from 0xf000 on, so that ranges can start before it,
/// end after it and cross the 32-bit mask when DMA_ADDR_HI is set.
const PAGE: u64 = 0x1000;

fuzz_target!(|steps: Vec<Step>| {
    let mut m = Model::with_log_capacity(64);
    let mut t = 0u64;
    let mut dmas = 0;
    for step in steps {
        t += 1;
        let seq_before = m.log().next_seq();
        let mut logged = true;
        match step {
            Step::Read {
                region: r,
                offset,
                size,
            } => {
                let region = region(r);
                let off = match offset {
                    Offset::Near(o) => u64::from(o) % (BAR2_SIZE + 16),
                    Offset::Any(o) => o,
                };
                let mut buf = vec![0u8; usize::from(size % 20)];
                let ok = m.read(region, off, &mut buf, t).is_ok();
                if ok && m.knobs().all_ones {
                    assert!(buf.iter().all(|&b| b == 0xff));
                }
                if ok && region == Region::Bar0 && buf.len() == 4 && off == bar0::MAGIC {
                    let v = u32::from_le_bytes(buf[..4].try_into().unwrap());
                    let k = m.knobs();
                    let want = if k.all_ones {
                        u32::MAX
                    } else if k.wrong_id {
                        bar0::WRONG_MAGIC_VALUE
                    } else {
                        bar0::MAGIC_VALUE
                    };
                    assert_eq!(v, want);
                }
            }
            Step::Write {
                region: r,
                offset,
                data,
            } => {
                let off = match offset {
                    Offset::Near(o) => u64::from(o) % (BAR0_SIZE + 16),
                    Offset::Any(o) => o,
                };
                let _ = m.write(region(r), off, &data, t);
            }
            Step::Reg { index, value } => {
                let off = REGS[usize::from(index) % REGS.len()];
                m.write(Region::Bar0, off, &value.to_le_bytes(), t).unwrap();
            }
            Step::Knobs { bits } => {
                logged = false;
                m.set_knobs(Knobs {
                    all_ones: bits & 1 != 0,
                    force_error: bits & 2 != 0,
                    latency_ns: u64::from(bits >> 6),
                    stuck_busy: bits & 4 != 0,
                    drop_irqs: bits & 8 != 0,
                    wrong_id: bits & 16 != 0,
                    wrong_version: bits & 32 != 0,
                    ..Knobs::default()
                })
                .expect("small latencies are accepted");
            }
            Step::Control(line) => {
                logged = false;
                let reply = handle_line(&mut m, &line);
                assert!(reply["ok"].is_boolean());
            }
            Step::Command { which, n, bits } => {
                logged = false;
                let b = |i: u8| bits & (1 << i) != 0;
                let line = match which % 9 {
                    0 => format!(
                        r#"{{"cmd":"set_knobs","all_ones":{},"stuck_busy":{},"drop_irqs":{}}}"#,
                        b(0),
                        b(1),
                        b(2)
                    ),
                    1 => format!(
                        r#"{{"cmd":"set_knobs","force_error":{},"wrong_id":{}}}"#,
                        b(3),
                        b(4)
                    ),
                    2 => r#"{"cmd":"clear_knobs"}"#.into(),
                    3 => format!(r#"{{"cmd":"log","since":{n},"limit":{}}}"#, bits),
                    4 => r#"{"cmd":"reset_log"}"#.into(),
                    5 => r#"{"cmd":"counters"}"#.into(),
                    6 => r#"{"cmd":"reset_counters"}"#.into(),
                    7 => r#"{"cmd":"state"}"#.into(),
                    _ => r#"{"cmd":"knobs"}"#.into(),
                };
                assert_eq!(handle_line(&mut m, &line)["ok"], true, "{line}");
            }
            Step::DeviceReset => {
                logged = false;
                m.device_reset();
            }
            Step::DmaMap {
                page,
                pages,
                memory,
                allowed,
            } => {
                logged = false;
                let size = u64::from(pages % 17) * PAGE;
                let mem = memory.then(|| VecMemory::new(size as usize) as _);
                m.dma_map(0xf000 + u64::from(page % 17) * PAGE, size, mem, allowed.into());
            }
            Step::DmaUnmap { page, pages } => {
                logged = false;
                m.dma_unmap(0xf000 + u64::from(page % 17) * PAGE, u64::from(pages % 17) * PAGE);
            }
            Step::Master(on) => {
                let cmd = if on { config::CMD_MASTER } else { 0 } | config::CMD_MEMORY;
                m.write(Region::Config, 4, &cmd.to_le_bytes(), t).unwrap();
            }
        }
        // A DMA moved data only with bus mastering on, inside the mask and mapped memory.
        let dmas_before = dmas;
        dmas = m.dma().log().len();
        for e in &m.dma().log()[dmas_before..] {
            if let Event::Dma { iova, len, outcome: Outcome::Ok, .. } = *e {
                assert!(m.registers().status & bar0::STATUS_ERROR == 0);
                let end = iova + u64::from(len);
                assert!(len == 0 || end - 1 < 1 << bar0::DMA_ADDRESS_BITS);
                let mut covered = iova;
                while covered < end {
                    let Some((w, s)) = m.dma().windows().find(|&(w, s)| covered >= w && covered < w + s)
                    else {
                        panic!("DMA {iova:#x}+{len:#x} outside mapped memory at {covered:#x}");
                    };
                    covered = w + s;
                }
            }
        }
        // Every access is logged exactly once; nothing else is.
        let want = seq_before + u64::from(logged);
        assert_eq!(m.log().next_seq(), want);
        let seqs: Vec<u64> = m.log().since(0).map(|a| a.seq).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));
        assert!(seqs.len() <= 64);
        // Interrupt and status invariants.
        let r = m.registers();
        if m.intx_asserted() {
            assert!(r.int_status & r.int_enable != 0 && !m.knobs().all_ones);
        }
        if r.status & bar0::STATUS_BUSY != 0 {
            assert!(m.knobs().stuck_busy);
        }
        assert_eq!(r.int_enable & !bar0::INT_ALL, 0);
        assert_eq!(r.int_status & !bar0::INT_ALL, 0);
    }
});
