#!/usr/bin/env bash
# A standalone Spark cluster on this machine from the pyspark wheel: a master on 127.0.0.1:7177 and two workers
# (1 core, 6 GiB each), for the benchmarks' `--master spark://127.0.0.1:7177`. `start` waits until both workers
# have registered; `stop` ends them. Logs and work folders under /tmp/mvengine-cluster.
#   bash benchmarks/standalone_cluster.sh start && python benchmarks/refresh_groupby.py --master spark://127.0.0.1:7177 ...
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
SPARK_HOME="$($PY -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$PWD/$PY"
DIR=/tmp/mvengine-cluster
export SPARK_WORKER_DIR=$DIR/work SPARK_LOG_DIR=$DIR/logs
case "${1:-}" in
  start)
    mkdir -p "$DIR"
    nohup "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 7177 \
      --webui-port 8180 > "$DIR/master.log" 2>&1 & echo $! > "$DIR/master.pid"
    for i in 1 2; do
      nohup "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker spark://127.0.0.1:7177 --cores 1 \
        --memory 6g --host 127.0.0.1 --webui-port $((8180 + i)) > "$DIR/worker$i.log" 2>&1 & echo $! > "$DIR/worker$i.pid"
    done
    for _ in $(seq 120); do
      [ "$(grep -c 'Registering worker' "$DIR/master.log" 2>/dev/null || true)" -ge 2 ] && { echo "cluster up: spark://127.0.0.1:7177"; exit 0; }
      sleep 0.5
    done
    echo "the workers did not register; see $DIR/*.log" >&2; exit 1 ;;
  stop)
    for f in "$DIR"/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; rm -f "$f"; done ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
