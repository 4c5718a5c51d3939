//! Recorded client histories and a linearizability checker for them (issue 25's check of
//! "what a client is promised", docs/replication.md).
//!
//! Clients of a cluster record each operation they perform on a key-value map (a put, or a
//! read and the value it returned) with the instants it was invoked and answered; [`check`]
//! decides whether some total order of the operations (a linearization) is consistent with
//! those instants (an operation answered before another was invoked comes first) and with a
//! map of registers (a read returns the value of the last put before it, or nothing if none).
//!
//! The search is Wing & Gong's, with Lowe's memoization (a configuration already explored, the
//! set of linearized operations and the register's value, is not explored again), run on each
//! key apart: for a map of independent registers the history is linearizable exactly when
//! each key's sub-history is (linearizability is local, Herlihy & Wing).
//!
//! Invariants:
//! - A put whose outcome the client does not know (a timeout, a lost connection, a refusal
//!   that may have come after the entry was proposed) is recorded with no answer instant
//!   ([`Operation::ret`] `None`): the checker lets it take effect at any point after its
//!   invocation, the end of the history included (where its effect is unobservable, which is
//!   how "it never happened" is modelled). A read whose answer was not received constrains
//!   nothing and is not recorded; a recorded read without an answer is refused as bad input.
//! - Instants are taken by the recording client itself, before sending and after receiving,
//!   so a recorded interval contains the real one: widening intervals only admits more
//!   orders, so a violation found is a real one.
//! - A put of unknown outcome whose value no read of its key returned is left out of the
//!   search: it can always be linearized last, where it changes nothing observed, so it
//!   neither makes nor breaks a linearization; left in, each such put would double the
//!   configurations to explore (a client retrying against a dead leader makes many).
//! - Equal instants count as overlapping (an invocation sorts before an answer at the same
//!   instant), again the permissive choice.
//! - A stale-bounded read (`Node::read_bounded` with bound B) is recorded by
//!   [`History::perform_bounded_read`] with its invocation instant moved B earlier: the check
//!   then asks for a linearization in which the read takes effect at some point no earlier
//!   than B before it began (and no later than its answer), which is what a bound of B
//!   promises in real time; every other operation keeps its own interval.
//! - The search is bounded: at most `budget` steps per key, after which the verdict is
//!   [`CheckError::Undecided`], never a silent pass.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What an operation did.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A put of the value (`None`: a delete).
    Put(Option<String>),
    /// A read, with the value it returned (`None`: the key was absent).
    Get(Option<String>),
}

/// One operation of a recorded history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// The client that performed it (for reports only: the check needs no client order).
    pub client: u64,
    /// The key (of one database; a history covers one database).
    pub key: String,
    /// What it did.
    pub kind: Kind,
    /// When it was invoked, in nanoseconds since the history began.
    pub call: u64,
    /// When its answer arrived; `None` when its outcome is unknown (puts only).
    pub ret: Option<u64>,
}

/// The answer a client got for one operation (see [`History::perform`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A put was acknowledged.
    Written,
    /// A read returned this value.
    Read(Option<String>),
    /// No answer, or an answer that does not say whether the operation took effect.
    Unknown,
    /// The operation certainly did not take effect (no connection could be made, or the node
    /// refused it before proposing it): it is not recorded.
    Refused,
}

/// A history being recorded by concurrent clients.
pub struct History {
    start: Instant,
    ops: Mutex<Vec<Operation>>,
}

impl Default for History {
    fn default() -> History {
        History::new()
    }
}

impl History {
    /// An empty history; its clock starts now.
    pub fn new() -> History {
        History {
            start: Instant::now(),
            ops: Mutex::new(Vec::new()),
        }
    }

    /// Nanoseconds since the history began (monotonic).
    pub fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Records one operation.
    pub fn record(&self, op: Operation) {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).push(op);
    }

    /// Performs one operation through `run` and records it: a put of `put` when it is
    /// `Some(value)`, else a read of `key`. The invocation instant is taken before `run` starts
    /// and the answer instant after it ends. A read whose outcome is unknown and any refused
    /// operation are not recorded. Returns the outcome.
    pub async fn perform<F: Future<Output = Outcome>>(
        &self,
        client: u64,
        key: &str,
        put: Option<String>,
        run: F,
    ) -> Outcome {
        let call = self.now();
        let outcome = run.await;
        let ret = self.now();
        let (kind, ret) = match (put, &outcome) {
            (_, Outcome::Refused) => return outcome,
            (Some(v), Outcome::Written) => (Kind::Put(Some(v)), Some(ret)),
            (Some(v), _) => (Kind::Put(Some(v)), None),
            (None, Outcome::Read(v)) => (Kind::Get(v.clone()), Some(ret)),
            (None, _) => return outcome,
        };
        self.record(Operation {
            client,
            key: key.to_string(),
            kind,
            call,
            ret,
        });
        outcome
    }

    /// Performs a stale-bounded read of `key` through `run` and, if it answered, records it
    /// with its invocation instant moved `bound` earlier (module invariants). Returns the
    /// outcome.
    pub async fn perform_bounded_read<F: Future<Output = Outcome>>(
        &self,
        client: u64,
        key: &str,
        bound: Duration,
        run: F,
    ) -> Outcome {
        let call = self.now();
        let outcome = run.await;
        let ret = self.now();
        if let Outcome::Read(v) = &outcome {
            let back = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
            self.record(Operation {
                client,
                key: key.to_string(),
                kind: Kind::Get(v.clone()),
                call: call.saturating_sub(back),
                ret: Some(ret),
            });
        }
        outcome
    }

    /// The operations recorded so far.
    pub fn operations(&self) -> Vec<Operation> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Why a history is not (known to be) linearizable.
#[derive(Debug)]
pub enum CheckError {
    /// No linearization of this key's operations exists.
    NotLinearizable {
        /// The key.
        key: String,
        /// The key's operations, by invocation instant.
        ops: Vec<Operation>,
        /// The longest order of some of them the search could build, in that order: the
        /// operation after it (in real time) is where every attempt failed.
        longest: Vec<Operation>,
    },
    /// The search for this key ran out of its step budget.
    Undecided {
        /// The key.
        key: String,
        /// Steps taken.
        steps: u64,
    },
    /// An operation the checker cannot interpret.
    BadInput {
        /// The operation.
        op: Operation,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::NotLinearizable { key, ops, longest } => {
                writeln!(
                    f,
                    "key {key:?}: not linearizable ({} operations; the longest linearizable \
                     order found has {}):",
                    ops.len(),
                    longest.len()
                )?;
                for o in longest.iter().rev().take(5).rev() {
                    writeln!(f, "  linearized: {o:?}")?;
                }
                let done: Vec<&Operation> = longest.iter().collect();
                for o in ops.iter().filter(|o| !done.contains(o)).take(5) {
                    writeln!(f, "  pending:    {o:?}")?;
                }
                Ok(())
            }
            CheckError::Undecided { key, steps } => {
                write!(f, "key {key:?}: undecided after {steps} search steps")
            }
            CheckError::BadInput { op, why } => write!(f, "{why}: {op:?}"),
        }
    }
}

impl std::error::Error for CheckError {}

/// What a successful check covered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Keys (independent sub-histories).
    pub keys: usize,
    /// Operations.
    pub ops: usize,
    /// Reads.
    pub reads: usize,
    /// Operations whose outcome was unknown.
    pub unknown: usize,
    /// Search steps over all keys.
    pub steps: u64,
}

impl std::fmt::Display for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} operations on {} keys ({} reads, {} puts of unknown outcome): linearizable, \
             {} search steps",
            self.ops, self.keys, self.reads, self.unknown, self.steps
        )
    }
}

/// Decides whether `ops` is linearizable as a map of registers that start absent, taking at
/// most `budget` search steps per key.
pub fn check(ops: &[Operation], budget: u64) -> Result<Checked, CheckError> {
    let mut by_key: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    for op in ops {
        match (&op.kind, op.ret) {
            (Kind::Get(_), None) => {
                return Err(CheckError::BadInput {
                    op: op.clone(),
                    why: "a read without an answer",
                })
            }
            (_, Some(r)) if r < op.call => {
                return Err(CheckError::BadInput {
                    op: op.clone(),
                    why: "answered before it was invoked",
                })
            }
            _ => {}
        }
        by_key.entry(&op.key).or_default().push(op);
    }
    let mut done = Checked {
        keys: by_key.len(),
        ops: ops.len(),
        reads: ops
            .iter()
            .filter(|o| matches!(o.kind, Kind::Get(_)))
            .count(),
        unknown: ops.iter().filter(|o| o.ret.is_none()).count(),
        steps: 0,
    };
    for (key, mut ops) in by_key {
        let seen: HashSet<&Option<String>> = ops
            .iter()
            .filter_map(|o| match &o.kind {
                Kind::Get(v) => Some(v),
                Kind::Put(_) => None,
            })
            .collect();
        ops.retain(|o| match &o.kind {
            Kind::Put(v) => o.ret.is_some() || seen.contains(v),
            Kind::Get(_) => true,
        });
        ops.sort_by_key(|o| o.call);
        done.steps += search(key, &ops, budget)?;
    }
    Ok(done)
}

/// The register's transition: `Some(new value)` if `kind` may happen in state `state`.
fn step(state: &Option<String>, kind: &Kind) -> Option<Option<String>> {
    match kind {
        Kind::Put(v) => Some(v.clone()),
        Kind::Get(v) => (v == state).then(|| state.clone()),
    }
}

const NIL: usize = usize::MAX;

/// Wing & Gong's search over one key's operations (`ops`, by invocation instant), with Lowe's
/// memoization; returns the steps it took.
///
/// The invocations and answers form one doubly linked list in time order (node 0 is the
/// head; operation `i` has its invocation at node `2i+1` and its answer at `2i+2`, linked in
/// time order). The search walks the list: at an invocation it tries to linearize that
/// operation next (the register allows it, and the resulting configuration is new), which
/// lifts both of its nodes out of the list and restarts from the head; at an answer, the
/// operation answered there was not linearized although everything after it must follow it,
/// so the last choice is undone (its nodes put back) and the walk goes on after it. The list
/// emptied is a linearization; backtracking with nothing to undo means there is none.
fn search(key: &str, ops: &[&Operation], budget: u64) -> Result<u64, CheckError> {
    let n = ops.len();
    // Time order of the 2n events; an unknown answer is after everything.
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * n);
    for (i, o) in ops.iter().enumerate() {
        events.push((o.call, false, 2 * i + 1));
        events.push((o.ret.unwrap_or(u64::MAX), true, 2 * i + 2));
    }
    // Invocations (false) sort before answers (true) at equal instants: they overlap.
    events.sort();
    let mut next = vec![NIL; 2 * n + 1];
    let mut prev = vec![NIL; 2 * n + 1];
    let mut last = 0;
    for &(_, _, node) in &events {
        next[last] = node;
        prev[node] = last;
        last = node;
    }
    let unlink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, x: usize| {
        let (p, nx) = (prev[x], next[x]);
        next[p] = nx;
        if nx != NIL {
            prev[nx] = p;
        }
    };
    // Relinking in the reverse order of unlinking restores the list exactly.
    let relink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, x: usize| {
        let (p, nx) = (prev[x], next[x]);
        next[p] = x;
        if nx != NIL {
            prev[nx] = x;
        }
    };

    let mut linearized = vec![0u64; n.div_ceil(64)];
    let mut seen: HashSet<(Vec<u64>, Option<String>)> = HashSet::new();
    // The choices made: the invocation node lifted and the register's value before it.
    let mut stack: Vec<(usize, Option<String>)> = Vec::new();
    let mut longest: Vec<usize> = Vec::new();
    let mut state: Option<String> = None;
    let mut node = next[0];
    let mut steps = 0u64;
    while next[0] != NIL {
        steps += 1;
        if steps > budget {
            return Err(CheckError::Undecided {
                key: key.to_string(),
                steps,
            });
        }
        let is_call = node != NIL && node % 2 == 1;
        if is_call {
            let i = (node - 1) / 2;
            if let Some(after) = step(&state, &ops[i].kind) {
                linearized[i / 64] |= 1 << (i % 64);
                if seen.insert((linearized.clone(), after.clone())) {
                    stack.push((node, std::mem::replace(&mut state, after)));
                    unlink(&mut next, &mut prev, node);
                    unlink(&mut next, &mut prev, node + 1);
                    if stack.len() > longest.len() {
                        longest = stack.iter().map(|&(c, _)| (c - 1) / 2).collect();
                    }
                    node = next[0];
                    continue;
                }
                linearized[i / 64] &= !(1 << (i % 64));
            }
            node = next[node];
        } else {
            // An answer (or, defensively, the end): undo the last choice.
            let Some((call, before)) = stack.pop() else {
                return Err(CheckError::NotLinearizable {
                    key: key.to_string(),
                    ops: ops.iter().map(|&o| o.clone()).collect(),
                    longest: longest.iter().map(|&i| ops[i].clone()).collect(),
                });
            };
            let i = (call - 1) / 2;
            linearized[i / 64] &= !(1 << (i % 64));
            state = before;
            relink(&mut next, &mut prev, call + 1);
            relink(&mut next, &mut prev, call);
            node = next[call];
        }
    }
    Ok(steps)
}

/// xorshift64: a small deterministic generator for workloads and test histories.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (a zero seed is replaced: xorshift needs a non-zero state).
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// A deterministic choice of operations for one recording client: puts (of values unique in
/// the history: `c{client}-{n}`) and reads, in about equal numbers, over `keys` keys, so that
/// clients contend on every key and reads identify the put they saw.
pub struct Workload {
    client: u64,
    keys: u64,
    n: u64,
    rng: Rng,
}

impl Workload {
    /// The workload of client `client` over keys `k0` .. `k{keys-1}`.
    pub fn new(client: u64, keys: u64) -> Workload {
        Workload {
            client,
            keys: keys.max(1),
            n: 0,
            rng: Rng::new(0x9E37_79B9_7F4A_7C15 ^ client.wrapping_mul(0xA24B_AED4_963E_E407)),
        }
    }

    /// The next operation: its key, and the value to put (`None`: a read).
    pub fn next_op(&mut self) -> (String, Option<String>) {
        let r = self.rng.next_u64();
        let key = format!("k{}", r % self.keys);
        self.n += 1;
        let put = (r >> 32).is_multiple_of(2);
        (key, put.then(|| format!("c{}-{}", self.client, self.n)))
    }
}
