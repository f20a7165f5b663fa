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
        let greeting = q.read()?;
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
