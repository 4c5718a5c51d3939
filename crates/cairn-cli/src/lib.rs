//! The machinery of the `cairn` command: one module per subcommand, the `mdb_dump` text format,
//! and what they share (opening an environment the way LMDB's tools do, errors that map to
//! LMDB's exit codes, progress bars that only appear on a terminal).
//!
//! Every subcommand returns `Result<(), CliError>`; `main` prints the error after the program
//! name and exits with 1, LMDB's `EXIT_FAILURE`, so scripts written for `mdb_*` keep working.

pub mod check;
pub mod cli;
pub mod copy;
pub mod drop;
pub mod dump;
pub mod dumpfmt;
pub mod lmdb;
pub mod load;
pub mod migrate;
pub mod progress;
pub mod readers;
pub mod stat;

use cairn::{Env, EnvOptions};
use std::path::{Path, PathBuf};

/// Why a subcommand failed.
#[derive(Debug)]
pub enum CliError {
    /// The engine refused or failed; `what` names the object ("opening db/").
    Engine {
        /// What was being done.
        what: String,
        /// The engine's error.
        source: cairn::Error,
    },
    /// An I/O error outside the engine (the dump file, the output).
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Malformed input, with its line.
    Input {
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        msg: String,
    },
    /// Anything else the user must fix (bad option combination, missing database).
    Usage(String),
    /// The checker found problems (already printed).
    Problems(usize),
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Engine { what, source } => write!(f, "{what}: {source}"),
            CliError::Io { what, source } => write!(f, "{what}: {source}"),
            CliError::Input { line, msg } => write!(f, "line {line}: {msg}"),
            CliError::Usage(m) => f.write_str(m),
            CliError::Problems(n) => write!(f, "{n} problem(s) found"),
        }
    }
}

impl std::error::Error for CliError {}

impl CliError {
    /// Whether the error is a closed output pipe (`cairn dump | head`), which ends the program
    /// quietly with a failure status, as `mdb_dump` does on SIGPIPE.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, CliError::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// Result of a subcommand.
pub type CliResult<T = ()> = Result<T, CliError>;

/// Attaches context to engine and I/O errors.
pub trait Context<T> {
    /// Wraps the error with what was being done.
    fn ctx(self, what: impl FnOnce() -> String) -> CliResult<T>;
}

impl<T> Context<T> for cairn::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> CliResult<T> {
        self.map_err(|source| CliError::Engine {
            what: what(),
            source,
        })
    }
}

impl<T> Context<T> for std::io::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> CliResult<T> {
        self.map_err(|source| CliError::Io {
            what: what(),
            source,
        })
    }
}

/// Where an environment lives: a directory holding `data.cairn`, or `data.mdb` under LMDB's
/// names (as the LMDB faces write it; the engine's `FileNames::Auto` picks whichever is
/// there), or with `-n` (LMDB's MDB_NOSUBDIR) the data file itself.
#[derive(Clone, Debug)]
pub struct EnvPath {
    /// The path given on the command line.
    pub path: PathBuf,
    /// `-n`: the path is the data file.
    pub no_subdir: bool,
}

impl EnvPath {
    /// The data file this path names.
    pub fn data_file(&self) -> PathBuf {
        self.options().files(&self.path).0
    }

    /// The lock file beside the data file.
    pub fn lock_file(&self) -> PathBuf {
        self.options().files(&self.path).1
    }

    /// Options with this path's layout.
    pub fn options(&self) -> EnvOptions {
        let o = Env::options();
        if self.no_subdir {
            o.no_subdir(true)
        } else {
            o
        }
    }

    /// Opens an existing environment read-only.
    pub fn open_read(&self) -> CliResult<Env> {
        self.open_existing(self.options().read_only(true))
    }

    /// Opens an existing environment for writing.
    pub fn open_write(&self) -> CliResult<Env> {
        self.open_existing(self.options())
    }

    fn open_existing(&self, opts: EnvOptions) -> CliResult<Env> {
        let data = self.data_file();
        if !data.exists() {
            return Err(CliError::Usage(missing_env(&self.path, &data)));
        }
        match opts.open(&self.path) {
            // A data.mdb that is not Cairn's is most likely LMDB's own file.
            Err(cairn::Error::NotCairn { .. }) if data.extension().is_some_and(|e| e == "mdb") => {
                Err(CliError::Usage(format!(
                    "{}: not a Cairn environment{LMDB_HINT}",
                    data.display()
                )))
            }
            r => r.ctx(|| format!("opening {}", self.path.display())),
        }
    }
}

/// What a path that holds an LMDB environment is told.
const LMDB_HINT: &str =
    " (it looks like an LMDB environment: convert it with `cairn migrate PATH`)";

/// The message for a path that holds no Cairn environment, with a hint for LMDB's layout.
fn missing_env(path: &Path, data: &Path) -> String {
    let lmdb = if path.is_dir() {
        path.join("data.mdb")
    } else {
        path.to_path_buf()
    };
    let hint = if lmdb.is_file() && lmdb.extension().is_some_and(|e| e == "mdb") {
        LMDB_HINT
    } else {
        ""
    };
    format!(
        "{}: no Cairn environment here ({} does not exist){hint}",
        path.display(),
        data.display()
    )
}

/// The version line printed by `-V`.
pub fn version_line() -> String {
    format!(
        "cairn {} (file format {})",
        env!("CARGO_PKG_VERSION"),
        cairn::format::FORMAT_VERSION
    )
}
