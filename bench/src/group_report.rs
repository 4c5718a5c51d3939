//! The group suite's report: Markdown tables (docs/bench/group/results.md) and two line plots,
//! commits/s and p99 latency against the thread count.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use crate::group::figure_id;
use crate::plot::{font, register_font};
use crate::report::{config_rank, format_value, group_digits, Results, RunRecord};
use crate::workloads::{Suite, Unit};

/// The configuration the ratios are about.
const GROUPED: &str = "cairn-grouped";
/// Its own one-writer-at-a-time rate is the baseline of the headline ratio.
const PLAIN: &str = "cairn-durable";
/// The thread count of the headline ratio.
const HEADLINE_THREADS: usize = 64;

/// The group suite's runs, in configuration order.
fn runs(results: &Results) -> Vec<&RunRecord> {
    let mut runs: Vec<&RunRecord> = results
        .runs
        .iter()
        .filter(|r| r.suite == Suite::Group)
        .collect();
    runs.sort_by_key(|r| config_rank(results, &r.config));
    runs
}

/// The thread counts measured, ascending (latency ids are `t{T}`).
fn thread_counts(runs: &[&RunRecord]) -> Vec<usize> {
    let mut t: Vec<usize> = runs
        .iter()
        .flat_map(|r| r.latencies.iter())
        .filter_map(|l| l.id.strip_prefix('t')?.parse().ok())
        .collect();
    t.sort_unstable();
    t.dedup();
    t
}

fn value(run: &RunRecord, threads: usize, what: &str) -> Option<f64> {
    run.figure(&figure_id(threads, what)).map(|f| f.value)
}

fn find<'a>(runs: &[&'a RunRecord], config: &str) -> Option<&'a RunRecord> {
    runs.iter().copied().find(|r| r.config == config)
}

fn name(run: &RunRecord) -> String {
    format!("{} (`{}`)", column(run), run.config)
}

/// The name of a configuration in tables and legends: the report column, or for Cairn which
/// commit path it uses.
fn column(run: &RunRecord) -> &str {
    match run.config.as_str() {
        GROUPED => "Cairn grouped",
        "cairn-logged-grouped" => "Cairn logged, grouped",
        PLAIN => "Cairn plain",
        _ => &run.column,
    }
}

fn micros(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1} ms", v / 1e3)
    } else {
        format_value(Unit::Micros, v) + " µs"
    }
}

/// The figure tables alone (also printed to stdout).
pub fn tables(results: &Results) -> String {
    let runs = runs(results);
    let threads = thread_counts(&runs);
    let flush = results.flush.as_ref().map(|f| f.median_us);
    let mut s = String::new();
    let head = |s: &mut String, first: &str| {
        let _ = write!(s, "| {first} |");
        for t in &threads {
            let _ = write!(s, " T = {t} |");
        }
        let _ = write!(s, "\n|---|");
        for _ in &threads {
            let _ = write!(s, "---:|");
        }
        let _ = writeln!(s);
    };
    let cell = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("—".into(), f);

    let _ = writeln!(
        s,
        "\n### Commits/s (all threads together; higher is better)\n"
    );
    head(&mut s, "configuration");
    for r in &runs {
        let _ = write!(s, "| {} |", name(r));
        for &t in &threads {
            let v = value(r, t, "commits");
            let _ = write!(s, " {} |", cell(v, &|v| format_value(Unit::OpsPerSec, v)));
        }
        let _ = writeln!(s);
    }

    let _ = writeln!(
        s,
        "\n### p99 commit latency (lower is better; in parentheses: multiples of the device's \
         median flush time measured just before that run)\n"
    );
    head(&mut s, "configuration");
    for r in &runs {
        let _ = write!(s, "| {} |", name(r));
        for &t in &threads {
            let v = value(r, t, "p99");
            let f = value(r, t, "flush").or(flush);
            let text = cell(v, &|v| match f {
                Some(f) if f > 0.0 => format!("{} ({:.1}×)", micros(v), v / f),
                _ => micros(v),
            });
            let _ = write!(s, " {text} |");
        }
        let _ = writeln!(s);
    }

    if let Some(g) = find(&runs, GROUPED) {
        for (title, what, higher) in [
            ("commits/s: Cairn grouped / peer", "commits", true),
            ("p99 latency: peer / Cairn grouped", "p99", false),
        ] {
            let _ = writeln!(
                s,
                "\n### Cairn grouped against each configuration, {title} (above 1.00× Cairn \
                 grouped is better)\n"
            );
            head(&mut s, "against");
            for r in runs.iter().filter(|r| r.config != GROUPED) {
                let _ = write!(s, "| {} |", name(r));
                for &t in &threads {
                    let ratio = match (value(g, t, what), value(r, t, what)) {
                        (Some(a), Some(b)) if higher && b > 0.0 => Some(a / b),
                        (Some(a), Some(b)) if !higher && a > 0.0 => Some(b / a),
                        _ => None,
                    };
                    let _ = write!(s, " {} |", cell(ratio, &|x| format!("{x:.2}×")));
                }
                let _ = writeln!(s);
            }
        }
        let plain = find(&runs, PLAIN).and_then(|p| value(p, 1, "commits"));
        if let (Some(grouped), Some(plain)) = (value(g, HEADLINE_THREADS, "commits"), plain) {
            let _ = writeln!(
                s,
                "\n**Cairn grouped at {HEADLINE_THREADS} threads: {} commits/s, {:.1}× Cairn \
                 plain at 1 thread ({} commits/s).**",
                format_value(Unit::OpsPerSec, grouped),
                grouped / plain,
                format_value(Unit::OpsPerSec, plain),
            );
        }
    }

    let _ = writeln!(s, "\n### Every figure\n");
    let _ = writeln!(
        s,
        "| configuration | T | commits | commits/s | p50 | p99 | p99.9 | max | flush | p99 / \
         flush | least-served thread: commits | its longest wait | threads with no commit |"
    );
    let _ = writeln!(
        s,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in &runs {
        for &t in &threads {
            let Some(commits) = r.figure(&figure_id(t, "commits")) else {
                continue;
            };
            let us = |what: &str| cell(value(r, t, what), &micros);
            let ratio = match (value(r, t, "p99"), value(r, t, "flush").or(flush)) {
                (Some(v), Some(f)) if f > 0.0 => format!("{:.1}×", v / f),
                _ => "—".into(),
            };
            let count = |what: &str| cell(value(r, t, what), &|v| format!("{v:.0}"));
            let _ = writeln!(
                s,
                "| {} | {t} | {} | {} | {} | {} | {} | {} | {} | {ratio} | {} | {} | {} |",
                column(r),
                // With --repeat, the rate is the median run's; so is this count.
                group_digits((commits.value * commits.secs).round() as u64),
                format_value(Unit::OpsPerSec, commits.value),
                us("p50"),
                us("p99"),
                us("p999"),
                us("max"),
                us("flush"),
                count("worst-commits"),
                us("worst-max-wait"),
                count("starved"),
            );
        }
    }
    s
}

/// The whole report, `docs/bench/group/results.md`.
pub fn markdown(results: &Results) -> String {
    let m = &results.machine;
    let runs = runs(results);
    let mut s = String::new();
    let _ = writeln!(s, "# Cairn group-commit benchmark\n");
    let secs = runs
        .iter()
        .flat_map(|r| r.figures.iter())
        .find(|f| f.unit == Unit::OpsPerSec)
        .map_or(0.0, |f| f.secs);
    let _ = writeln!(
        s,
        "{} s per thread count, {} run(s) per figure (median), measured {} by `{}` ({:.0} s in \
         all). Generated file: do not edit; rerun `make bench-group`. The suite is described \
         in [bench/README.md](../../../bench/README.md#group--group-commit-durable-one-put-\
         transactions-from-t-threads).\n",
        secs, results.repeat, results.date, results.command, results.total_secs
    );
    crate::report::setup_lines(&mut s, m, &results.cairn, &results.versions);
    match &results.flush {
        Some(f) => {
            let _ = writeln!(
                s,
                "**Device flush time** on the data directory: median **{:.0} µs** (p10 {:.0} \
                 µs, p90 {:.0} µs, max {:.0} µs; {}).\n",
                f.median_us, f.p10_us, f.p90_us, f.max_us, f.method
            );
        }
        None => {
            let _ = writeln!(s, "**Device flush time:** not measured.\n");
        }
    }
    if let Some(note) = flush_spread(&runs) {
        let _ = writeln!(s, "{note}\n");
    }
    let _ = writeln!(s, "## How to read the tables\n");
    let _ = writeln!(
        s,
        "- T threads of one process each commit durable one-put transactions (16-byte random \
         keys, 100-byte values) for the time above, on a freshly created database per \
         (configuration, T). Every commit is on stable storage when the call returns.\n\
         - **commits/s**: commits that returned before the deadline, all threads together, \
         divided by the run's time.\n\
         - **Latency** (p50, p99, p99.9, max): each caller times each call, from the call to the \
         return of its commit (waiting for the writer lock or for the group included); all \
         threads' samples merged. The call in flight at the deadline is finished and counted \
         in the latencies (its caller waited that long) but not in commits/s.\n\
         - **least-served thread**: the thread with the fewest commits before the deadline, \
         its count and its longest single wait. **threads with no commit**: threads none of \
         whose commits returned before the deadline (starved).\n\
         - **flush**: the median of 20 fdatasyncs of a 4 KiB overwrite, timed in that run's \
         fresh database directory right before the run (the disk may be shared with other work \
         and its flush time drift; the figure above is the same measurement, 50 times, before \
         the suite).\n\
         - Ratios compare figures of this run only.\n"
    );
    if results.failures.iter().any(|f| f.suite == Suite::Group) {
        let _ = writeln!(s, "## Failures\n");
        for f in results.failures.iter().filter(|f| f.suite == Suite::Group) {
            let _ = writeln!(s, "- `{}`: {}", f.config, f.error);
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Results");
    s.push_str(&tables(results));
    let _ = writeln!(s, "\n## Exact settings per configuration\n");
    let _ = writeln!(s, "| configuration | settings |");
    let _ = writeln!(s, "|---|---|");
    for c in &results.configs {
        if runs.iter().any(|r| r.config == c.id) {
            let _ = writeln!(s, "| `{}` | {} |", c.id, c.flags.replace('|', "\\|"));
        }
    }
    let _ = writeln!(
        s,
        "\nPlots: [`group-commits.png`](group-commits.png) (commits/s against threads) and \
         [`group-p99.png`](group-p99.png) (p99 latency against threads), both log-log. Raw \
         figures: `results.json`."
    );
    s
}

/// A warning when the flush times measured before the runs differ by more than 3×: the disk
/// was not in one state for the whole suite (shared, or rate-limited with a burst budget), and
/// figures of runs with different flush times do not compare engines alone.
fn flush_spread(runs: &[&RunRecord]) -> Option<String> {
    let flushes: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.figures.iter())
        .filter(|f| f.id.ends_with("-flush") && f.value > 0.0)
        .map(|f| f.value)
        .collect();
    let lo = flushes.iter().copied().fold(f64::MAX, f64::min);
    let hi = flushes.iter().copied().fold(0.0, f64::max);
    (hi > 3.0 * lo).then(|| {
        format!(
            "**Warning: the device's flush time moved between runs** (median before a run: from \
             {} to {}; column `flush` below). Compare rows whose flush times are alike.",
            micros(lo),
            micros(hi)
        )
    })
}

/// One color per configuration, the same in every plot and every run.
fn color(config: &str) -> RGBColor {
    match config {
        GROUPED => RGBColor(214, 39, 40),
        PLAIN => RGBColor(255, 152, 150),
        "lmdb-durable" => RGBColor(31, 119, 180),
        "mdbx-durable" => RGBColor(44, 160, 44),
        "redb-durable" => RGBColor(255, 127, 14),
        "sqlite-full" => RGBColor(148, 103, 189),
        "rocksdb-sync" => RGBColor(110, 80, 60),
        _ => RGBColor(127, 127, 127),
    }
}

/// Draws group-commits.png and group-p99.png into `dir`.
pub fn plots(results: &Results, dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    let mut runs = runs(results);
    // Cairn grouped first, so it has the first color and sits on top of the legend.
    runs.sort_by_key(|r| (r.config != GROUPED, config_rank(results, &r.config)));
    let threads = thread_counts(&runs);
    if threads.is_empty() {
        return Ok(Vec::new());
    }
    let mut written = Vec::new();
    for (file, what, title) in [
        (
            "group-commits.png",
            "commits",
            "Durable one-put commits/s against writer threads (higher is better)",
        ),
        (
            "group-p99.png",
            "p99",
            "p99 commit latency, µs, against writer threads (lower is better)",
        ),
    ] {
        let path = dir.join(file);
        line_plot(&path, title, what, &runs, &threads, results)?;
        written.push(path);
    }
    Ok(written)
}

fn line_plot(
    path: &Path,
    title: &str,
    what: &str,
    runs: &[&RunRecord],
    threads: &[usize],
    results: &Results,
) -> Result<()> {
    let err = |e| anyhow!("{e:?}");
    let series: Vec<(&RunRecord, Vec<(f64, f64)>)> = runs
        .iter()
        .map(|r| {
            let points = threads
                .iter()
                .filter_map(|&t| value(r, t, what).map(|v| (t as f64, v)))
                .filter(|&(_, v)| v > 0.0)
                .collect();
            (*r, points)
        })
        .collect();
    let all = series.iter().flat_map(|s| s.1.iter().map(|p| p.1));
    let (lo, hi) = all.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if hi > 0.0 {
        (lo / 2.0, hi * 2.0)
    } else {
        (1.0, 10.0)
    };
    // The p99 plot shows the flush time as a floor line, so its range reaches down to it.
    let flush = (what == "p99").then(|| runs_flush(runs, results)).flatten();
    let lo = flush.map_or(lo, |f| lo.min(f / 2.0));
    let x_max = *threads.last().unwrap() as f64 * 1.5;
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let note = match flush {
        Some(f) => format!(" — flush {f:.0} µs (dashed)"),
        None => String::new(),
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}{note}"), font(15))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0.8f64..x_max).log_scale().base(4.0), (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("writer threads (log scale)")
        .y_desc(if what == "p99" {
            "µs (log scale)"
        } else {
            "commits/s (log scale)"
        })
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| short(*v))
        .label_style(font(12))
        .axis_desc_style(font(13))
        .draw()
        .map_err(err)?;
    if let Some(y) = flush {
        if y > lo && y < hi {
            let dashes = (0..40).map(|i| {
                let a = 0.8 * (x_max / 0.8f64).powf(i as f64 / 40.0);
                let b = 0.8 * (x_max / 0.8f64).powf((i as f64 + 0.5) / 40.0);
                PathElement::new(vec![(a, y), (b, y)], BLACK.stroke_width(1))
            });
            chart.draw_series(dashes).map_err(err)?;
        }
    }
    for (run, points) in &series {
        let color = color(&run.config);
        let width = if run.config == GROUPED { 3 } else { 2 };
        chart
            .draw_series(std::iter::once(PathElement::new(
                points.clone(),
                color.stroke_width(width),
            )))
            .map_err(err)?
            .label(column(run))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        // Every line starts low at one thread and rises with more.
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(font(13))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// The flush time the p99 plot draws: the median of the flush times measured before each run,
/// or the one measured before the suite in results without them.
fn runs_flush(runs: &[&RunRecord], results: &Results) -> Option<f64> {
    let mut per_run: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.figures.iter())
        .filter(|f| f.id.ends_with("-flush") && f.value > 0.0)
        .map(|f| f.value)
        .collect();
    if per_run.is_empty() {
        return results.flush.as_ref().map(|f| f.median_us);
    }
    per_run.sort_by(f64::total_cmp);
    Some(per_run[per_run.len() / 2])
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.0}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}
