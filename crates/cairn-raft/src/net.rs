//! The network between processes: openraft's RPCs over HTTP/1.1 (axum serves them, hyper's
//! client sends them), and the HTTP client the cluster commands and tests use.
//!
//! Raft RPCs are `POST /raft/append`, `/raft/vote` and `/raft/snapshot` (one chunk of a
//! snapshot per request: openraft splits the snapshot file into `snapshot_max_chunk_size`
//! pieces and resumes by offset), their bodies openraft's request types encoded with the
//! crate's encoding (postcard, types.rs), their answers `Result<response, RaftError>` encoded
//! alike. The client routes (JSON) are in cluster.rs; docs/replication.md, "Network".
//!
//! Invariant: one RPC is one HTTP request on its own connection; a transport failure (refused,
//! reset, timed out) is openraft's `Unreachable`/`Network` error, so openraft backs off and
//! retries, and an answer from the remote `Raft` is returned as it was given.

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

/// Sends one request to `addr` (host:port) on a new connection and reads the whole answer,
/// all within `timeout`. `body: None` is a GET.
pub async fn request(
    addr: &str,
    path: &str,
    body: Option<(&'static str, Vec<u8>)>,
    timeout: Duration,
) -> Result<Answer, TransportError> {
    let fail = |unreachable: bool| {
        move |e: &dyn std::fmt::Display| TransportError {
            unreachable,
            what: format!("{addr}{path}: {e}"),
        }
    };
    let exchange = async {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| fail(true)(&e))?;
        let _ = stream.set_nodelay(true);
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| fail(true)(&e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
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
        .map_err(|e| fail(false)(&e))?;
        let resp = send.send_request(req).await.map_err(|e| fail(false)(&e))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| fail(false)(&e))?
            .to_bytes();
        Ok(Answer { status, body })
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(fail(false)(&format_args!("timed out after {timeout:?}"))),
    }
}

/// The content type of the Raft RPC bodies.
pub const RPC_CONTENT_TYPE: &str = "application/x-cairn-raft";

/// openraft's network over HTTP: connections to the other nodes by their `BasicNode::addr`.
#[derive(Clone, Default)]
pub struct HttpNetwork {}

/// A connection from this node to one other.
pub struct HttpClient {
    target: NodeId,
    addr: String,
}

impl RaftNetworkFactory<TypeConfig> for HttpNetwork {
    type Network = HttpClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> HttpClient {
        HttpClient {
            target,
            addr: node.addr.clone(),
        }
    }
}

impl HttpClient {
    async fn call<Req, Resp, E>(
        &self,
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
        let a = request(
            &self.addr,
            path,
            Some((RPC_CONTENT_TYPE, body)),
            option.hard_ttl(),
        )
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
