//! A writer for the "newc" cpio format, the one the kernel unpacks as an
//! initramfs (Documentation/driver-api/early-userspace/buffer-format.rst).
//! Entries get fixed owners and mtimes so the same inputs give the same bytes.

pub const S_IFDIR: u32 = 0o040000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFLNK: u32 = 0o120000;
pub const S_IFCHR: u32 = 0o020000;

#[derive(Default)]
pub struct Archive {
    bytes: Vec<u8>,
    next_ino: u32,
}

impl Archive {
    pub fn new() -> Self {
        Archive {
            bytes: Vec::new(),
            next_ino: 1,
        }
    }

    pub fn dir(&mut self, path: &str) {
        self.entry(path, S_IFDIR | 0o755, 2, (0, 0), &[]);
    }

    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) {
        self.entry(path, S_IFREG | mode, 1, (0, 0), data);
    }

    pub fn symlink(&mut self, path: &str, target: &str) {
        self.entry(path, S_IFLNK | 0o777, 1, (0, 0), target.as_bytes());
    }

    /// A character device node, e.g. `/dev/console` (5, 1), which the kernel
    /// opens for init before any devtmpfs is mounted.
    pub fn char_dev(&mut self, path: &str, mode: u32, major: u32, minor: u32) {
        self.entry(path, S_IFCHR | mode, 1, (major, minor), &[]);
    }

    fn entry(&mut self, path: &str, mode: u32, nlink: u32, rdev: (u32, u32), data: &[u8]) {
        let name = path.trim_start_matches('/');
        let ino = self.next_ino;
        self.next_ino += 1;
        self.header(ino, mode, nlink, data.len(), rdev, name);
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn header(
        &mut self,
        ino: u32,
        mode: u32,
        nlink: u32,
        size: usize,
        rdev: (u32, u32),
        name: &str,
    ) {
        let fields = [
            ino,
            mode,
            0,
            0,
            nlink,
            0,
            size as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0,
        ];
        self.bytes.extend_from_slice(b"070701");
        for f in fields {
            self.bytes.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.header(0, 0, 1, 0, (0, 0), "TRAILER!!!");
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks an archive back into (name, mode, rdev, data) entries.
    /// name, mode, (rdev major, minor), data
    type Entry = (String, u32, (u32, u32), Vec<u8>);

    fn read(mut b: &[u8]) -> Vec<Entry> {
        let mut out = Vec::new();
        let start = b.as_ptr() as usize;
        let align = |b: &mut &[u8]| {
            let off = b.as_ptr() as usize - start;
            *b = &b[(4 - off % 4) % 4..];
        };
        loop {
            assert_eq!(&b[..6], b"070701");
            let field = |i: usize| {
                u32::from_str_radix(std::str::from_utf8(&b[6 + 8 * i..14 + 8 * i]).unwrap(), 16)
                    .unwrap()
            };
            let (mode, size, rdev, namesize) = (
                field(1),
                field(6) as usize,
                (field(9), field(10)),
                field(11) as usize,
            );
            let name = std::str::from_utf8(&b[110..110 + namesize - 1])
                .unwrap()
                .to_string();
            assert_eq!(b[110 + namesize - 1], 0);
            b = &b[110 + namesize..];
            align(&mut b);
            if name == "TRAILER!!!" {
                assert!(b.is_empty());
                return out;
            }
            out.push((name, mode, rdev, b[..size].to_vec()));
            b = &b[size..];
            align(&mut b);
        }
    }

    #[test]
    fn round_trips_every_entry_kind() {
        let mut a = Archive::new();
        a.dir("/bin");
        a.file("/bin/busybox", 0o755, b"\x7fELF12345");
        a.symlink("/bin/sh", "busybox");
        a.char_dev("/dev/console", 0o600, 5, 1);
        let bytes = a.finish();
        assert_eq!(bytes.len() % 4, 0);
        let e = read(&bytes);
        assert_eq!(e.len(), 4);
        assert_eq!(e[0].0, "bin");
        assert_eq!(e[0].1, S_IFDIR | 0o755);
        assert_eq!(
            (e[1].0.as_str(), e[1].1, e[1].3.as_slice()),
            ("bin/busybox", S_IFREG | 0o755, &b"\x7fELF12345"[..])
        );
        assert_eq!(
            (e[2].1, e[2].3.as_slice()),
            (S_IFLNK | 0o777, &b"busybox"[..])
        );
        assert_eq!((e[3].1, e[3].2), (S_IFCHR | 0o600, (5, 1)));
    }

    #[test]
    fn same_inputs_give_same_bytes() {
        let build = || {
            let mut a = Archive::new();
            a.file("init", 0o755, b"#!/bin/sh\n");
            a.finish()
        };
        assert_eq!(build(), build());
    }
}
