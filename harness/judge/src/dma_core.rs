//! The DMA core's own record against the driver's `# dma` lines.
//!
//! Every boot the DMA oracle judges passes `trace_event=dma tp_printk`: the kernel's DMA
//! mapping core (kernel/dma/mapping.c, include/trace/events/dma.h) then prints each map,
//! unmap, allocation, free and sync it makes, with the device, the address, the size and the
//! direction, into the same printk stream as the driver's lines. The driver's lines say what
//! it mapped and when it ends it; these say what the kernel mapped for the device. They must
//! agree: each `# dma map` a mapping the core made just before, of that address, size and
//! direction (`coherent`: an allocation); each core unmap after the driver said `# dma unmap`,
//! in the direction it was mapped with;
//! nothing mapped for the device that the driver never reported, nothing it said it ended left
//! mapped. So a mapping's kind, extent and end are the kernel's word, not the driver's: a
//! buffer mapped the wrong way round fails here even where no IOMMU and no bounce buffer makes
//! the direction matter.

use crate::console::strip_timestamp;
use crate::dma_lines::{parse as parse_driver, Line, MapKind};
use crate::driver::{driver_text, is_event};
use std::collections::BTreeMap;

/// What the harness adds to the command line of every boot this module judges.
pub const CMDLINE: &str = " trace_event=dma tp_printk";

/// A DMA API direction (`enum dma_data_direction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Bidirectional,
    ToDevice,
    FromDevice,
}

impl Dir {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "BIDIRECTIONAL" => Some(Dir::Bidirectional),
            "TO_DEVICE" => Some(Dir::ToDevice),
            "FROM_DEVICE" => Some(Dir::FromDevice),
            _ => None,
        }
    }
}

/// One event of the DMA core for a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A streaming mapping (`dma_map_page`, 7.x's `dma_map_phys`, `dma_map_resource`), or a
    /// scatter-gather one (`dma_map_sg`: one segment per address).
    Map {
        dir: Dir,
        segments: Vec<(u64, u64)>,
        phys: Vec<u64>,
    },
    /// A coherent allocation (`dma_alloc`, `dma_alloc_pages`).
    Alloc { addr: u64, size: u64 },
    /// A streaming mapping ended (`dma_unmap_page`/`_phys`/`_resource`), by its address.
    Unmap { dir: Dir, addr: u64 },
    /// A scatter-gather mapping ended (`dma_unmap_sg`), by its pages' physical addresses.
    UnmapSg { dir: Dir, phys: Vec<u64> },
    /// A coherent allocation freed (`dma_free`, `dma_free_pages`).
    Free { addr: u64 },
}

/// `key=value` of a trace line.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// `{0x1,0x2}` (`__print_array`), in hex or decimal.
fn array(s: &str, radix: u32) -> Option<Vec<u64>> {
    let inner = s.strip_prefix('{')?.strip_suffix('}')?;
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner
        .split(',')
        .map(|v| match v.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => u64::from_str_radix(v, radix).ok(),
        })
        .collect()
}

/// Parses a line the DMA core printed (`NAME: DEVICE key=value …`, after the printk stamp):
/// the device and the event; `None` if the line is not one, an error if it is one that does
/// not parse (a format this judge does not know must not pass unseen).
pub fn parse(line: &str) -> Option<Result<(String, Event), String>> {
    let text = strip_timestamp(line);
    let (name, rest) = text.split_once(": ")?;
    let known = [
        "dma_map_page",
        "dma_map_phys",
        "dma_map_resource",
        "dma_map_sg",
        "dma_unmap_page",
        "dma_unmap_phys",
        "dma_unmap_resource",
        "dma_unmap_sg",
        "dma_alloc",
        "dma_alloc_pages",
        "dma_free",
        "dma_free_pages",
    ];
    if !known.contains(&name) {
        return None;
    }
    let device = rest.split_whitespace().next()?.to_string();
    let dir = || field(rest, "dir").and_then(Dir::parse);
    let addr = || field(rest, "dma_addr").and_then(hex);
    let event = (|| match name {
        "dma_map_sg" => {
            let addrs = array(field(rest, "dma_addrs")?, 16)?;
            let sizes = array(field(rest, "sizes")?, 10)?;
            if addrs.len() != sizes.len() || rest.contains("[TRUNCATED]") {
                return None;
            }
            Some(Event::Map {
                dir: dir()?,
                segments: addrs.into_iter().zip(sizes).collect(),
                phys: array(field(rest, "phys_addrs")?, 16)?,
            })
        }
        "dma_unmap_sg" => Some(Event::UnmapSg {
            dir: dir()?,
            phys: array(field(rest, "phys_addrs")?, 16)?,
        }),
        n if n.starts_with("dma_map_") => Some(Event::Map {
            dir: dir()?,
            segments: vec![(addr()?, field(rest, "size")?.parse().ok()?)],
            phys: vec![field(rest, "phys_addr").and_then(hex)?],
        }),
        n if n.starts_with("dma_unmap_") => Some(Event::Unmap {
            dir: dir()?,
            addr: addr()?,
        }),
        n if n.starts_with("dma_alloc") => Some(Event::Alloc {
            addr: addr()?,
            size: field(rest, "size")?.parse().ok()?,
        }),
        _ => Some(Event::Free { addr: addr()? }),
    })();
    Some(
        event
            .map(|e| (device, e))
            .ok_or_else(|| format!("a DMA core line this judge cannot read: `{text}`")),
    )
}

/// Whether the boot asked the kernel for its DMA record, by the kernel's own copy of its
/// command line.
pub fn traced(lines: &[String]) -> bool {
    lines
        .iter()
        .map(|l| strip_timestamp(l))
        .find(|l| l.starts_with("Kernel command line:"))
        .is_some_and(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.contains(&"tp_printk") && w.contains(&"trace_event=dma")
        })
}

/// What the record showed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Agreement {
    /// The driver's mappings the core made, as reported.
    pub mappings: usize,
    /// The driver's ended mappings the core unmapped or freed after it said so.
    pub ended: usize,
}

impl Agreement {
    pub fn summary(&self) -> String {
        format!(
            "; the DMA core's record agrees: each of the driver's {} mappings made by the kernel as reported (address, size, direction), {} unmapped by the kernel only after the driver said it ended them, and nothing else mapped for the device",
            self.mappings, self.ended
        )
    }
}

/// A mapping the core made for our device and the driver has not yet matched or ended.
#[derive(Clone, Debug)]
struct Made {
    line: usize,
    event: Event,
}

impl Made {
    /// Whether it is the one the driver reports as `kind` at `iova`+`len`: `None` if it is
    /// at another address, else whether kind and size agree too.
    fn fits(&self, kind: MapKind, iova: u64, len: u64) -> Option<bool> {
        match &self.event {
            Event::Alloc { addr, size } if *addr == iova => {
                Some(kind == MapKind::Coherent && *size == len)
            }
            Event::Map { dir, segments, .. } if segments.first().map(|s| s.0) == Some(iova) => {
                let total: u64 = segments.iter().map(|s| s.1).sum();
                let same = matches!(
                    (kind, dir),
                    (MapKind::ToDevice, Dir::ToDevice)
                        | (MapKind::FromDevice, Dir::FromDevice)
                        | (MapKind::Bidirectional, Dir::Bidirectional)
                );
                Some(same && (total == len || segments.len() > 1 && total >= len))
            }
            _ => None,
        }
    }

    /// Whether `end` (an unmap or free) ends it.
    fn ended_by(&self, end: &Event) -> bool {
        match (&self.event, end) {
            (Event::Alloc { addr, .. }, Event::Free { addr: a }) => addr == a,
            (Event::Map { segments, .. }, Event::Unmap { addr, .. }) => {
                segments.first().map(|s| s.0) == Some(*addr)
            }
            (Event::Map { phys, .. }, Event::UnmapSg { phys: p, .. }) => phys == p,
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match &self.event {
            Event::Alloc { addr, size } => format!("a coherent allocation at {addr:#x}+{size:#x}"),
            Event::Map { dir, segments, .. } => {
                let s: Vec<String> = segments
                    .iter()
                    .map(|(a, n)| format!("{a:#x}+{n:#x}"))
                    .collect();
                format!("a {dir:?} mapping of {}", s.join(" "))
            }
            e => format!("{e:?}"),
        }
    }
}

fn kind_name(kind: MapKind) -> &'static str {
    match kind {
        MapKind::Coherent => "coherent",
        MapKind::Bidirectional => "bidirectional",
        MapKind::ToDevice => "to_device",
        MapKind::FromDevice => "from_device",
    }
}

/// Holds the driver's `# dma` lines against the DMA core's record, line by line in console
/// order (both are printk records). Only the devices our driver printed for count.
pub fn agrees(lines: &[String]) -> Result<Agreement, String> {
    let ours: Vec<String> = lines
        .iter()
        .filter_map(|l| {
            let rest = strip_timestamp(l).strip_prefix("pci_rig ")?;
            Some(rest.split_once(": ")?.0.to_string())
        })
        .collect();
    let mut a = Agreement::default();
    // Made by the core, not yet reported by the driver.
    let mut made: Vec<Made> = Vec::new();
    // The driver's live mappings of its current binding, by id, and those it said it ended
    // that the core has not unmapped yet.
    let mut live: BTreeMap<u64, Made> = BTreeMap::new();
    let mut ending: Vec<(u64, Made)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(core) = parse(line) {
            let (device, event) = core?;
            if !ours.contains(&device) {
                continue;
            }
            match event {
                Event::Map { .. } | Event::Alloc { .. } => made.push(Made { line: i, event }),
                end => {
                    if let Some(k) = ending.iter().position(|(_, m)| m.ended_by(&end)) {
                        let (id, m) = ending.remove(k);
                        if let (
                            Event::Map { dir, .. },
                            Event::Unmap { dir: d, .. } | Event::UnmapSg { dir: d, .. },
                        ) = (&m.event, &end)
                        {
                            if dir != d {
                                return Err(format!(
                                    "the driver's mapping {id} ({}) was unmapped as {d:?} at console line {}: the DMA API wants the direction it was mapped with",
                                    m.describe(),
                                    i + 1
                                ));
                            }
                        }
                        a.ended += 1;
                    } else if let Some((id, m)) = live.iter().find(|(_, m)| m.ended_by(&end)) {
                        return Err(format!(
                            "the DMA core ended the driver's mapping {id} ({}) at console line {}, but the driver had not said it ended it: the device may still be using it",
                            m.describe(),
                            i + 1
                        ));
                    } else if let Some(k) = made.iter().position(|m| m.ended_by(&end)) {
                        made.remove(k);
                    } else {
                        return Err(format!(
                            "the DMA core ended {end:?} for {device} at console line {}, which it never mapped for it",
                            i + 1
                        ));
                    }
                }
            }
            continue;
        }
        if is_event(line, "probe_begin") {
            live.clear();
            continue;
        }
        let Some(Some(Ok(driver))) = driver_text(line).map(parse_driver) else {
            continue;
        };
        match driver {
            Line::Map {
                id,
                kind,
                iova,
                len,
            } => {
                let Some(k) = made.iter().position(|m| m.fits(kind, iova, len).is_some()) else {
                    return Err(format!(
                        "the driver reports DMA mapping {id} as {} at {iova:#x}+{len:#x} (console line {}), but the DMA core made no mapping there for the device",
                        kind_name(kind),
                        i + 1
                    ));
                };
                let m = made.remove(k);
                if m.fits(kind, iova, len) != Some(true) {
                    return Err(format!(
                        "the driver reports DMA mapping {id} as {} at {iova:#x}+{len:#x} (console line {}), but the DMA core made {} (console line {})",
                        kind_name(kind),
                        i + 1,
                        m.describe(),
                        m.line + 1
                    ));
                }
                a.mappings += 1;
                live.insert(id, m);
            }
            Line::Unmap { id } => {
                if let Some(m) = live.remove(&id) {
                    ending.push((id, m));
                }
            }
            _ => {}
        }
    }
    if let Some(m) = made.first() {
        return Err(format!(
            "the DMA core made {} for the device (console line {}) that the driver never reported",
            m.describe(),
            m.line + 1
        ));
    }
    if let Some((id, m)) = ending.first() {
        return Err(format!(
            "the driver said it ended DMA mapping {id} ({}), but the DMA core never unmapped or freed it",
            m.describe()
        ));
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    }

    const CLEAN: &str = "
        <6>[    3.49] pci_rig 0000:01:00.0: event probe_begin
        <4>[    3.49] dma_alloc: 0000:01:00.0 dir=BIDIRECTIONAL dma_addr=71d000 size=2048 virt_addr=00000000deadbeef flags=GFP_KERNEL attrs=
        <6>[    3.49] pci_rig 0000:01:00.0: # dma map 1 coherent 0x71d000 0x800
        <4>[    3.52] dma_map_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=6e5c00 size=1024 phys_addr=6e5c00 attrs=
        <6>[    3.52] pci_rig 0000:01:00.0: # dma map 2 to_device 0x6e5c00 0x400
        <4>[    3.52] dma_map_page: 0000:00:02.0 dir=FROM_DEVICE dma_addr=1000 size=4096 phys_addr=1000 attrs=
        <6>[    3.54] pci_rig 0000:01:00.0: # dma unmap 2
        <4>[    3.54] dma_unmap_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=6e5c00 size=1024 attrs=
        <6>[    3.60] pci_rig 0000:01:00.0: # dma unmap 1
        <4>[    3.60] dma_free: 0000:01:00.0 dir=BIDIRECTIONAL dma_addr=71d000 size=2048 virt_addr=00000000deadbeef attrs=
    ";

    #[test]
    fn a_clean_binding_agrees() {
        assert_eq!(
            agrees(&lines(CLEAN)),
            Ok(Agreement {
                mappings: 2,
                ended: 2
            })
        );
    }

    #[test]
    fn a_direction_the_driver_lies_about_fails() {
        let swapped = CLEAN.replace(
            "dma_map_page: 0000:01:00.0 dir=TO_DEVICE",
            "dma_map_page: 0000:01:00.0 dir=FROM_DEVICE",
        );
        let e = agrees(&lines(&swapped)).unwrap_err();
        assert!(e.contains("as to_device at 0x6e5c00+0x400"), "{e}");
        assert!(
            e.contains("the DMA core made a FromDevice mapping of 0x6e5c00+0x400"),
            "{e}"
        );
    }

    #[test]
    fn a_size_the_driver_lies_about_fails() {
        let e = agrees(&lines(&CLEAN.replace(
            "# dma map 1 coherent 0x71d000 0x800",
            "# dma map 1 coherent 0x71d000 0x1000",
        )))
        .unwrap_err();
        assert!(e.contains("a coherent allocation at 0x71d000+0x800"), "{e}");
    }

    #[test]
    fn an_unmap_before_the_driver_says_so_fails() {
        // The stream unmapped while the driver still counts it live.
        let early = CLEAN.replace(
            "<6>[    3.54] pci_rig 0000:01:00.0: # dma unmap 2\n        <4>[    3.54] dma_unmap_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=6e5c00 size=1024 attrs=",
            "<4>[    3.54] dma_unmap_page: 0000:01:00.0 dir=TO_DEVICE dma_addr=6e5c00 size=1024 attrs=\n        <6>[    3.54] pci_rig 0000:01:00.0: # dma unmap 2",
        );
        let e = agrees(&lines(&early)).unwrap_err();
        assert!(e.contains("ended the driver's mapping 2"), "{e}");
    }

    #[test]
    fn an_unmap_in_another_direction_fails() {
        let other = CLEAN.replace(
            "dma_unmap_page: 0000:01:00.0 dir=TO_DEVICE",
            "dma_unmap_page: 0000:01:00.0 dir=BIDIRECTIONAL",
        );
        let e = agrees(&lines(&other)).unwrap_err();
        assert!(e.contains("unmapped as Bidirectional"), "{e}");
    }

    #[test]
    fn a_mapping_the_driver_never_reported_fails() {
        let hidden = format!(
            "{CLEAN}\n<4>[    3.70] dma_map_page: 0000:01:00.0 dir=FROM_DEVICE dma_addr=5000 size=512 phys_addr=5000 attrs="
        );
        let e = agrees(&lines(&hidden)).unwrap_err();
        assert!(e.contains("never reported"), "{e}");
    }

    #[test]
    fn an_ended_mapping_never_unmapped_fails() {
        let leaked = CLEAN.replace(
            "<4>[    3.60] dma_free: 0000:01:00.0 dir=BIDIRECTIONAL dma_addr=71d000 size=2048 virt_addr=00000000deadbeef attrs=",
            "",
        );
        let e = agrees(&lines(&leaked)).unwrap_err();
        assert!(e.contains("never unmapped or freed it"), "{e}");
    }

    #[test]
    fn scatter_gather_maps_and_unmaps_by_pages() {
        let sg = "
            <6>[    1.0] pci_rig 0000:00:03.0: event probe_begin
            <4>[    1.1] dma_map_sg: 0000:00:03.0 dir=TO_DEVICE nents=1/1 ents=1/1 dma_addrs={0x42000} sizes={1024} phys_addrs={0x42000} attrs=
            <6>[    1.1] pci_rig 0000:00:03.0: # dma map 2 to_device 0x42000 0x400
            <6>[    1.2] pci_rig 0000:00:03.0: # dma unmap 2
            <4>[    1.2] dma_unmap_sg: 0000:00:03.0 dir=TO_DEVICE phys_addrs={0x42000} attrs=
        ";
        assert_eq!(
            agrees(&lines(sg)),
            Ok(Agreement {
                mappings: 1,
                ended: 1
            })
        );
    }

    #[test]
    fn an_unreadable_core_line_fails() {
        let e = agrees(&lines("<4>[ 1.0] dma_map_page: 0000:01:00.0 dir=SIDEWAYS dma_addr=1 size=1 phys_addr=1 attrs=\n<6>[ 1.0] pci_rig 0000:01:00.0: event probe_begin"))
            .unwrap_err();
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn traced_reads_the_kernels_command_line() {
        assert!(traced(&lines(
            "<5>[    0.00] Kernel command line: console=ttyS0 trace_event=dma tp_printk"
        )));
        assert!(!traced(&lines(
            "<5>[    0.00] Kernel command line: console=ttyS0 trace_event=dma"
        )));
    }
}
