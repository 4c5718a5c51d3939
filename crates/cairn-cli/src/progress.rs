//! Progress display for long work (load, copy, check, dump). It is drawn on stderr only when a
//! person is watching: stderr is a terminal, stdout is not a pipe, and stdout is not the
//! terminal the data itself goes to. Everything else (scripts, pipes, CI) sees nothing.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::os::unix::fs::FileTypeExt;
use std::time::Duration;

/// Whether to draw progress. `data_on_stdout`: the command writes its data to stdout.
pub fn wanted(quiet: bool, data_on_stdout: bool) -> bool {
    if quiet || !std::io::stderr().is_terminal() {
        return false;
    }
    let out = std::io::stdout();
    if data_on_stdout && out.is_terminal() {
        return false;
    }
    // "/dev/stdout" resolves to whatever fd 1 is; a FIFO means our output is piped.
    !std::fs::metadata("/dev/stdout").is_ok_and(|m| m.file_type().is_fifo())
}

/// A progress bar or spinner, or nothing.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// Nothing drawn.
    pub fn none() -> Progress {
        Progress(None)
    }

    /// A bar counting to `total` in `unit`s ("records", "bytes").
    pub fn bar(show: bool, total: u64, what: &str, bytes: bool) -> Progress {
        if !show {
            return Progress::none();
        }
        let template = if bytes {
            "{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})"
        } else {
            "{msg} [{bar:40}] {human_pos}/{human_len} ({eta})"
        };
        let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template(template)
                .expect("valid template")
                .progress_chars("=> "),
        );
        pb.set_message(what.to_string());
        pb.enable_steady_tick(Duration::from_millis(200));
        Progress(Some(pb))
    }

    /// A spinner with elapsed time, for work whose size is unknown.
    pub fn spinner(show: bool, what: &str) -> Progress {
        if !show {
            return Progress::none();
        }
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg} {human_pos} ({elapsed})")
                .expect("valid template"),
        );
        pb.set_message(what.to_string());
        pb.enable_steady_tick(Duration::from_millis(120));
        Progress(Some(pb))
    }

    /// Whether anything is drawn.
    pub fn is_shown(&self) -> bool {
        self.0.is_some()
    }

    /// Advances by `n`.
    pub fn inc(&self, n: u64) {
        if let Some(pb) = &self.0 {
            pb.inc(n);
        }
    }

    /// Sets the position.
    pub fn set(&self, pos: u64) {
        if let Some(pb) = &self.0 {
            pb.set_position(pos);
        }
    }

    /// Removes the display.
    pub fn finish(&self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
