//! PNG plots of a run, drawn with `plotters` (bitmap backend, fonts through `ab_glyph`).
//!
//! The font is a TrueType file found on the system (Debian: fonts-dejavu-core, which
//! bench/run.sh installs); without one, plotting is skipped with a warning.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::engines::{ModeClass, COLUMNS};
use crate::report::{format_value, rows, Results, Row};
use crate::workloads::{Suite, Unit};

const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];
pub(crate) const FONT: &str = "sans-serif";

/// One color per report column, Cairn first.
const PALETTE: [RGBColor; 9] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(140, 190, 230),
    RGBColor(44, 160, 44),
    RGBColor(152, 223, 138),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(110, 80, 60),
    RGBColor(190, 170, 150),
];

pub(crate) fn register_font() -> Result<()> {
    let path = FONT_CANDIDATES
        .iter()
        .find(|p| Path::new(p).exists())
        .ok_or_else(|| anyhow!("no TrueType font found (apt-get install fonts-dejavu-core)"))?;
    let bytes: &'static [u8] = Box::leak(std::fs::read(path)?.into_boxed_slice());
    plotters::style::register_font(FONT, FontStyle::Normal, bytes)
        .map_err(|_| anyhow!("cannot load font {path}"))
}

/// Draws every plot into `dir`; returns the files written.
pub fn write_all(results: &Results, dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    let rows = rows(results);
    let mut written = Vec::new();
    for suite in Suite::ALL {
        for class in [ModeClass::Durable, ModeClass::NoFlush] {
            let panels: Vec<&Row> = rows
                .iter()
                .filter(|r| r.suite == suite && r.class == class && r.unit == Unit::OpsPerSec)
                .collect();
            if panels.is_empty() {
                continue;
            }
            let path = dir.join(format!("throughput-{}-{}.png", suite.id(), class.label()));
            let title = format!(
                "{}: {} (ops/s, higher is better)",
                suite.title(),
                class.label()
            );
            bars(&path, &title, &panels, results)?;
            written.push(path);
        }
    }
    for class in [ModeClass::Durable, ModeClass::NoFlush] {
        let path = dir.join(format!("latency-{}.png", class.label()));
        if latency(&path, class, results)? {
            written.push(path);
        }
    }
    Ok(written)
}

pub(crate) fn font(size: u32) -> TextStyle<'static> {
    (FONT, size).into_font().color(&BLACK)
}

/// Draws the title and a color legend of `columns` into the header band.
fn header(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    title: &str,
    columns: &[usize],
    note: &str,
) -> Result<()> {
    let draw = |e: Result<(), DrawingAreaErrorKind<_>>| e.map_err(|e| anyhow!("{e:?}"));
    draw(area.draw(&Text::new(title.to_string(), (12, 8), font(18))))?;
    let mut x = 12;
    for &c in columns {
        draw(area.draw(&Rectangle::new(
            [(x, 40), (x + 14, 54)],
            PALETTE[c].filled(),
        )))?;
        draw(area.draw(&Text::new(COLUMNS[c].to_string(), (x + 19, 40), font(13))))?;
        x += 28 + 8 * COLUMNS[c].len() as i32;
    }
    if !note.is_empty() {
        draw(area.draw(&Text::new(note.to_string(), (x + 10, 40), font(13))))?;
    }
    Ok(())
}

fn grid_shape(n: usize) -> (usize, usize) {
    let cols = n.clamp(1, 3);
    (n.div_ceil(cols), cols)
}

fn short_axis(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let t: String = s.chars().take(max - 1).collect();
        format!("{t}…")
    }
}

/// A grid of bar charts, one panel per row (workload), one bar per column (engine).
fn bars(path: &Path, title: &str, panels: &[&Row], results: &Results) -> Result<()> {
    let (grid_rows, grid_cols) = grid_shape(panels.len());
    let size = (480 * grid_cols as u32, 70 + 300 * grid_rows as u32);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
    let (top, body) = root.split_vertically(70);
    let present: Vec<usize> = (0..COLUMNS.len())
        .filter(|&c| panels.iter().any(|r| r.value(c).is_some()))
        .collect();
    header(&top, title, &present, &format!("N = {}", results.records))?;
    for (area, row) in body.split_evenly((grid_rows, grid_cols)).iter().zip(panels) {
        let values: Vec<(usize, f64)> = present
            .iter()
            .filter_map(|&c| row.value(c).map(|v| (c, v)))
            .collect();
        let max = values.iter().map(|v| v.1).fold(0.0, f64::max).max(1.0);
        let mut chart = ChartBuilder::on(area)
            .caption(truncate(&row.label, 58), font(14))
            .margin(10)
            .x_label_area_size(4)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..present.len() as f64, 0f64..max * 1.18)
            .map_err(|e| anyhow!("{e:?}"))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_x_axis()
            .y_labels(5)
            .y_label_formatter(&|v| short_axis(*v))
            .label_style(font(11))
            .draw()
            .map_err(|e| anyhow!("{e:?}"))?;
        let slot = |c: usize| present.iter().position(|&p| p == c).unwrap_or(0) as f64;
        chart
            .draw_series(values.iter().map(|&(c, v)| {
                Rectangle::new(
                    [(slot(c) + 0.12, 0.0), (slot(c) + 0.88, v)],
                    PALETTE[c].filled(),
                )
            }))
            .map_err(|e| anyhow!("{e:?}"))?;
        let label_style = font(10).pos(Pos::new(HPos::Center, VPos::Bottom));
        chart
            .draw_series(values.iter().map(|&(c, v)| {
                let text = format_value(Unit::OpsPerSec, v).replace(' ', "");
                Text::new(text, (slot(c) + 0.5, v), label_style.clone())
            }))
            .map_err(|e| anyhow!("{e:?}"))?;
    }
    root.present().map_err(|e| anyhow!("{e:?}"))?;
    Ok(())
}

/// Commit latency percentiles (p50 solid, p99 lighter) per engine, one panel per
/// per-transaction workload. Returns false if there was nothing to draw.
fn latency(path: &Path, class: ModeClass, results: &Results) -> Result<bool> {
    let mut workloads: Vec<(Suite, String, String)> = Vec::new();
    for r in results
        .runs
        .iter()
        .filter(|r| r.class == class && r.suite != Suite::Group)
    {
        for l in &r.latencies {
            if !workloads.iter().any(|w| w.0 == r.suite && w.1 == l.id) {
                workloads.push((r.suite, l.id.clone(), l.label.clone()));
            }
        }
    }
    if workloads.is_empty() {
        return Ok(false);
    }
    let (grid_rows, grid_cols) = grid_shape(workloads.len());
    let size = (520 * grid_cols as u32, 70 + 320 * grid_rows as u32);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
    let (top, body) = root.split_vertically(70);
    let present: Vec<usize> = (0..COLUMNS.len())
        .filter(|&c| {
            results
                .runs
                .iter()
                .any(|r| r.class == class && r.suite != Suite::Group && r.column == COLUMNS[c])
        })
        .collect();
    let title = format!("Commit latency, {} (µs, lower is better)", class.label());
    header(&top, &title, &present, "left bar p50, right bar p99")?;
    for (area, (suite, id, label)) in body
        .split_evenly((grid_rows, grid_cols))
        .iter()
        .zip(&workloads)
    {
        let mut bars_of: Vec<(usize, f64, f64)> = Vec::new();
        for &c in &present {
            let run = results
                .runs
                .iter()
                .find(|r| r.suite == *suite && r.class == class && r.column == COLUMNS[c]);
            if let Some(l) = run.and_then(|r| r.latencies.iter().find(|l| &l.id == id)) {
                bars_of.push((c, l.p50, l.p99));
            }
        }
        let max = bars_of.iter().map(|b| b.2).fold(0.0, f64::max).max(1.0);
        let mut chart = ChartBuilder::on(area)
            .caption(truncate(label, 62), font(14))
            .margin(10)
            .x_label_area_size(4)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..present.len() as f64, 0f64..max * 1.18)
            .map_err(|e| anyhow!("{e:?}"))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_x_axis()
            .y_labels(5)
            .y_label_formatter(&|v| short_axis(*v))
            .label_style(font(11))
            .draw()
            .map_err(|e| anyhow!("{e:?}"))?;
        let slot = |c: usize| present.iter().position(|&p| p == c).unwrap_or(0) as f64;
        chart
            .draw_series(bars_of.iter().flat_map(|&(c, p50, p99)| {
                let x = slot(c);
                [
                    Rectangle::new([(x + 0.08, 0.0), (x + 0.48, p50)], PALETTE[c].filled()),
                    Rectangle::new(
                        [(x + 0.52, 0.0), (x + 0.92, p99)],
                        PALETTE[c].mix(0.45).filled(),
                    ),
                ]
            }))
            .map_err(|e| anyhow!("{e:?}"))?;
        let label_style = font(9).pos(Pos::new(HPos::Center, VPos::Bottom));
        chart
            .draw_series(bars_of.iter().flat_map(|&(c, p50, p99)| {
                let x = slot(c);
                [
                    Text::new(
                        format_value(Unit::Micros, p50),
                        (x + 0.28, p50),
                        label_style.clone(),
                    ),
                    Text::new(
                        format_value(Unit::Micros, p99),
                        (x + 0.72, p99),
                        label_style.clone(),
                    ),
                ]
            }))
            .map_err(|e| anyhow!("{e:?}"))?;
    }
    root.present().map_err(|e| anyhow!("{e:?}"))?;
    Ok(true)
}
