//! Facts about the machine and the process: CPU, memory, kernel, file system, peak RSS, date.

use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub ram_gib: f64,
    pub kernel: String,
    /// File system type and device of the data directory, e.g. `ext4 on /dev/vda`.
    pub filesystem: String,
    pub data_dir: String,
}

impl Machine {
    pub fn detect(data_dir: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|x| x.1.trim())
            })
            .unwrap_or("unknown")
            .to_string();
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0);
        let ram_kib = proc_kib("/proc/meminfo", "MemTotal:").unwrap_or(0);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Machine {
            cpu,
            cores,
            ram_gib: ram_kib as f64 / (1 << 20) as f64,
            kernel: format!("Linux {kernel}"),
            filesystem: filesystem(data_dir),
            data_dir: data_dir.display().to_string(),
        }
    }
}

/// Reads a `Key:   123 kB` line of a /proc file.
fn proc_kib(file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// This process's peak resident set size (VmHWM), in bytes. For the memory-mapped engines it
/// includes the pages of the data file the process touched.
pub fn peak_rss_bytes() -> u64 {
    proc_kib("/proc/self/status", "VmHWM:").unwrap_or(0) * 1024
}

/// File system type of `path`: the longest mount point of /proc/mounts that contains it.
pub fn filesystem(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        let (dev, mnt, fstype) = (f[0], f[1], f[2]);
        if path.starts_with(mnt) && best.as_ref().is_none_or(|(len, _)| mnt.len() > *len) {
            best = Some((mnt.len(), format!("{fstype} on {dev} (mounted at {mnt})")));
        }
    }
    best.map(|b| b.1).unwrap_or_else(|| "unknown".into())
}

/// True if `path` lives on a RAM-backed file system, where fsync costs nothing.
pub fn is_ram_fs(path: &Path) -> bool {
    let fs = filesystem(path);
    fs.starts_with("tmpfs") || fs.starts_with("ramfs")
}

/// Today's date (UTC) as `YYYY-MM-DD HH:MM UTC`.
pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
