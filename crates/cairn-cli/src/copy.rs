//! `cairn copy`: a hot backup of the current snapshot (writers go on meanwhile; the copy is the
//! state of one commit), raw page by page or compacted (-c). Like `mdb_copy`, the destination is
//! a directory (created if missing, and it must not already hold a database), a data file with
//! -n, or stdout when left out.

use crate::cli::CopyArgs;
use crate::progress::{self, Progress};
use crate::{CliError, CliResult, Context, EnvPath};
use cairn::Env;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Runs `cairn copy`.
pub fn run(a: &CopyArgs, src: EnvPath, out: &mut dyn Write) -> CliResult {
    let env = src.open_read()?;
    let show = progress::wanted(a.quiet, a.dst.is_none());
    match &a.dst {
        Some(dst) => {
            let target = target_file(dst, a.common.no_subdir)?;
            copy_with_progress(&env, &target, a.compact, show)
        }
        None => {
            if std::io::stdout().is_terminal() {
                return Err(CliError::Usage(
                    "stdout is a terminal: give a destination, or redirect the copy".into(),
                ));
            }
            // The engine writes copies to files (a compact copy is a fresh environment), so
            // stdout gets a finished copy streamed from a private temporary directory.
            let tmp = tempfile::tempdir().ctx(|| "creating a temporary directory".into())?;
            let target = tmp.path().join("data.cairn");
            copy_with_progress(&env, &target, a.compact, show)?;
            let mut f =
                std::fs::File::open(&target).ctx(|| format!("opening {}", target.display()))?;
            std::io::copy(&mut f, out).ctx(|| "writing the copy to stdout".into())?;
            out.flush().ctx(|| "writing the copy to stdout".into())
        }
    }
}

/// The data file a copy goes to.
fn target_file(dst: &Path, no_subdir: bool) -> CliResult<PathBuf> {
    if no_subdir {
        return Ok(dst.to_path_buf());
    }
    if dst.is_file() {
        return Err(CliError::Usage(format!(
            "{} is a file: give a directory, or -n to write a data file",
            dst.display()
        )));
    }
    std::fs::create_dir_all(dst).ctx(|| format!("creating directory {}", dst.display()))?;
    Ok(dst.join("data.cairn"))
}

/// Copies, drawing the copy's growth against the expected size when asked.
pub fn copy_with_progress(env: &Env, target: &Path, compact: bool, show: bool) -> CliResult {
    let what = || format!("copying to {}", target.display());
    if !show {
        return env.copy_to(target, compact).ctx(what);
    }
    let info = env.info().ctx(|| "reading environment info".into())?;
    let pages = info.last_pgno + 1;
    let expected = if compact {
        pages.saturating_sub(info.free_pages + info.pending_pages)
    } else {
        pages
    } * info.page_size as u64;
    let pb = Progress::bar(true, expected.max(1), "copying", true);
    let done = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if let Ok(m) = std::fs::metadata(target) {
                    pb.set(m.len().min(expected));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let r = env.copy_to(target, compact);
        done.store(true, Ordering::Relaxed);
        r
    });
    pb.finish();
    r.ctx(what)
}
