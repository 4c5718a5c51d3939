//! `cairn copy`: a hot backup of the current snapshot (writers go on meanwhile; the copy is the
//! state of one commit), raw page by page or compacted (-c). Like `mdb_copy`, the destination is
//! a directory (created if missing), a data file with -n, or stdout when left out.
//!
//! A copy never replaces anything, as `mdb_copy`'s (its data file is opened with O_CREAT|O_EXCL):
//! when the destination's data file already exists, whatever it holds (an environment, an
//! empty file, a directory or a symbolic link in its place), the copy fails with EEXIST
//! ("copying failed: PATH: File exists (os error 17)", exit status 1, `mdb_copy`'s "copying
//! failed, error 17 (File exists)") and leaves it alone, raw or compacted, with or without -n.
//! A directory also counts as holding an environment when it holds LMDB's `data.mdb`. Lock
//! files and other files in the directory do not matter, as in `mdb_copy`.
//!
//! Where `mdb_copy` checks once, when it creates the file, and leaves a partial file behind if
//! the copy fails, `cairn copy` checks first (so a refusal costs nothing), then writes the copy
//! under a private temporary directory beside the destination and publishes it with a hard
//! link, which fails with EEXIST, atomically, if the name was taken meanwhile: the destination
//! is only ever missing or complete.

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
            copy_new(&env, &target, a.compact, show)
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

/// The data file a copy goes to, refused if it (or, in a directory, LMDB's data file) exists.
fn target_file(dst: &Path, no_subdir: bool) -> CliResult<PathBuf> {
    if no_subdir {
        refuse_existing(dst)?;
        return Ok(dst.to_path_buf());
    }
    if dst.is_file() {
        return Err(CliError::Usage(format!(
            "{} is a file: give a directory, or -n to write a data file",
            dst.display()
        )));
    }
    std::fs::create_dir_all(dst).ctx(|| format!("creating directory {}", dst.display()))?;
    let target = dst.join("data.cairn");
    refuse_existing(&target)?;
    refuse_existing(&dst.join("data.mdb"))?;
    Ok(target)
}

/// The error of a copy whose destination exists: EEXIST, as `mdb_copy` reports it.
fn exists_error(path: &Path, source: std::io::Error) -> CliError {
    CliError::Io {
        what: format!("copying failed: {}", path.display()),
        source,
    }
}

/// Fails with EEXIST if anything is at `path` (a dangling symbolic link too, as O_EXCL does).
fn refuse_existing(path: &Path) -> CliResult {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CliError::Io {
            what: format!("checking {}", path.display()),
            source: e,
        }),
        Ok(_) => Err(exists_error(
            path,
            std::io::Error::from(rustix::io::Errno::EXIST),
        )),
    }
}

/// Copies to `target`, which must not exist: into a temporary directory beside it, then
/// published with a hard link (atomic, and EEXIST if the name was taken meanwhile), so that a
/// failed or refused copy leaves nothing at `target`.
fn copy_new(env: &Env, target: &Path, compact: bool, show: bool) -> CliResult {
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".cairn-copy-")
        .tempdir_in(parent)
        .ctx(|| format!("creating a temporary directory in {}", parent.display()))?;
    let staged = tmp.path().join("data.cairn");
    copy_with_progress(env, &staged, compact, show)?;
    match std::fs::hard_link(&staged, target) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(exists_error(target, e)),
        // A file system without hard links (vfat, some FUSE ones): the existence check above,
        // then a rename, which could replace a file created in between (the only window left).
        Err(e)
            if matches!(
                rustix::io::Errno::from_io_error(&e),
                Some(
                    rustix::io::Errno::PERM
                        | rustix::io::Errno::OPNOTSUPP
                        | rustix::io::Errno::MLINK
                )
            ) =>
        {
            refuse_existing(target)?;
            std::fs::rename(&staged, target)
                .ctx(|| format!("moving the copy to {}", target.display()))
        }
        Err(e) => Err(CliError::Io {
            what: format!("linking the copy to {}", target.display()),
            source: e,
        }),
    }
    // `tmp` goes on drop, with the staged name (the copy itself stays under `target`).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A name taken after the check (another copy finishing first) is not replaced either:
    /// publishing fails with EEXIST and the staged copy goes.
    #[test]
    fn publishing_never_replaces_a_name_taken_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::open(dir.path().join("src")).unwrap();
        let mut w = env.write_txn().unwrap();
        w.put(env.main_db(), b"k", b"v", cairn::PutFlags::empty())
            .unwrap();
        w.commit().unwrap();
        let dst = dir.path().join("dst");
        std::fs::create_dir(&dst).unwrap();
        let target = dst.join("data.cairn");
        for compact in [false, true] {
            std::fs::write(&target, b"theirs").unwrap();
            let e = copy_new(&env, &target, compact, false).unwrap_err();
            assert!(
                matches!(&e, CliError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
                "{e}"
            );
            assert_eq!(std::fs::read(&target).unwrap(), b"theirs");
            let left: Vec<_> = std::fs::read_dir(&dst).unwrap().collect();
            assert_eq!(left.len(), 1, "the staged copy stayed: {left:?}");
            std::fs::remove_file(&target).unwrap();
            copy_new(&env, &target, compact, false).unwrap();
            assert_eq!(std::fs::read_dir(&dst).unwrap().count(), 1);
            std::fs::remove_file(&target).unwrap();
        }
    }
}
