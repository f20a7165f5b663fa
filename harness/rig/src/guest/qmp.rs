//! A small QMP client: capability negotiation, commands, and a transcript of
//! everything QEMU said (events included) kept in the run folder.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    transcript: std::fs::File,
    /// Events seen so far, in arrival order.
    pub events: Vec<Value>,
}

impl Qmp {
    /// Connects to QEMU's QMP socket, waiting up to `wait` for QEMU to create it.
    pub fn connect(socket: &Path, transcript: &Path, wait: Duration) -> Result<Self> {
        let deadline = Instant::now() + wait;
        let stream = loop {
            match UnixStream::connect(socket) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("connecting to QMP at {}", socket.display()))
                }
            }
        };
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut q = Qmp {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            transcript: std::fs::File::create(transcript)?,
            events: Vec::new(),
        };
        // QEMU may send an event (RESUME, as the machine starts) ahead of
        // the greeting; it is kept like any other.
        let greeting = loop {
            let v = q.read()?;
            if v.get("event").is_none() {
                break v;
            }
            q.events.push(v);
        };
        if greeting.get("QMP").is_none() {
            bail!("QMP greeting expected, got {greeting}");
        }
        q.execute("qmp_capabilities", json!({}))?;
        Ok(q)
    }

    fn read(&mut self) -> Result<Value> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("QMP connection closed");
        }
        writeln!(self.transcript, "<- {}", line.trim_end())?;
        Ok(serde_json::from_str(&line)?)
    }

    /// Waits until `count` events satisfy `want` (including those already
    /// seen), reading QEMU's messages for at most `timeout`.
    pub fn wait_events(
        &mut self,
        what: &str,
        want: impl Fn(&Value) -> bool,
        count: usize,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.events.iter().filter(|e| want(e)).count() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("QEMU sent no {what} within {} s", timeout.as_secs());
            }
            self.reader.get_ref().set_read_timeout(Some(left))?;
            let read = self.read();
            self.reader
                .get_ref()
                .set_read_timeout(Some(Duration::from_secs(10)))?;
            match read {
                Ok(v) if v.get("event").is_some() => self.events.push(v),
                Ok(_) => {}
                Err(e)
                    if e.downcast_ref::<std::io::Error>().is_some_and(|e| {
                        matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        )
                    }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Once QEMU has exited: keeps the events it sent that were not read yet
    /// (e.g. a DEVICE_DELETED just before the guest powered off).
    pub fn drain(&mut self) {
        let _ = self
            .reader
            .get_ref()
            .set_read_timeout(Some(Duration::from_secs(1)));
        while let Ok(v) = self.read() {
            if v.get("event").is_some() {
                self.events.push(v);
            }
        }
    }

    /// Sends a command and returns its `return` value; events that arrive
    /// meanwhile are kept in `events`.
    pub fn execute(&mut self, command: &str, arguments: Value) -> Result<Value> {
        let msg = json!({ "execute": command, "arguments": arguments }).to_string();
        writeln!(self.transcript, "-> {msg}")?;
        writeln!(self.writer, "{msg}")?;
        loop {
            let v = self.read()?;
            if v.get("event").is_some() {
                self.events.push(v);
            } else if let Some(r) = v.get("return") {
                return Ok(r.clone());
            } else if let Some(e) = v.get("error") {
                bail!("QMP {command} failed: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn an_event_before_the_greeting_is_kept() {
        let dir = std::env::temp_dir().join(format!("pci-rig-qmp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("qmp.sock");
        let _ = std::fs::remove_file(&sock);
        let listener = UnixListener::bind(&sock).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            writeln!(
                s,
                r#"{{"event":"RESUME","timestamp":{{"seconds":1,"microseconds":0}}}}"#
            )
            .unwrap();
            writeln!(s, r#"{{"QMP":{{"version":{{}},"capabilities":[]}}}}"#).unwrap();
            let mut line = String::new();
            BufReader::new(s.try_clone().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert!(line.contains("qmp_capabilities"), "{line}");
            writeln!(s, r#"{{"return":{{}}}}"#).unwrap();
        });
        let q = Qmp::connect(&sock, &dir.join("qmp.log"), Duration::from_secs(5)).unwrap();
        server.join().unwrap();
        assert_eq!(q.events.len(), 1);
        assert_eq!(q.events[0]["event"], "RESUME");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
