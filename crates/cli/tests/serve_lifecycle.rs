//! The served device's lifecycle as an administrator meets it: the policy is kept with the data
//! (a restart without `--policy` keeps write-back; another policy is refused unless
//! `--force-policy`, which writes dirty blocks back first), a refused second start leaves the
//! running server alone, a clean stop leaves no socket or pid file behind, and the control
//! verbs pointed at the NBD socket say where the control socket is.

mod serve_common;

use serve_common::*;

fn serve(s: &Served, extra: &[&str]) -> std::process::Output {
    let (ssd, hdd) = (s.ssd(), s.hdd());
    let args = ["serve", "--ssd", ssd.to_str().unwrap_or(""), "--hdd", hdd.to_str().unwrap_or("")];
    tierwise(&[&args[..], extra].concat())
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_policy_is_kept_with_the_data_and_changed_only_on_purpose() {
    if !can_serve() {
        return;
    }
    let s = Served::create("cache:mode=write-back", "1MiB", "8MiB");
    s.qemu_io(&["write -P 0x6b 0 512k".into(), "flush".into()]);
    assert!(s.stats()["device"]["dirty_bytes"].as_u64().unwrap_or(0) > 0, "write-back keeps dirty data");
    s.signal("-TERM");
    // Restarted without --policy: still write-back (every knob recorded).
    let o = serve(&s, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    s.wait_served();
    let spec = s.stats()["spec"].as_str().unwrap_or("").to_string();
    assert!(spec.contains("mode=write-back") && spec.contains("collector="), "restarted as {spec}");
    // A second start while it runs is refused and leaves its pid file.
    let pidfile = s.dir.path().join("ssd.img.sock.control.pid");
    let o = serve(&s, &[]);
    assert!(!o.status.success() && stderr(&o).contains("already running"), "{}", stderr(&o));
    assert!(pidfile.exists(), "a refused start removed the running server's pid file");
    s.signal("-TERM");
    // Clean stop: no socket, control socket or pid file left.
    for f in ["ssd.img.sock", "ssd.img.sock.control", "ssd.img.sock.control.pid"] {
        assert!(!s.dir.path().join(f).exists(), "{f} is left after a clean stop");
    }
    // Another policy: refused, naming the recorded one, images unchanged.
    let before = (std::fs::read(s.ssd()).unwrap_or_default(), std::fs::read(s.hdd()).unwrap_or_default());
    let o = serve(&s, &["--policy", "cache:mode=write-through"]);
    let e = stderr(&o);
    assert!(!o.status.success() && e.contains("mode=write-back") && e.contains("--force-policy"), "{e}");
    assert!(before == (std::fs::read(s.ssd()).unwrap_or_default(), std::fs::read(s.hdd()).unwrap_or_default()));
    // On purpose: the dirty blocks reach the HDD image first, then write-through runs.
    let o = serve(&s, &["--policy", "cache:mode=write-through", "--force-policy"]);
    assert!(o.status.success(), "{}", stderr(&o));
    s.wait_served();
    let hdd = std::fs::read(s.hdd()).unwrap_or_default();
    assert!(hdd[..512 << 10].iter().all(|&b| b == 0x6b), "the dirty data was written back to the HDD image");
    assert!(s.stats()["spec"].as_str().unwrap_or("").contains("mode=write-through"));
    s.qemu_io(&["read -P 0x6b 0 512k".into()]);
    // The control verbs on the NBD socket point to the control socket.
    let o = tierwise(&["status", s.socket().to_str().unwrap_or("")]);
    let e = stderr(&o);
    assert!(!o.status.success() && e.contains("NBD socket") && e.contains(".control"), "{e}");
    s.signal("-TERM");
}
