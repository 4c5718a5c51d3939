"""The Flask + py-lmdb peer of `make bench-serve` (bench/serve/run.py), the published
comparison's own setup: a Flask app under gunicorn over an LMDB environment.

- `POST /<collection>`: a JSON object in, stored under a new sortable id in one write
  transaction; 201 with Location once committed. The environment is opened with sync=True
  (LMDB's default): the commit is flushed before the answer, as in `cairn serve`'s default.
- `PUT /<collection>/<id>`: the same under a given id.
- `GET /<collection>/<id>`: the document, or 404.

Collections are named databases, as in `cairn serve`. The environment's directory is
$BENCH_LMDB_DIR. Each gunicorn worker process opens the environment after the fork
(post_fork would do as well; opening lazily keeps the app self-contained).
"""

import json
import os
import threading
import time

import lmdb
from flask import Flask, Response, request

app = Flask(__name__)
_env = None
_dbs = {}
_lock = threading.Lock()
_seq = 0


def env():
    global _env
    if _env is None:
        _env = lmdb.open(os.environ["BENCH_LMDB_DIR"], map_size=8 << 30, max_dbs=16, sync=True)
    return _env


def db(name):
    d = _dbs.get(name)
    if d is None:
        d = _dbs[name] = env().open_db(name.encode())
    return d


def new_id():
    # Microseconds, the worker's pid and a counter: sortable by time, unique across workers.
    global _seq
    with _lock:
        _seq += 1
        s = _seq
    return f"{time.time_ns() // 1000:016x}{os.getpid() & 0xFFFF:04x}{s & 0xFFFF:04x}"


def error(status, msg):
    return Response(json.dumps({"error": msg}), status=status, mimetype="application/json")


def store(coll, id_, status):
    if not (request.content_type or "").startswith("application/json"):
        return error(415, "content-type must be application/json")
    try:
        doc = json.loads(request.get_data())
    except ValueError as e:
        return error(400, str(e))
    if not isinstance(doc, dict):
        return error(400, "the document must be a JSON object")
    with env().begin(write=True, db=db(coll)) as txn:
        txn.put(id_.encode(), json.dumps(doc, separators=(",", ":")).encode())
    r = Response(json.dumps({"id": id_}), status=status, mimetype="application/json")
    r.headers["Location"] = f"/{coll}/{id_}"
    return r


@app.post("/<coll>")
def create(coll):
    return store(coll, new_id(), 201)


@app.put("/<coll>/<id_>")
def put(coll, id_):
    return store(coll, id_, 200)


@app.get("/<coll>/<id_>")
def read(coll, id_):
    with env().begin(db=db(coll)) as txn:
        v = txn.get(id_.encode())
    if v is None:
        return error(404, "no such document")
    return Response(v, mimetype="application/json")


def preload(directory, docs):
    """Writes `docs` ({id: document}) into collection `bench` of a fresh environment."""
    e = lmdb.open(directory, map_size=8 << 30, max_dbs=16, sync=True)
    d = e.open_db(b"bench")
    with e.begin(write=True, db=d) as txn:
        for k, v in docs.items():
            txn.put(k.encode(), json.dumps(v, separators=(",", ":")).encode())
    e.close()
