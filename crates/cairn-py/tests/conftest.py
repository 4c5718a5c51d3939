import pytest

import cairn


@pytest.fixture
def env(tmp_path):
    e = cairn.open(str(tmp_path / "db"), max_dbs=8)
    yield e
    e.close()


@pytest.fixture
def filled(env):
    with env.begin(write=True) as t:
        for i in range(10):
            t.put(b"k%d" % i, b"v%d" % i)
    return env
