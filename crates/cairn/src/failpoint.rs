//! Named crash points for the kill tests (compiled only with the test-only `failpoints`
//! feature; without it the `failpoint!` macro expands to nothing).
//!
//! Each point sits at a durability boundary of the commit protocol, of opening and of the
//! writer lock (docs/design.md, "Crash cases"). `CAIRN_FAILPOINT=<name>[:<n>]` arms one point:
//! its `n`-th hit in this process (default the first) prints one line to stderr,
//! `cairn failpoint <name> hit <n>: SIGKILL`, and kills the process with SIGKILL, which skips
//! every destructor, flush and unlock exactly as an external `kill -9` would. Without the
//! variable every point is a relaxed load of a cached `None`.
//!
//! Invariant: [`POINTS`] lists every name placed in the engine, and only those (a unit test
//! reads the sources to keep them in step), so a test can require that each one fired.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Every failpoint placed in the engine, in protocol order.
pub const POINTS: &[&str] = &[
    // Opening (env.rs, recover.rs): the first handle recovers, or creates a new file.
    "open.before_recover",
    "create.after_grow",
    "create.after_meta_write",
    "open.after_recover",
    "open.after_init",
    // The writer lock (txn/write.rs, state.rs).
    "writer.locked",
    "writer.before_republish",
    "writer.unlock",
    // Commit (txn/commit.rs), in order.
    "commit.begin",
    "commit.persist_free",
    "commit.before_grow",
    "commit.after_grow",
    "commit.before_write_pages",
    "commit.mid_write_pages",
    "commit.after_write_pages",
    "commit.before_data_sync",
    "commit.after_data_sync",
    "commit.before_log_write",
    "commit.before_log_sync",
    "commit.after_log_sync",
    "commit.before_meta_write",
    "commit.after_meta_write",
    "commit.before_meta_sync",
    "commit.after_meta_sync",
    "commit.before_truncate",
    "commit.after_truncate",
    // Publishing to readers (shared.rs), then the end of the commit.
    "publish.torn_cell",
    "commit.after_publish",
];

/// The armed point and the hit that fires it.
struct Armed {
    name: String,
    nth: u64,
}

static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
static HITS: AtomicU64 = AtomicU64::new(0);

/// The variable naming the armed point.
pub const VAR: &str = "CAIRN_FAILPOINT";

fn armed() -> Option<&'static Armed> {
    ARMED
        .get_or_init(|| {
            let spec = std::env::var(VAR).ok()?;
            let (name, nth) = match spec.split_once(':') {
                Some((n, c)) => (
                    n,
                    c.parse::<u64>()
                        .ok()
                        .filter(|&c| c > 0)
                        .unwrap_or_else(|| panic!("{VAR}={spec}: the hit count must be >= 1")),
                ),
                None => (spec.as_str(), 1),
            };
            assert!(
                POINTS.contains(&name),
                "{VAR}={spec}: no failpoint {name:?} (known: {POINTS:?})"
            );
            Some(Armed {
                name: name.to_string(),
                nth,
            })
        })
        .as_ref()
}

/// One pass through the point `name`: kills the process if it is the armed hit.
pub fn hit(name: &'static str) {
    debug_assert!(POINTS.contains(&name), "failpoint {name} is not listed");
    let Some(a) = armed() else {
        return;
    };
    if a.name != name {
        return;
    }
    let n = HITS.fetch_add(1, Ordering::SeqCst) + 1;
    if n == a.nth {
        // Not eprintln!, which would panic (and unwind instead of dying) if stderr is gone.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "cairn failpoint {name} hit {n}: SIGKILL");
        crate::os::kill_self();
    }
}

#[cfg(test)]
mod tests {
    use super::POINTS;

    /// Every use of `failpoint!` in the sources is listed, and every listed name is placed.
    #[test]
    fn the_list_matches_the_sources() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = Vec::new();
        let mut stack = vec![src];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                let mut rest = text.as_str();
                while let Some(i) = rest.find("failpoint!(\"") {
                    rest = &rest[i + 12..];
                    let end = rest.find('"').unwrap();
                    found.push(rest[..end].to_string());
                }
            }
        }
        found.sort();
        let mut listed: Vec<String> = POINTS.iter().map(|s| s.to_string()).collect();
        listed.sort();
        let mut uniq = listed.clone();
        uniq.dedup();
        assert_eq!(uniq, listed, "a point is listed twice");
        found.dedup();
        assert_eq!(found, listed, "failpoint!() uses and POINTS differ");
    }
}
