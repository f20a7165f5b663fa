//! The control protocol: one JSON object per line in, one per line out (see REGISTERS.md,
//! "Control socket"). [`handle_line`] is pure; [`serve`] puts it on a Unix socket.

use crate::model::{FaultKind, Knobs, Model};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex, MutexGuard};

/// Longer request lines are refused (and skipped) rather than buffered without bound.
pub const MAX_LINE: usize = 64 * 1024;

/// Knobs to change; the ones left out keep their value.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnobUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_ones: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub force_error: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stuck_busy: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop_irqs: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wrong_id: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wrong_version: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub irq_every_us: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub irq_ignore_enable: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dma_delay_us: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_soft_reset: Option<bool>,
}

// Unit-like variants are written `{}` so that deny_unknown_fields covers them too.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Ping {},
    Knobs {},
    SetKnobs(KnobUpdate),
    ClearKnobs {},
    State {},
    Counters {},
    ResetCounters {},
    Log {
        #[serde(default)]
        since: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
    },
    ResetLog {},
    /// Arms one fault at the `at`-th BAR access from now (REGISTERS.md, "Faults").
    ArmFault {
        kind: FaultKind,
        at: u64,
        /// Count BAR writes only.
        #[serde(default)]
        writes: bool,
    },
    Fault {},
    ClearFault {},
    /// The DMA engine: guest memory QEMU mapped for the device, and the DMA log.
    Dma {},
    /// Whether a delayed DMA (`dma_delay_us`) is in flight: refused if none is. On the socket
    /// the request is held, up to [`AWAIT_DMA_MAX`], until a DMA goes in flight after it
    /// arrived (a fresh one, its whole delay ahead), so a guest can act while a DMA is surely
    /// in flight (e.g. unbind).
    AwaitDma {},
}

/// How long the socket holds an `await_dma` request for a DMA to go in flight.
pub const AWAIT_DMA_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// What every reply says, whatever the request: whether it was carried out, and if not, why
/// (an error reply changes nothing). The other fields depend on the request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Outcome {
    /// An error reply.
    pub fn refused(why: impl std::fmt::Display) -> Value {
        json!(Outcome {
            ok: false,
            error: Some(why.to_string()),
        })
    }
}

/// Answers one request line. Never fails: errors are replies too.
pub fn handle_line(model: &mut Model, line: &str) -> Value {
    match serde_json::from_str::<Request>(line) {
        Ok(req) => handle(model, req),
        Err(e) => Outcome::refused(e),
    }
}

pub fn handle(model: &mut Model, req: Request) -> Value {
    match req {
        Request::Ping {} => json!({ "ok": true }),
        Request::Knobs {} => json!({ "ok": true, "knobs": model.knobs() }),
        Request::SetKnobs(u) => {
            let old = model.knobs().clone();
            let new = Knobs {
                all_ones: u.all_ones.unwrap_or(old.all_ones),
                force_error: u.force_error.unwrap_or(old.force_error),
                latency_ns: u.latency_ns.unwrap_or(old.latency_ns),
                stuck_busy: u.stuck_busy.unwrap_or(old.stuck_busy),
                drop_irqs: u.drop_irqs.unwrap_or(old.drop_irqs),
                wrong_id: u.wrong_id.unwrap_or(old.wrong_id),
                wrong_version: u.wrong_version.unwrap_or(old.wrong_version),
                irq_every_us: u.irq_every_us.unwrap_or(old.irq_every_us),
                irq_ignore_enable: u.irq_ignore_enable.unwrap_or(old.irq_ignore_enable),
                stream: u.stream.unwrap_or(old.stream),
                dma_delay_us: u.dma_delay_us.unwrap_or(old.dma_delay_us),
                no_soft_reset: u.no_soft_reset.unwrap_or(old.no_soft_reset),
            };
            match model.set_knobs(new) {
                Ok(()) => json!({ "ok": true, "knobs": model.knobs() }),
                Err(e) => Outcome::refused(e),
            }
        }
        Request::ClearKnobs {} => {
            let defaults = model.default_knobs().clone();
            model
                .set_knobs(defaults)
                .expect("the default knobs passed Knobs::check when they were set");
            json!({ "ok": true, "knobs": model.knobs() })
        }
        Request::State {} => json!({ "ok": true, "state": model.state() }),
        Request::Counters {} => json!({ "ok": true, "counters": model.counters() }),
        Request::ResetCounters {} => {
            model.reset_counters();
            json!({ "ok": true })
        }
        Request::Log { since, limit } => {
            let entries: Vec<_> = model
                .log()
                .since(since)
                .take(limit.unwrap_or(usize::MAX))
                .collect();
            json!({ "ok": true, "next_seq": model.log().next_seq(), "entries": entries })
        }
        Request::ResetLog {} => {
            model.clear_log();
            json!({ "ok": true, "next_seq": model.log().next_seq() })
        }
        Request::ArmFault { kind, at, writes } => match model.arm_fault(kind, at, writes) {
            Ok(()) => json!({ "ok": true, "fault": model.fault() }),
            Err(e) => Outcome::refused(e),
        },
        Request::Fault {} => json!({ "ok": true, "fault": model.fault() }),
        Request::ClearFault {} => {
            model.clear_fault();
            json!({ "ok": true, "fault": model.fault() })
        }
        Request::Dma {} => {
            let windows: Vec<_> = model
                .dma()
                .windows()
                .map(|(iova, size)| json!({ "iova": iova, "size": size }))
                .collect();
            json!({ "ok": true, "windows": windows, "log": model.dma().log() })
        }
        Request::AwaitDma {} => match model.dma_due_ns() {
            Some(due_ns) => json!({ "ok": true, "due_ns": due_ns }),
            None => Outcome::refused("no DMA in flight"),
        },
    }
}

/// What the socket server controls: the model, plus a hook to run after every request
/// (the transport uses it to deliver interrupts a knob change raised).
pub trait Target: Send + 'static {
    fn model(&mut self) -> &mut Model;
    fn changed(&mut self) {}
}

/// Locks, carrying on past a panicked holder: the model is always in a consistent state
/// between calls, so a poisoned lock is no reason to stop serving.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Serves clients until the listener fails, one thread per client.
pub fn serve<T: Target>(listener: UnixListener, target: Arc<Mutex<T>>) -> io::Result<()> {
    for stream in listener.incoming() {
        let stream = stream?;
        let target = target.clone();
        std::thread::spawn(move || {
            if let Err(e) = serve_client(stream, &target) {
                log::warn!("control client: {e}");
            }
        });
    }
    Ok(())
}

fn serve_client<T: Target>(stream: UnixStream, target: &Mutex<T>) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let reply = if line.len() > MAX_LINE {
            skip_line(&mut reader)?;
            Outcome::refused(format!("line longer than {MAX_LINE} bytes"))
        } else {
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            let waits = matches!(serde_json::from_str(text), Ok(Request::AwaitDma {}));
            let deadline = std::time::Instant::now() + AWAIT_DMA_MAX;
            // The DMA in flight when the request came, if any: not a fresh one.
            let stale = lock(target).model().dma_due_ns();
            loop {
                let reply = {
                    let mut t = lock(target);
                    let reply = handle_line(t.model(), text);
                    t.changed();
                    reply
                };
                if !waits || reply["ok"] == true && reply["due_ns"].as_u64() != stale {
                    break reply;
                }
                if std::time::Instant::now() >= deadline {
                    break Outcome::refused(format!(
                        "no DMA went in flight within {} s (a delayed DMA needs dma_delay_us and a driver ringing the doorbell)",
                        AWAIT_DMA_MAX.as_secs()
                    ));
                }
                // The lock is free meanwhile: the device goes on serving QEMU.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        };
        let mut out = serde_json::to_vec(&reply)?;
        out.push(b'\n');
        writer.write_all(&out)?;
    }
}

fn skip_line(reader: &mut impl BufRead) -> io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{bar0, Region};

    fn ask(m: &mut Model, line: &str) -> Value {
        handle_line(m, line)
    }

    #[test]
    fn ping_and_errors() {
        let mut m = Model::new();
        assert_eq!(ask(&mut m, r#"{"cmd":"ping"}"#), json!({"ok": true}));
        for bad in [
            "",
            "not json",
            "{}",
            "[]",
            r#"{"cmd":"frobnicate"}"#,
            r#"{"cmd":"ping","extra":1}"#,
            r#"{"cmd":"set_knobs","all_onez":true}"#,
            r#"{"cmd":"set_knobs","latency_ns":-1}"#,
            r#"{"cmd":"log","since":"x"}"#,
        ] {
            let r = ask(&mut m, bad);
            assert_eq!(r["ok"], false, "{bad}: {r}");
            assert!(r["error"].is_string());
        }
    }

    #[test]
    fn faults_are_armed_shown_and_cleared() {
        let mut m = Model::new();
        let r = ask(&mut m, r#"{"cmd":"arm_fault","kind":"vanish","at":2}"#);
        assert_eq!(r["fault"]["armed"], json!(["vanish", 2]), "{r}");
        for bad in [
            r#"{"cmd":"arm_fault","kind":"vanish","at":0}"#,
            r#"{"cmd":"arm_fault","kind":"melt","at":1}"#,
            r#"{"cmd":"arm_fault","kind":"vanish"}"#,
        ] {
            let r = ask(&mut m, bad);
            assert_eq!(r["ok"], false, "{bad}: {r}");
        }
        assert_eq!(
            ask(&mut m, r#"{"cmd":"fault"}"#)["fault"]["armed"],
            json!(["vanish", 2]),
            "a refused request changes nothing"
        );
        let mut b = [0u8; 4];
        m.read(Region::Bar0, bar0::MAGIC, &mut b, 0).unwrap();
        m.read(Region::Bar0, bar0::MAGIC, &mut b, 0).unwrap();
        let r = ask(&mut m, r#"{"cmd":"fault"}"#);
        assert_eq!(
            r["fault"]["struck"],
            json!({"kind":"vanish","at":2,"seq":2})
        );
        assert!(m.knobs().all_ones);
        let r = ask(&mut m, r#"{"cmd":"clear_fault"}"#);
        assert_eq!(r["fault"]["struck"], Value::Null);
        assert!(!m.knobs().all_ones, "a vanished device is back");
    }

    /// A client that builds requests from these types sends what the device reads, and reads
    /// its replies' outcome with them.
    #[test]
    fn typed_requests_round_trip() {
        let mut m = Model::new();
        let ping = serde_json::to_string(&Request::Ping {}).unwrap();
        assert_eq!(ping, r#"{"cmd":"ping"}"#);
        let set = Request::SetKnobs(KnobUpdate {
            latency_ns: Some(5),
            ..Default::default()
        });
        let set = serde_json::to_string(&set).unwrap();
        assert_eq!(set, r#"{"cmd":"set_knobs","latency_ns":5}"#);
        let log = serde_json::to_string(&Request::Log {
            since: 3,
            limit: None,
        })
        .unwrap();
        assert_eq!(log, r#"{"cmd":"log","since":3}"#);
        for line in [ping, set, log] {
            let o: Outcome = serde_json::from_value(ask(&mut m, &line)).unwrap();
            assert_eq!(
                o,
                Outcome {
                    ok: true,
                    error: None
                },
                "{line}"
            );
        }
        let o: Outcome = serde_json::from_value(ask(&mut m, r#"{"cmd":"nope"}"#)).unwrap();
        assert!(!o.ok && o.error.unwrap().contains("nope"));
    }

    #[test]
    fn set_knobs_is_partial_and_clear_knobs_clears() {
        let mut m = Model::new();
        let r = ask(&mut m, r#"{"cmd":"set_knobs","all_ones":true}"#);
        assert_eq!(r["knobs"]["all_ones"], true);
        let r = ask(
            &mut m,
            r#"{"cmd":"set_knobs","latency_ns":1000,"wrong_id":true,"wrong_version":true}"#,
        );
        assert_eq!(r["knobs"]["all_ones"], true);
        assert_eq!(r["knobs"]["latency_ns"], 1000);
        let r = ask(
            &mut m,
            r#"{"cmd":"set_knobs","latency_ns":18446744073709551615}"#,
        );
        assert_eq!(r["ok"], false, "{r}");
        assert!(
            r["error"].as_str().unwrap().contains("above the limit"),
            "{r}"
        );
        assert_eq!(
            m.knobs().latency_ns,
            1000,
            "unchanged by the refused request"
        );
        assert_eq!(m.knobs().latency_ns, 1000);
        assert!(m.knobs().wrong_id && m.knobs().wrong_version);
        ask(&mut m, r#"{"cmd":"clear_knobs"}"#);
        assert_eq!(m.knobs(), &Knobs::default());
        let r = ask(&mut m, r#"{"cmd":"knobs"}"#);
        assert_eq!(r["knobs"], serde_json::to_value(Knobs::default()).unwrap());
    }

    #[test]
    fn log_since_limit_and_reset() {
        let mut m = Model::new();
        let mut b = [0u8; 4];
        for t in 0..5 {
            m.read(Region::Bar0, bar0::COUNTER, &mut b, t).unwrap();
        }
        let r = ask(&mut m, r#"{"cmd":"log"}"#);
        assert_eq!(r["entries"].as_array().unwrap().len(), 5);
        assert_eq!(r["entries"][4]["value"], 4);
        assert_eq!(r["next_seq"], 6);
        let r = ask(&mut m, r#"{"cmd":"log","since":2,"limit":2}"#);
        let seqs: Vec<_> = r["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].clone())
            .collect();
        assert_eq!(seqs, [json!(3), json!(4)]);
        let r = ask(&mut m, r#"{"cmd":"reset_log"}"#);
        assert_eq!(r["next_seq"], 6);
        let r = ask(&mut m, r#"{"cmd":"log"}"#);
        assert_eq!(r["entries"], json!([]));
    }

    #[test]
    fn counters_and_state() {
        let mut m = Model::new();
        let mut b = [0u8; 2];
        m.read(Region::Bar0, 1, &mut b, 0).unwrap();
        let r = ask(&mut m, r#"{"cmd":"counters"}"#);
        assert_eq!(r["counters"]["unaligned"], 1);
        assert_eq!(r["counters"]["bar0_reads"], 1);
        ask(&mut m, r#"{"cmd":"reset_counters"}"#);
        assert_eq!(m.counters().bar0_reads, 0);
        let r = ask(&mut m, r#"{"cmd":"state"}"#);
        assert_eq!(r["state"]["intx_line"], false);
        assert_eq!(r["state"]["registers"]["scratch"], 0);
    }

    struct Plain(Model, usize);
    impl Target for Plain {
        fn model(&mut self) -> &mut Model {
            &mut self.0
        }
        fn changed(&mut self) {
            self.1 += 1;
        }
    }

    #[test]
    fn await_dma_is_refused_without_one_and_held_on_the_socket_until_one_flies() {
        use crate::model::bar0::{CMD, DMA_ADDR_LO, OP_DMA_FROM_DEVICE, OP_LENGTH};
        use crate::model::dma::VecMemory;
        use crate::model::{config::CMD_MASTER, Allowed, Region};
        let mut m = Model::new();
        let r = ask(&mut m, r#"{"cmd":"await_dma"}"#);
        assert_eq!(r["error"], "no DMA in flight");
        m.dma_map(0, 0x1000, Some(VecMemory::new(0x1000)), Allowed::ReadWrite);
        m.write(Region::Config, 4, &CMD_MASTER.to_le_bytes(), 0)
            .unwrap();
        ask(&mut m, r#"{"cmd":"set_knobs","dma_delay_us":100000}"#);

        let dir = std::env::temp_dir().join(format!("qd-await-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl");
        let listener = UnixListener::bind(&path).unwrap();
        let target = Arc::new(Mutex::new(Plain(m, 0)));
        let t = target.clone();
        std::thread::spawn(move || serve(listener, t));
        let mut s = UnixStream::connect(&path).unwrap();
        let asked = std::time::Instant::now();
        s.write_all(b"{\"cmd\":\"await_dma\"}\n").unwrap();
        // The doorbell rings 50 ms later, from another thread (the guest, through QEMU).
        let t = target.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let mut t = lock(&t);
            let m = &mut t.0;
            m.write(Region::Bar0, DMA_ADDR_LO, &0u32.to_le_bytes(), 1)
                .unwrap();
            m.write(Region::Bar0, OP_LENGTH, &16u32.to_le_bytes(), 2)
                .unwrap();
            m.write(Region::Bar0, CMD, &OP_DMA_FROM_DEVICE.to_le_bytes(), 3)
                .unwrap();
        });
        let mut l = String::new();
        BufReader::new(s.try_clone().unwrap())
            .read_line(&mut l)
            .unwrap();
        let r: Value = serde_json::from_str(&l).unwrap();
        assert_eq!(r["ok"], true, "{r}");
        assert!(r["due_ns"].as_u64().unwrap() > 0);
        assert!(
            asked.elapsed() >= std::time::Duration::from_millis(50),
            "held until then"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn socket_survives_garbage() {
        let dir = std::env::temp_dir().join(format!("qd-ctl-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl");
        let listener = UnixListener::bind(&path).unwrap();
        let target = Arc::new(Mutex::new(Plain(Model::new(), 0)));
        let t = target.clone();
        std::thread::spawn(move || serve(listener, t));

        let mut s = UnixStream::connect(&path).unwrap();
        let long = vec![b'x'; MAX_LINE + 10];
        s.write_all(b"garbage\n\n{\"cmd\":\"nope\"}\n").unwrap();
        s.write_all(&long).unwrap();
        s.write_all(b"\n{\"cmd\":\"set_knobs\",\"stuck_busy\":true}\n")
            .unwrap();
        s.write_all(&[0xff, 0xfe, b'\n']).unwrap();
        s.write_all(b"{\"cmd\":\"ping\"}\n").unwrap();
        let replies: Vec<Value> = BufReader::new(s.try_clone().unwrap())
            .lines()
            .take(6)
            .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
            .collect();
        let oks: Vec<_> = replies.iter().map(|r| r["ok"].as_bool().unwrap()).collect();
        assert_eq!(oks, [false, false, false, true, false, true]);
        assert!(replies[2]["error"].as_str().unwrap().contains("longer"));
        assert!(lock(&target).0.knobs().stuck_busy);
        // A second client is served while the first stays connected.
        let mut s2 = UnixStream::connect(&path).unwrap();
        s2.write_all(b"{\"cmd\":\"ping\"}\n").unwrap();
        let mut l = String::new();
        BufReader::new(s2).read_line(&mut l).unwrap();
        assert_eq!(l, "{\"ok\":true}\n");
        assert_eq!(lock(&target).1, 6, "changed() after every answered request");
        drop(s);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
