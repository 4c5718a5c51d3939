//! The network between processes: openraft's RPCs over HTTP/1.1 (axum serves them, hyper's
//! client sends them), and the HTTP client the cluster commands and tests use.
//!
//! Raft RPCs are `POST /raft/append`, `/raft/vote` and `/raft/snapshot` (one chunk of a
//! snapshot per request: openraft splits the snapshot file into `snapshot_max_chunk_size`
//! pieces and resumes by offset), their bodies openraft's request types encoded with the
//! crate's encoding (postcard, types.rs), their answers `Result<response, RaftError>` encoded
//! alike. The client routes (JSON) are in cluster.rs; docs/replication.md, "Network".
//!
//! Invariants:
//! - Each `HttpClient` (one per target node and replication stream) keeps one HTTP/1.1
//!   connection open across its RPCs, one RPC at a time; after a failure or a timeout the
//!   connection is dropped, so an answer is only ever read by the RPC that asked for it.
//! - A transport failure (refused, reset, timed out) is openraft's `Unreachable`/`Network`
//!   error, so openraft backs off and retries, and an answer from the remote `Raft` is
//!   returned as it was given.

use crate::raft::{NodeId, TypeConfig};
use crate::types::{decode, encode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{de::DeserializeOwned, Serialize};
use std::time::Duration;

/// A transport failure of one HTTP exchange.
#[derive(Debug)]
pub struct TransportError {
    /// True if no connection could be made (the node is down): openraft backs off longer.
    pub unreachable: bool,
    /// What happened.
    pub what: String,
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

impl std::error::Error for TransportError {}

/// An HTTP answer: status code and body.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: Bytes,
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

fn failure(addr: &str, path: &str, unreachable: bool, e: &dyn std::fmt::Display) -> TransportError {
    TransportError {
        unreachable,
        what: format!("{addr}{path}: {e}"),
    }
}

/// Opens an HTTP/1.1 connection to `addr`.
async fn connect(addr: &str, path: &str) -> Result<Sender, TransportError> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| failure(addr, path, true, &e))?;
    let _ = stream.set_nodelay(true);
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| failure(addr, path, true, &e))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

/// Sends one request on the connection `send` and reads the whole answer.
async fn exchange(
    send: &mut Sender,
    addr: &str,
    path: &str,
    body: Option<(&'static str, Vec<u8>)>,
) -> Result<Answer, TransportError> {
    let fail = |e: &dyn std::fmt::Display| failure(addr, path, false, e);
    send.ready().await.map_err(|e| fail(&e))?;
    let builder = hyper::Request::builder()
        .uri(path)
        .header(hyper::header::HOST, addr);
    let req = match body {
        Some((content_type, b)) => builder
            .method(hyper::Method::POST)
            .header(hyper::header::CONTENT_TYPE, content_type)
            .body(Full::new(Bytes::from(b))),
        None => builder
            .method(hyper::Method::GET)
            .body(Full::new(Bytes::new())),
    }
    .map_err(|e| fail(&e))?;
    let resp = send.send_request(req).await.map_err(|e| fail(&e))?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| fail(&e))?
        .to_bytes();
    Ok(Answer { status, body })
}

/// Sends one request to `addr` (host:port) on a new connection and reads the whole answer,
/// all within `timeout`. `body: None` is a GET.
pub async fn request(
    addr: &str,
    path: &str,
    body: Option<(&'static str, Vec<u8>)>,
    timeout: Duration,
) -> Result<Answer, TransportError> {
    let once = async {
        let mut send = connect(addr, path).await?;
        exchange(&mut send, addr, path, body).await
    };
    match tokio::time::timeout(timeout, once).await {
        Ok(r) => r,
        Err(_) => Err(failure(
            addr,
            path,
            false,
            &format_args!("timed out after {timeout:?}"),
        )),
    }
}

/// The content type of the Raft RPC bodies.
pub const RPC_CONTENT_TYPE: &str = "application/x-cairn-raft";

/// openraft's network over HTTP: connections to the other nodes by their `BasicNode::addr`.
#[derive(Clone, Default)]
pub struct HttpNetwork {}

/// A connection from this node to one other: one HTTP/1.1 connection kept open across RPCs
/// (openraft sends one RPC at a time per target and client), reopened after any failure.
pub struct HttpClient {
    target: NodeId,
    addr: String,
    conn: Option<Sender>,
}

impl RaftNetworkFactory<TypeConfig> for HttpNetwork {
    type Network = HttpClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> HttpClient {
        HttpClient {
            target,
            addr: node.addr.clone(),
            conn: None,
        }
    }
}

impl HttpClient {
    /// One exchange on the kept connection, opening one if there is none (or it closed). A
    /// failure on a connection that had served earlier RPCs (the peer restarted, say) is
    /// retried once on a new connection: every Raft RPC may be delivered twice.
    async fn send(
        &mut self,
        path: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Answer, TransportError> {
        let addr = self.addr.clone();
        let attempt = async {
            let reused = self.conn.as_ref().is_some_and(|c| !c.is_closed());
            let mut send = match self.conn.take() {
                Some(c) if reused => c,
                _ => connect(&addr, path).await?,
            };
            let r = match exchange(
                &mut send,
                &addr,
                path,
                Some((RPC_CONTENT_TYPE, body.clone())),
            )
            .await
            {
                Err(_) if reused => {
                    send = connect(&addr, path).await?;
                    exchange(&mut send, &addr, path, Some((RPC_CONTENT_TYPE, body))).await
                }
                r => r,
            }?;
            self.conn = Some(send);
            Ok(r)
        };
        // A timed-out or failed exchange drops the connection (`take` above): an answer
        // still on its way must not be read as the next RPC's.
        match tokio::time::timeout(timeout, attempt).await {
            Ok(r) => r,
            Err(_) => Err(failure(
                &addr,
                path,
                false,
                &format_args!("timed out after {timeout:?}"),
            )),
        }
    }

    async fn call<Req, Resp, E>(
        &mut self,
        path: &str,
        rpc: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let net = |what: String| {
            let e = std::io::Error::other(what);
            RPCError::Network(NetworkError::new(&e))
        };
        let body = encode(rpc).map_err(net)?;
        let a = self
            .send(path, body, option.hard_ttl())
            .await
            .map_err(|e| {
                if e.unreachable {
                    RPCError::Unreachable(Unreachable::new(&e))
                } else {
                    RPCError::Network(NetworkError::new(&e))
                }
            })?;
        if a.status != 200 {
            return Err(net(format!(
                "{}{path}: HTTP {}: {}",
                self.addr,
                a.status,
                String::from_utf8_lossy(&a.body)
            )));
        }
        let r: Result<Resp, RaftError<NodeId, E>> = decode(&a.body).map_err(net)?;
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for HttpClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call("/raft/append", &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call("/raft/snapshot", &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call("/raft/vote", &rpc, &option).await
    }
}
