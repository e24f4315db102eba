"""Which Spark `mv query` takes (runtime/connect.py), without a server: a stale endpoint is removed, and
`[serve] queries = false` is honoured."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mvengine.config import load_config
from mvengine.errors import ConfigError
from mvengine.runtime.connect import endpoint_path, warm_session


def _project(tmp_path, conf: str = ""):
    (tmp_path / "conf").mkdir(parents=True)
    (tmp_path / "conf" / "mvengine.toml").write_text(conf)
    return load_config(tmp_path)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_endpoint_of_a_process_that_died_is_removed_and_no_session_is_taken(tmp_path):
    config = _project(tmp_path)
    path = endpoint_path(config)
    assert path is not None
    (tmp_path / "warehouse" / "_pipeline").mkdir(parents=True)
    with open(path, "w") as f:
        json.dump({"url": "sc://localhost:1", "token": "t", "pid": _dead_pid()}, f)
    assert warm_session(config) is None
    assert not (tmp_path / "warehouse" / "_pipeline" / "connect.json").exists()


def test_a_live_process_whose_server_does_not_answer_gives_no_session(tmp_path):
    config = _project(tmp_path)
    (tmp_path / "warehouse" / "_pipeline").mkdir(parents=True)
    path = endpoint_path(config)
    assert path is not None
    with open(path, "w") as f:  # this process is alive, but nothing listens on port 1
        json.dump({"url": "sc://localhost:1", "token": "t", "pid": os.getpid()}, f)
    assert warm_session(config) is None


def test_serving_queries_can_be_turned_off_and_the_flag_is_checked(tmp_path):
    assert _project(tmp_path, "[serve]\nqueries = false\n").serve_queries is False
    with pytest.raises(ConfigError, match="queries must be true or false"):
        _project(tmp_path / "x", '[serve]\nqueries = "no"\n')
