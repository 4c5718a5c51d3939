//! The results of a run: the JSON record and the Markdown report.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::engines::{ModeClass, COLUMNS};
use crate::system::Machine;
use crate::workloads::{Figure, Latency, Suite, Unit};

/// The figures of one child process: one configuration, one suite.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    pub config: String,
    pub engine: String,
    pub column: String,
    pub class: ModeClass,
    pub suite: Suite,
    pub records: u64,
    pub figures: Vec<Figure>,
    pub latencies: Vec<Latency>,
    /// Wall time of the child process, seconds.
    pub wall_secs: f64,
}

impl RunRecord {
    pub fn figure(&self, id: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.id == id)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Failure {
    pub config: String,
    pub column: String,
    pub class: ModeClass,
    pub suite: Suite,
    pub error: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfigInfo {
    pub id: String,
    pub column: String,
    pub class: ModeClass,
    pub flags: String,
}

/// Everything a run produced; `docs/bench/results.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Results {
    pub set: String,
    pub records: u64,
    pub repeat: u32,
    pub date: String,
    pub command: String,
    pub machine: Machine,
    pub versions: Vec<(String, String)>,
    /// Whether Cairn was measured, and if not, why.
    pub cairn: String,
    pub configs: Vec<ConfigInfo>,
    pub runs: Vec<RunRecord>,
    pub failures: Vec<Failure>,
    pub total_secs: f64,
    /// The capi suite's figures, when it ran (absent from older results.json files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capi: Option<crate::capi::CapiResults>,
    /// The device's flush time, measured when the group suite runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush: Option<crate::group::FlushTime>,
}

/// A row of a suite's table: one figure in one mode class.
pub struct Row<'a> {
    pub suite: Suite,
    pub label: String,
    pub unit: Unit,
    pub class: ModeClass,
    /// Per report column: the figure, if measured.
    pub cells: Vec<Option<&'a Figure>>,
}

impl Row<'_> {
    pub fn value(&self, column: usize) -> Option<f64> {
        self.cells[column].map(|f| f.value)
    }

    /// The best peer (every column but Cairn's own: "Cairn" and its other modes, such as
    /// "Cairn (logged)") and its value.
    pub fn best_peer(&self) -> Option<(usize, f64)> {
        let better = |a: f64, b: f64| {
            if self.unit.higher_is_better() {
                a > b
            } else {
                a < b
            }
        };
        let mut best: Option<(usize, f64)> = None;
        for (i, col) in COLUMNS.iter().enumerate().skip(1) {
            if col.starts_with("Cairn") {
                continue;
            }
            if let Some(v) = self.value(i) {
                if best.is_none_or(|(_, b)| better(v, b)) {
                    best = Some((i, v));
                }
            }
        }
        best
    }

    /// Cairn against the best peer, oriented so that above 1 means Cairn is better.
    pub fn ratio(&self) -> Option<f64> {
        let cairn = self.value(0)?;
        let (_, best) = self.best_peer()?;
        let r = if self.unit.higher_is_better() {
            cairn / best
        } else {
            best / cairn
        };
        r.is_finite().then_some(r)
    }
}

/// The rows of every suite, in order: suites, then figures as first measured, durable first.
pub fn rows(results: &Results) -> Vec<Row<'_>> {
    let mut out = Vec::new();
    // The group suite has its own report (group_report.rs).
    for suite in Suite::ALL.into_iter().filter(|&s| s != Suite::Group) {
        let runs: Vec<&RunRecord> = results.runs.iter().filter(|r| r.suite == suite).collect();
        let mut ids: Vec<(&str, Unit)> = Vec::new();
        for r in &runs {
            for f in &r.figures {
                if !ids.iter().any(|(id, _)| *id == f.id) {
                    ids.push((&f.id, f.unit));
                }
            }
        }
        for (id, unit) in ids {
            for class in [ModeClass::Durable, ModeClass::NoFlush] {
                let cells: Vec<Option<&Figure>> = COLUMNS
                    .iter()
                    .map(|col| {
                        runs.iter()
                            .find(|r| r.column == *col && r.class == class)
                            .and_then(|r| r.figure(id))
                    })
                    .collect();
                let Some(first) = cells.iter().flatten().next() else {
                    continue;
                };
                out.push(Row {
                    suite,
                    label: first.label.clone(),
                    unit,
                    class,
                    cells,
                });
            }
        }
    }
    out
}

/// A figure in a few significant digits, e.g. `1.23 M`, `45.6 k`, `789`.
pub fn format_value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::OpsPerSec if v >= 1e6 => format!("{:.2} M", v / 1e6),
        Unit::OpsPerSec if v >= 1e4 => format!("{:.0} k", v / 1e3),
        Unit::OpsPerSec if v >= 1e3 => format!("{:.1} k", v / 1e3),
        Unit::OpsPerSec => format!("{v:.0}"),
        Unit::Micros if v >= 100.0 => format!("{v:.0}"),
        Unit::Micros => format!("{v:.1}"),
        Unit::MiB if v >= 100.0 => format!("{v:.0}"),
        Unit::MiB => format!("{v:.1}"),
        Unit::Count => format!("{v:.0}"),
    }
}

/// Whether a column has a configuration in a mode class at all.
fn column_has_class(results: &Results, column: &str, class: ModeClass) -> bool {
    results
        .configs
        .iter()
        .any(|c| c.column == column && c.class == class)
}

/// Whether `suite` applies to the engine of report column `column`.
fn applies(suite: Suite, column: &str) -> bool {
    crate::engines::CONFIGS
        .iter()
        .filter(|c| c.column == column)
        .all(|c| suite.applies_to(c.engine))
}

fn failed(results: &Results, suite: Suite, column: &str, class: ModeClass) -> bool {
    results
        .failures
        .iter()
        .any(|f| f.suite == suite && f.column == column && f.class == class)
}

/// The results tables alone (also printed to stdout).
pub fn tables(results: &Results) -> String {
    let rows = rows(results);
    let mut s = String::new();
    for suite in Suite::ALL {
        let suite_rows: Vec<&Row> = rows.iter().filter(|r| r.suite == suite).collect();
        if suite_rows.is_empty() {
            continue;
        }
        let _ = writeln!(s, "\n### {}\n", suite.title());
        let _ = write!(s, "| workload · mode (unit) |");
        for col in COLUMNS {
            let _ = write!(s, " {col} |");
        }
        let _ = writeln!(s, " best peer | Cairn vs best |");
        let _ = write!(s, "|---|");
        for _ in COLUMNS {
            let _ = write!(s, "---:|");
        }
        let _ = writeln!(s, "---|---:|");
        for row in suite_rows {
            let _ = write!(
                s,
                "| {} · {} ({}) |",
                row.label,
                row.class.label(),
                row.unit.label()
            );
            for (i, col) in COLUMNS.iter().enumerate() {
                let cell = match row.value(i) {
                    Some(v) => format_value(row.unit, v),
                    None if !column_has_class(results, col, row.class) => "·".into(),
                    None if !applies(suite, col) => "n/a".into(),
                    None if failed(results, suite, col, row.class) => "failed".into(),
                    None => "—".into(),
                };
                let _ = write!(s, " {cell} |");
            }
            let best = match row.best_peer() {
                Some((i, _)) => COLUMNS[i].to_string(),
                None => "—".into(),
            };
            let ratio = match row.ratio() {
                Some(r) => format!("{r:.2}×"),
                None => "—".into(),
            };
            let _ = writeln!(s, " {best} | {ratio} |");
        }
    }
    if let Some(c) = &results.capi {
        s.push_str(&crate::capi::table(c));
    }
    s
}

/// Latency distributions of the per-transaction workloads.
fn latency_table(results: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| workload | configuration | txns | mean | p50 | p90 | p99 | p99.9 | max |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut runs: Vec<&RunRecord> = results
        .runs
        .iter()
        .filter(|r| r.suite != Suite::Group)
        .collect();
    runs.sort_by_key(|r| (r.suite.id(), r.class, config_rank(results, &r.config)));
    let mut by_workload: BTreeMap<(&str, &str), Vec<(&RunRecord, &Latency)>> = BTreeMap::new();
    for r in runs {
        for l in &r.latencies {
            by_workload
                .entry((r.suite.id(), &l.id))
                .or_default()
                .push((r, l));
        }
    }
    for entries in by_workload.values() {
        for (r, l) in entries {
            let _ = writeln!(
                s,
                "| {} | {} ({}) | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
                l.label, r.column, r.config, l.count, l.mean, l.p50, l.p90, l.p99, l.p999, l.max
            );
        }
    }
    s
}

pub fn config_rank(results: &Results, id: &str) -> usize {
    results
        .configs
        .iter()
        .position(|c| c.id == id)
        .unwrap_or(usize::MAX)
}

/// The whole Markdown report, `docs/bench/results.md`.
pub fn markdown(results: &Results) -> String {
    let m = &results.machine;
    let mut s = String::new();
    let _ = writeln!(s, "# Cairn benchmark results\n");
    let _ = writeln!(
        s,
        "Set **{}**, N = {} records, {} run(s) per figure (median), measured {} by `{}` \
         ({:.0} s in all). Generated file: do not edit; rerun `bench/run.sh`.\n",
        results.set,
        group_digits(results.records),
        results.repeat,
        results.date,
        results.command,
        results.total_secs
    );
    setup_lines(&mut s, m, &results.cairn, &results.versions);
    let _ = writeln!(s, "## How to read the tables\n");
    let _ = writeln!(
        s,
        "- One row per workload and mode class. **durable**: every commit is on stable storage \
         when it returns. **no-flush**: commits skip the flush (each engine's no-sync mode; a \
         crash may lose recent commits). The writemap and no-WAL columns are the peers' fastest, \
         least safe no-flush variants (ioarena's `nosync` mode); `·` marks a column that has no \
         configuration in that mode class, `n/a` an engine the suite does not apply to (sorted \
         duplicates, or one database shared by several processes), `—` a figure not \
         measured, `failed` a failed run.\n\
         - Units: ops/s (higher is better) for throughput; µs (lower is better) for commit \
         latency; MiB (lower is better) for file size and peak RSS.\n\
         - **best peer** is the best figure among the peer columns of the row (Cairn \
         excluded). **Cairn vs best** is Cairn's figure divided by the best peer's for ops/s, \
         and the best peer's divided by Cairn's for µs and MiB, so **above 1.00× Cairn is \
         better, below it is worse**. All figures of a table come from the same run.\n\
         - Peak RSS is the child process's VmHWM; for the memory-mapped engines (Cairn, LMDB, \
         libmdbx) it includes the pages of the data file the process touched, which the page \
         cache holds anyway for the others. File sizes are allocated blocks of the data \
         directory (sparse files count what they use).\n"
    );
    if !results.failures.is_empty() {
        let _ = writeln!(s, "## Failures\n");
        for f in &results.failures {
            let _ = writeln!(
                s,
                "- `{}` in suite `{}`: {}",
                f.config,
                f.suite.id(),
                f.error
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Results");
    s.push_str(&tables(results));
    let _ = writeln!(s, "\n## Commit latency distributions (µs)\n");
    s.push_str(&latency_table(results));
    let _ = writeln!(s, "\n## Exact settings per configuration\n");
    let _ = writeln!(s, "| configuration | column | mode | settings |");
    let _ = writeln!(s, "|---|---|---|---|");
    for c in &results.configs {
        let flags = escape(&c.flags);
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {flags} |",
            c.id,
            c.column,
            c.class.label()
        );
    }
    let _ = writeln!(
        s,
        "\nPlots: `throughput-<suite>-<mode>.png` (bars per engine for each workload) and \
         `latency-<mode>.png` (commit latency percentiles) beside this file. Raw figures: \
         `results.json`."
    );
    s
}

/// Escapes the characters that would break a Markdown table cell.
fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

/// `1234567` as `1,234,567`.
pub fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(group_digits(1_234_567), "1,234,567");
        assert_eq!(group_digits(999), "999");
        assert_eq!(format_value(Unit::OpsPerSec, 1_234_567.0), "1.23 M");
        assert_eq!(format_value(Unit::OpsPerSec, 45_600.0), "46 k");
        assert_eq!(format_value(Unit::Micros, 12.34), "12.3");
    }
}

/// The report's machine, Cairn build and engine versions paragraphs (shared by every suite's
/// report).
pub fn setup_lines(s: &mut String, m: &Machine, cairn: &str, versions: &[(String, String)]) {
    let _ = writeln!(
        s,
        "**Machine:** {} · {} cores · {:.1} GiB RAM · {} · data directory on {}.\n",
        m.cpu, m.cores, m.ram_gib, m.kernel, m.filesystem
    );
    let _ = writeln!(s, "**Cairn:** {cairn}\n");
    let versions: Vec<String> = versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(s, "**Engines:** {}.\n", versions.join(" · "));
}
