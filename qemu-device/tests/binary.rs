//! The `pci-rig-device` binary: sockets, control, access log on exit and on SIGTERM.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use vfio_bindings::bindings::vfio::VFIO_PCI_BAR0_REGION_INDEX;

const BIN: &str = env!("CARGO_BIN_EXE_pci-rig-device");

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qd-bin-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn start(d: &Path) -> Child {
    let child = Command::new(BIN)
        .arg("--socket")
        .arg(d.join("dev.sock"))
        .arg("--control")
        .arg(d.join("ctl.sock"))
        .arg("--access-log")
        .arg(d.join("access.jsonl"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Listening, not only bound: a socket file exists from bind() on, and a connect between
    // bind() and listen() is refused (seen once on a loaded host). The control socket is bound
    // after the vfio-user one.
    let t = Instant::now();
    while !(d.join("dev.sock").exists() && UnixStream::connect(d.join("ctl.sock")).is_ok()) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "sockets never appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

fn ask(ctl: &mut UnixStream, line: &str) -> serde_json::Value {
    ctl.write_all(line.as_bytes()).unwrap();
    ctl.write_all(b"\n").unwrap();
    let mut reply = String::new();
    BufReader::new(ctl.try_clone().unwrap())
        .read_line(&mut reply)
        .unwrap();
    serde_json::from_str(&reply).unwrap()
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn log_lines(d: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(d.join("access.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn serves_one_client_and_writes_log_when_it_leaves() {
    let d = dir("client");
    let mut child = start(&d);
    for s in ["dev.sock", "ctl.sock"] {
        let mode = std::fs::metadata(d.join(s)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{s}");
    }
    let mut ctl = UnixStream::connect(d.join("ctl.sock")).unwrap();
    assert_eq!(ask(&mut ctl, "nonsense")["ok"], false);
    assert_eq!(
        ask(&mut ctl, r#"{"cmd":"set_knobs","wrong_id":true}"#)["ok"],
        true
    );

    let mut client = vfio_user::Client::new(&d.join("dev.sock")).unwrap();
    let mut b = [0u8; 4];
    client
        .region_read(VFIO_PCI_BAR0_REGION_INDEX, 0, &mut b)
        .unwrap();
    assert_eq!(u32::from_le_bytes(b), 0x0bad_0bad);
    let log = ask(&mut ctl, r#"{"cmd":"log"}"#);
    assert_eq!(log["entries"][0]["value"], 0x0bad_0bad);
    client.shutdown().unwrap();
    drop(client);

    assert!(wait(&mut child).success());
    let lines = log_lines(&d);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["region"], "bar0");
    assert!(!d.join("dev.sock").exists() && !d.join("ctl.sock").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn sigterm_writes_log_and_removes_sockets() {
    let d = dir("sigterm");
    let mut child = start(&d);
    let mut client = vfio_user::Client::new(&d.join("dev.sock")).unwrap();
    client
        .region_write(VFIO_PCI_BAR0_REGION_INDEX, 8, &5u32.to_le_bytes())
        .unwrap();
    // SAFETY: kill only sends a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(wait(&mut child).success());
    let lines = log_lines(&d);
    assert_eq!(
        (lines.len(), &lines[0]["value"]),
        (1, &serde_json::json!(5))
    );
    assert!(!d.join("dev.sock").exists() && !d.join("ctl.sock").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn bad_arguments_and_existing_paths_fail_clearly() {
    let out = Command::new(BIN).arg("--bogus").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown argument `--bogus`"));

    let d = dir("exists");
    std::fs::write(d.join("dev.sock"), "").unwrap();
    let out = Command::new(BIN)
        .arg("--socket")
        .arg(d.join("dev.sock"))
        .arg("--control")
        .arg(d.join("ctl.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    assert!(
        d.join("dev.sock").exists(),
        "someone else's file is left alone"
    );
    std::fs::remove_dir_all(&d).unwrap();
}
