//! The host's clock facts a guest's command line needs.

/// The host's TSC frequency in kHz, measured once against the monotonic clock over 50 ms
/// (both keep counting while this thread is descheduled), when the host is x86_64 with an
/// invariant TSC (`constant_tsc` and `nonstop_tsc`); else `None`.
pub fn host_tsc_khz() -> Option<u64> {
    static KHZ: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *KHZ.get_or_init(|| {
        let flags = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let flags = flags.lines().find(|l| l.starts_with("flags"))?;
        let invariant = ["constant_tsc", "nonstop_tsc"]
            .iter()
            .all(|f| flags.split_whitespace().any(|w| w == *f));
        if !invariant {
            return None;
        }
        tsc_khz_over(std::time::Duration::from_millis(50))
    })
}

#[cfg(target_arch = "x86_64")]
fn tsc_khz_over(span: std::time::Duration) -> Option<u64> {
    // SAFETY: RDTSC reads a counter; it has no preconditions and touches no memory.
    let tsc = || unsafe { std::arch::x86_64::_rdtsc() };
    let (t0, c0) = (std::time::Instant::now(), tsc());
    std::thread::sleep(span);
    let (c1, t1) = (tsc(), std::time::Instant::now());
    let ns = (t1 - t0).as_nanos() as u64;
    (ns > 0).then(|| (c1.wrapping_sub(c0)).saturating_mul(1_000_000) / ns)
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_khz_over(_: std::time::Duration) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_tsc_is_measured_alike_twice() {
        let Some(khz) = host_tsc_khz() else { return };
        assert!((100_000..10_000_000).contains(&khz), "{khz} kHz");
        let again = tsc_khz_over(std::time::Duration::from_millis(20)).unwrap();
        assert!(khz.abs_diff(again) * 50 < khz, "{khz} then {again} kHz");
    }
}
