//! The `cairn` command. Exit status follows LMDB's tools: 0 on success, 1 (EXIT_FAILURE) on any
//! error, usage errors included.

mod alloc;

use cairn_cli::cli::{Cli, Command, Common};
use cairn_cli::{version_line, CliError, EnvPath};
use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let name = cli.command.as_ref().map_or("cairn", command_name);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_broken_pipe() => ExitCode::FAILURE,
        Err(CliError::Problems(_)) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cairn {name}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn command_name(c: &Command) -> &'static str {
    match c {
        Command::Stat(_) => "stat",
        Command::Dump(_) => "dump",
        Command::Load(_) => "load",
        Command::Copy(_) => "copy",
        Command::Check(_) => "check",
        Command::Readers(_) => "readers",
        Command::Drop(_) => "drop",
        Command::Migrate(_) => "migrate",
        Command::Serve(_) => "serve",
        Command::Cluster(_) => "cluster",
    }
}

/// The environment path, or the usage error `mdb_*` gives without one.
fn env_path(common: &Common) -> Result<EnvPath, CliError> {
    match &common.path {
        Some(p) => Ok(EnvPath {
            path: p.clone(),
            no_subdir: common.no_subdir,
        }),
        None => Err(CliError::Usage(
            "the environment path is missing (see --help)".into(),
        )),
    }
}

fn print_version() -> Result<(), CliError> {
    println!("{}", version_line());
    Ok(())
}

/// `cairn serve`: runs until SIGINT or SIGTERM.
fn serve(a: &cairn_cli::cli::ServeArgs, path: EnvPath) -> Result<(), CliError> {
    let mut cfg = cairn_server::Config::new(path.path);
    cfg.no_subdir = path.no_subdir;
    cfg.listen = a.listen;
    cfg.lazy = a.lazy;
    // Logged unless told otherwise (`--logged` names the default).
    cfg.logged = !a.flush_pages;
    cfg.max_in_flight = a.max_in_flight;
    cfg.max_body = a.max_body;
    cfg.backup_dir = a.backup_dir.clone();
    cfg.group_commit = !a.no_group;
    cfg.build_batch = a.build_batch;
    cfg.map_reserve = a.map_reserve;
    cairn_server::serve(cfg).map_err(|e| CliError::Usage(format!("serving: {e}")))
}

/// `cairn serve --cluster`: a cluster node, until SIGINT or SIGTERM.
fn serve_cluster(a: &cairn_cli::cli::ServeArgs) -> Result<(), CliError> {
    let c = &a.cluster;
    let (Some(id), Some(dir)) = (c.id, c.dir.clone()) else {
        return Err(CliError::Usage("--cluster needs --id and --dir".into()));
    };
    let mut server = cairn_server::Config::new(&dir);
    server.listen = a.listen;
    server.max_in_flight = a.max_in_flight;
    server.max_body = a.max_body;
    server.build_batch = a.build_batch;
    let mut cfg = cairn_server::cluster::serve::ClusterConfig::new(server, id, dir);
    for p in &c.peers {
        let (pid, addr) = p
            .split_once('=')
            .ok_or_else(|| CliError::Usage(format!("--peer {p:?}: expected ID=ADDR")))?;
        let pid: u64 = pid
            .parse()
            .map_err(|e| CliError::Usage(format!("--peer {p:?}: {e}")))?;
        // Every member may be given the same list: its own entry is skipped if it names the
        // address it listens on.
        if pid == id {
            if addr == a.listen.to_string() {
                continue;
            }
            return Err(CliError::Usage(format!(
                "--peer {p:?}: this node's id with another address than --listen"
            )));
        }
        cfg.peers.insert(pid, addr.to_string());
    }
    cfg.heartbeat_ms = c.heartbeat_ms;
    cfg.election_ms = c.election_ms;
    cfg.snapshot_every = c.snapshot_every;
    cairn_server::cluster::serve::serve_cluster(cfg)
        .map_err(|e| CliError::Usage(format!("serving: {e}")))
}

fn run(cli: Cli) -> Result<(), CliError> {
    let Some(cmd) = cli.command else {
        if cli.version {
            return print_version();
        }
        return Err(CliError::Usage(
            "a subcommand is needed: stat, dump, load, copy, check, readers, drop, migrate, serve or cluster (see --help)"
                .into(),
        ));
    };
    if let Command::Cluster(a) = cmd {
        return cairn_raft::cluster::run(a).map_err(CliError::Usage);
    }
    if let Command::Serve(a) = &cmd {
        if a.cluster.cluster {
            if a.common.path.is_some() {
                return Err(CliError::Usage(
                    "--cluster serves the node directory --dir, not a path".into(),
                ));
            }
            return serve_cluster(a);
        }
    }
    let common = cmd.common();
    if common.version {
        return print_version();
    }
    let path = env_path(common)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut err = std::io::stderr();
    // An LMDB environment (LMDB's meta magic in data.mdb, no data.cairn beside it) is read
    // with the LMDB reader; commands that would write it are refused.
    if let Command::Migrate(a) = &cmd {
        let r = cairn_cli::migrate::run(a, path, &mut out);
        out.flush().map_err(|source| CliError::Io {
            what: "writing the output".into(),
            source,
        })?;
        return r;
    }
    if cairn_cli::lmdb::detect(&path).is_some() {
        let r = match &cmd {
            Command::Stat(a) => cairn_cli::lmdb::stat(a, path, &mut out),
            Command::Dump(a) => cairn_cli::lmdb::dump(a, path, &mut out),
            Command::Check(a) => cairn_cli::lmdb::check(a, path, &mut out, &mut err),
            Command::Readers(a) => cairn_cli::lmdb::readers(a, path, &mut out),
            _ => Err(CliError::Usage(format!(
                "{}: an LMDB environment; convert it first with `cairn migrate {}`",
                path.path.display(),
                path.path.display()
            ))),
        };
        out.flush().map_err(|source| CliError::Io {
            what: "writing the output".into(),
            source,
        })?;
        return r;
    }
    let r = match &cmd {
        Command::Stat(a) => cairn_cli::stat::run(a, path, &mut out),
        Command::Dump(a) => cairn_cli::dump::run(a, path, &mut out),
        Command::Load(a) => cairn_cli::load::run(a, path, &mut std::io::stdin().lock(), &mut err),
        Command::Copy(a) => cairn_cli::copy::run(a, path, &mut out),
        Command::Check(a) => cairn_cli::check::run(a, path, &mut out, &mut err),
        Command::Readers(a) => cairn_cli::readers::run(a, path, &mut out),
        Command::Drop(a) => cairn_cli::drop::run(a, path),
        Command::Migrate(_) => unreachable!("dispatched above"),
        Command::Serve(a) => serve(a, path),
        Command::Cluster(_) => unreachable!("dispatched above"),
    };
    out.flush().map_err(|source| CliError::Io {
        what: "writing the output".into(),
        source,
    })?;
    r
}
